"""notifier end to end over real processes on a real bus: a plan's sets end, the rest
timer runs, `vbt rest` pauses, resumes and skips it, the plan advances (and tells the
rep detector); a simulated fatigue set through the real sensor-bridge and rep-detector
gives exactly one velocity-loss alert; a real posture-evaluator's slouch raises and
clears an alert; timers and open alerts survive a restart. Every message validates
against proto/."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

import zmq

from test_wire import (Bus, binary, bus, read_recording, read_stats, received_by_topic,  # noqa: F401 (fixture)
                       validate_message, wait_until)

STATION = "rack-01"

PLAN = {"athlete": "ana", "plan": "ana-strength", "exercises": [
    {"exercise": "squat", "sets": 2, "reps": 5, "rest_s": 4, "load_kg": 100.0},
    {"exercise": "bench", "sets": 1, "reps": 8, "rest_s": 3, "load_kg": 60.0},
]}


def messages(path: Path) -> list[dict]:
    """The recording so far (a line being written is left for the next look)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line)["msg"])
        except ValueError:
            break
    return out


def of(path: Path, msg_type: str, station: str | None = STATION, /, **match) -> list[dict]:
    """Recorded messages of a type and station whose fields equal `match`."""
    return [m for m in messages(path) if m["type"] == msg_type and (station is None or m["station"] == station)
            and all(m.get(k) == v for k, v in match.items())]


def pub(bus: Bus, topic: str, fields: dict, athlete: str | None = None) -> None:
    bus.run(["vbt", "pub", topic, json.dumps(fields), "--rate", "0"] + (["--athlete", athlete] if athlete else []))


def set_end(bus: Bus, set_id: str, reason: str = "idle", loss: float = 8.0) -> None:
    pub(bus, f"set.{STATION}", {"set_id": set_id, "event": "end", "reps": 5, "reason": reason,
                                "best_mean_velocity_mps": 0.6, "velocity_loss_pct": loss}, athlete="ana")


def start(bus: Bus, tmp_path: Path, name: str = "notifier", extra: list[str] | None = None, rec: bool = True):
    out = tmp_path / "notifier.jsonl"
    if rec:
        recorder = bus.spawn("record", ["vbt", "record", "--out", str(out), "timer.", "alert.", "workout.", "cmd.", "ack.",
                                        "heartbeat.notifier"])
        recorder.wait_for_log("bus connected")
    notifier = bus.spawn(name, ["notifier", "--state", str(tmp_path / "notifier.json"), *(extra or [])])
    notifier.wait_for_log("bus connected")
    return notifier, out


def validate_all(path: Path) -> None:
    """Validates every whole line of a recording `vbt record` may still be writing (its last
    line can be half written: it is left for the next look)."""
    text = path.read_text(encoding="utf-8")
    for line in text[: text.rfind("\n") + 1].splitlines():
        if line.strip():
            validate_message(json.loads(line)["msg"])


def test_rest_timer_pause_resume_skip_and_plan_progress(bus: Bus, tmp_path: Path):
    notifier, rec = start(bus, tmp_path)
    # No rest yet: the notifier refuses a pause and says why (ack.<station>); vbt exits 1 with its reason.
    refused = subprocess.run([binary("vbt"), "rest", "pause", STATION], env=bus.env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert refused.returncode == 1 and f"no rest timer at {STATION}" in refused.stderr, refused.stderr
    answer = wait_until(lambda: of(rec, "ack"), "the notifier's answer on the bus")[0]
    assert (answer["program"], answer["state"], answer["command"]) == ("notifier", "refused", "rest.pause")
    pub(bus, f"cmd.{STATION}", {"id": "p1", "command": "plan.assign", "target": "*", "args": PLAN})
    wait_until(lambda: of(rec, "workout", event="plan-assigned"), "the plan to be taken", detail=bus.describe)
    assigned = wait_until(lambda: [m for m in of(rec, "cmd") if m["src"].startswith("notifier-")],
                          "the notifier to assign the first exercise", detail=bus.describe)
    assert assigned[0]["command"] == "athlete.assign" and assigned[0]["target"] == "*"
    assert assigned[0]["args"] == {"athlete": "ana", "exercise": "squat", "load_kg": 100, "rest_s": 4, "vl_threshold_pct": 20}

    # Set 1 ends: a 4 s rest ticks every second.
    set_end(bus, "s1")
    wait_until(lambda: len(of(rec, "timer", state="running")) >= 2, "two timer ticks", detail=bus.describe)
    first = of(rec, "timer", state="running")[0]
    assert first["duration_s"] == 4 and first["remaining_s"] == 4 and first["athlete"] == "ana"
    assert first["set_id"] == "s1" and first["exercise"] == "squat"

    # Pause: the remaining time holds over several ticks.
    bus.run(["vbt", "rest", "pause", STATION])
    wait_until(lambda: len(of(rec, "timer", state="paused")) >= 3, "three paused ticks", detail=bus.describe)
    paused = of(rec, "timer", state="paused")
    assert len({m["remaining_s"] for m in paused}) == 1 and 0 < paused[0]["remaining_s"] < 4, paused
    assert all(m["timer_id"] == first["timer_id"] for m in paused)
    bus.run(["vbt", "rest", "resume", STATION])
    over = wait_until(lambda: of(rec, "timer", state="over"), "the rest to run out", detail=bus.describe)[0]
    ticks = [m for m in of(rec, "timer") if m["timer_id"] == first["timer_id"]]
    running_after = [m for m in ticks if m["state"] == "running" and m["ts"] > paused[-1]["ts"]]
    assert running_after and abs(running_after[0]["remaining_s"] - paused[0]["remaining_s"]) <= 0.002, "resume continues from the paused time"
    # It ran 4 s of rest plus the pause.
    assert over["ts"] - first["ts"] >= 4 + (paused[-1]["ts"] - paused[0]["ts"]) - 0.2
    notice = wait_until(lambda: of(rec, "alert", kind="rest-over"), "the rest-over notification")[0]
    assert notice["state"] == "notice" and notice["severity"] == "info" and "set 2 of 2" in notice["message"], notice
    progress = wait_until(lambda: of(rec, "workout", event="rest-over"), "the plan to advance")[0]
    assert (progress["exercise"], progress["set"], progress["sets"], progress["state"]) == ("squat", 2, 2, "ready")

    # Set 2 ends; skip the rest: the plan moves to bench, and the detector is told.
    set_end(bus, "s2")
    wait_until(lambda: [m for m in of(rec, "timer", state="running") if m["set_id"] == "s2"], "the second rest")
    bus.run(["vbt", "rest", "skip", STATION])
    wait_until(lambda: of(rec, "timer", state="skipped"), "the skip", detail=bus.describe)
    progress = wait_until(lambda: of(rec, "workout", event="rest-skipped"), "the plan to move to bench")[0]
    assert (progress["exercise"], progress["set"], progress["sets"], progress["reps"], progress["load_kg"]) == ("bench", 1, 1, 8, 60)
    assert progress["exercise_index"] == 2 and progress["exercises"] == 2
    bench = wait_until(lambda: [m for m in of(rec, "cmd") if m["src"].startswith("notifier-") and m["args"]["exercise"] == "bench"],
                       "athlete.assign for bench")[0]
    assert bench["args"]["load_kg"] == 60 and bench["args"]["rest_s"] == 3

    # The last set: the plan is done, no rest.
    set_end(bus, "s3")
    wait_until(lambda: of(rec, "workout", event="plan-done"), "the plan to finish", detail=bus.describe)
    # Nothing to control now: the command is refused with a reason (vbt exits 1 with it).
    refused = subprocess.run([binary("vbt"), "rest", "pause", STATION], env=bus.env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert refused.returncode == 1 and f"no rest timer at {STATION}" in refused.stderr, refused.stderr
    notifier.wait_for_log("no rest timer at rack-01")
    assert notifier.terminate() == 0, notifier.describe()
    assert len(of(rec, "alert", kind="rest-over")) == 1, "a skipped rest sends no notification"
    validate_all(rec)


def test_fatigue_set_gives_exactly_one_velocity_loss_alert(bus: Bus, tmp_path: Path):
    """The real chain: simulated bar (laser) -> rep-detector -> notifier."""
    notifier, rec = start(bus, tmp_path)
    detector = bus.spawn("rep-detector", ["rep-detector", "--idle-timeout", "6"])
    detector.wait_for_log("bus connected")
    reps_rec, reps_stats = tmp_path / "reps.jsonl", tmp_path / "reps.stats.json"
    recorder = bus.spawn("record-reps", ["vbt", "record", "--out", str(reps_rec), "--stats", str(reps_stats),
                                         "--stats-interval", "0.1", "rep.", "set."])
    recorder.wait_for_log("bus connected")
    pub(bus, "cmd.fat-01", {"id": "a1", "command": "athlete.assign", "target": "*",
                            "args": {"athlete": "bo", "exercise": "squat", "load_kg": 120, "vl_threshold_pct": 20}})
    wait_until(lambda: of(rec, "workout", "fat-01", event="athlete-assigned"), "the assignment", detail=bus.describe)
    # 12 reps losing 2-4 % each: the detector stops the set at the threshold.
    bus.run(["sensor-bridge", "--simulate", "--station", "fat-01", "--speed", "0", "--sets", "1", "--reps", "12",
             "--rest", "8", "--imu-rate", "0", "--load-kg", "120", "--seed", "3"], timeout=90)
    wait_until(lambda: [m for m in messages(reps_rec) if m["type"] == "set" and m["event"] == "end"
                        and m["reason"] == "velocity-loss"], "the detector's velocity-loss stop", detail=bus.describe)
    stop = [m for m in messages(reps_rec) if m["type"] == "set" and m["event"] == "end" and m["reason"] == "velocity-loss"][0]
    crossing = [m for m in messages(reps_rec) if m["type"] == "rep" and m["set_id"] == stop["set_id"] and m["velocity_loss_pct"] >= 20]
    assert crossing, "the stopping set has a rep at the threshold"
    wait_until(lambda: of(rec, "alert", "fat-01", kind="velocity-loss"), "the velocity-loss alert", detail=bus.describe)
    # Let every rep and set end the detector made reach the notifier, then count.
    wait_until(lambda: of(rec, "timer", "fat-01", station="fat-01"), "the rest timer after the set", detail=bus.describe)
    assert notifier.terminate() == 0, notifier.describe()
    alerts = of(rec, "alert", "fat-01", kind="velocity-loss")
    assert len(alerts) == 1, alerts
    alert = alerts[0]
    assert alert["state"] == "notice" and alert["severity"] == "warning" and alert["athlete"] == "bo"
    assert alert["set_id"] == stop["set_id"] and alert["threshold_pct"] == 20 and alert["velocity_loss_pct"] >= 20
    assert "stop the set" in alert["message"] or "stopped" in alert["message"], alert["message"]
    # Nothing else alarming about this station (the bridge's own exit may show as a missing heartbeat).
    others = [a for a in of(rec, "alert", "fat-01", station="fat-01") if a["kind"] not in ("velocity-loss", "heartbeat-missing")]
    assert others == [], others
    assert detector.terminate() == 0 and recorder.terminate() == 0
    validate_all(rec)


def test_posture_slouch_raises_and_clears_an_alert(bus: Bus, tmp_path: Path):
    """The real posture-evaluator judges a pyzmq wearable; the notifier follows its flag."""
    from test_posture_e2e import STATION as DESK, Wearable
    notifier, rec = start(bus, tmp_path)
    evaluator = bus.spawn("posture-evaluator", ["posture-evaluator", "--calibrations", str(tmp_path / "cal.json"),
                                                "--sustained-bad", "3"])
    evaluator.wait_for_log("bus connected")
    wearable = Wearable(bus)
    try:
        bus.run(["vbt", "posture", "calibrate", "--station", DESK, "--athlete", "ana", "--seconds", "2", "--no-check"])
        evaluator.wait_for_log("posture calibration started")
        wearable.hold(0, 2.5)
        evaluator.wait_for_log("posture calibration")
        wearable.hold(0, 1)
        assert of(rec, "alert", DESK, station=DESK) == []
        wearable.hold(30, 6)      # slouch: bad for more than the 3 s limit
        raised = wait_until(lambda: of(rec, "alert", DESK, kind="posture", state="raised"), "the posture alert",
                            detail=bus.describe)
        assert raised[0]["severity"] == "warning" and raised[0]["alert_id"] == f"{DESK}/posture"
        assert raised[0]["bad_for_s"] >= 3 and "posture" in raised[0]["message"]
        wearable.hold(0, 2)       # sit straight
        cleared = wait_until(lambda: of(rec, "alert", DESK, kind="posture", state="cleared"), "the clear",
                             detail=bus.describe)
        assert cleared[0]["alert_id"] == raised[0]["alert_id"]
    finally:
        wearable.close()
    assert notifier.terminate() == 0
    posture_alerts = of(rec, "alert", DESK, kind="posture")
    # Raised once (the evaluator reports 5 times a second; repeats wait a minute), cleared once.
    assert [a["state"] for a in posture_alerts] == ["raised", "cleared"], posture_alerts
    assert posture_alerts[1]["suppressed"] > 0
    validate_all(rec)


def test_timers_and_open_alerts_survive_a_restart(bus: Bus, tmp_path: Path):
    notifier, rec = start(bus, tmp_path)
    pub(bus, f"cmd.{STATION}", {"id": "p1", "command": "plan.assign", "target": "*",
                                "args": {"athlete": "ana", "exercises": [{"exercise": "squat", "sets": 3, "reps": 5, "rest_s": 60}]}})
    set_end(bus, "s1")
    pub(bus, f"status.{STATION}", {"state": "disconnected", "sensor": "imu", "device": "sim", "reason": "link lost; retrying"})
    wait_until(lambda: of(rec, "alert", kind="sensor-disconnected") and len(of(rec, "timer", state="running")) >= 2,
               "a running rest and an open alert", detail=bus.describe)
    before = of(rec, "timer", state="running")[-1]
    assert notifier.terminate() == 0, notifier.describe()
    # Journalling by default, the restarted notifier goes on with its predecessor's streams (proto/replay.md):
    # its ticks are those after the ones sent before it stopped.
    sent_before = len(of(rec, "timer", state="running"))
    state = json.loads((tmp_path / "notifier.json").read_text())
    assert state["stations"][STATION]["timer"]["durationS"] == 60
    assert f"{STATION}/sensor-disconnected/imu" in state["alerts"]["open"]

    again = bus.spawn("notifier-2", ["notifier", "--state", str(tmp_path / "notifier.json")])
    again.wait_for_log("notifier state restored")
    assert "timers=1" in again.stderr() and "open_alerts=1" in again.stderr(), again.stderr()
    wait_until(lambda: of(rec, "timer", state="running")[sent_before:], "the restarted notifier's ticks", detail=bus.describe)
    after = of(rec, "timer", state="running")[sent_before]
    assert after["timer_id"] == before["timer_id"]
    # The same end on the wall clock: the time down counted as rest.
    assert abs(after["ends_at"] - before["ends_at"]) < 0.01, (before, after)
    assert after["remaining_s"] < before["remaining_s"]
    pub(bus, f"status.{STATION}", {"state": "streaming", "sensor": "imu", "device": "sim", "rate_hz": 100})
    cleared = wait_until(lambda: of(rec, "alert", kind="sensor-disconnected", state="cleared"), "the clear after restart",
                         detail=bus.describe)
    assert cleared[0]["alert_id"] == f"{STATION}/sensor-disconnected/imu"
    assert [a["state"] for a in of(rec, "alert", kind="sensor-disconnected")] == ["raised", "cleared"]
    assert again.terminate() == 0
    validate_all(rec)


def test_missing_heartbeat_and_sensor_rate_alerts(bus: Bus, tmp_path: Path):
    notifier, rec = start(bus, tmp_path, extra=["--missed-heartbeats", "2"])
    src = f"py-detector-{secrets.token_hex(4)}/heartbeat.rep-detector"
    ctx = zmq.Context()
    sock = ctx.socket(zmq.XPUB)
    sock.setsockopt(zmq.LINGER, 1000)
    sock.connect(bus.pub_endpoint)
    try:
        seen: list[bytes] = []

        def subscribed() -> bool:
            if sock.poll(100, zmq.POLLIN):
                seen.append(sock.recv())
            return any(b"heartbeat.rep-detector".startswith(t[1:]) for t in seen if t[:1] == b"\x01")
        wait_until(subscribed, "the notifier's subscription to reach this publisher", detail=bus.describe)
        beat = {"v": 1, "type": "heartbeat", "station": "rep-detector", "src": src, "seq": 0, "ts": 1.0,
                "role": "rep-detector", "uptime_s": 1.0, "interval_s": 0.5}

        def send_beat() -> None:
            beat["seq"] += 1
            sock.send_multipart([b"heartbeat.rep-detector", json.dumps(beat).encode()])
        send_beat()
        # Then silence: missing after 2 intervals, and at least interval + 2 s.
        raised = wait_until(lambda: of(rec, "alert", "rep-detector", kind="heartbeat-missing"), "the missing heartbeat",
                            detail=bus.describe)
        assert raised[0]["severity"] == "critical" and raised[0]["program"] == "rep-detector" and raised[0]["silent_s"] >= 2.5
        send_beat()
        wait_until(lambda: of(rec, "alert", "rep-detector", kind="heartbeat-missing", state="cleared"), "the clear",
                   detail=bus.describe)
    finally:
        sock.close()
        ctx.term()
    pub(bus, f"status.{STATION}", {"state": "streaming", "sensor": "distance", "device": "sim", "rate_hz": 50})
    pub(bus, f"status.{STATION}", {"state": "streaming", "sensor": "distance", "device": "sim", "rate_hz": 12})
    rate = wait_until(lambda: of(rec, "alert", kind="sensor-rate"), "the rate alert", detail=bus.describe)[0]
    assert rate["rate_hz"] == 12 and rate["expected_rate_hz"] == 50 and rate["sensor"] == "distance"
    assert notifier.terminate() == 0
    validate_all(rec)


def test_notifier_schemas_accept_good_and_reject_bad_messages():
    from test_wire import envelope, schema_errors
    good = {
        "timer": envelope("timer", STATION, {"timer_id": "rack-01-rest-1", "state": "running", "duration_s": 120,
                                             "remaining_s": 80.5, "ends_at": 1_763_812_400.0, "set_id": "s1"}, athlete="ana"),
        "alert": envelope("alert", STATION, {"alert_id": "rack-01/posture", "kind": "posture", "severity": "warning",
                                             "state": "raised", "message": "ana at rack-01: bad posture for 6 s", "since": 1.5,
                                             "suppressed": 0, "bad_for_s": 6.0}, athlete="ana"),
        "workout": envelope("workout", STATION, {"event": "rest-over", "state": "ready", "plan": "p", "exercise": "bench",
                                                 "load_kg": 60, "set": 1, "sets": 3, "reps": 8, "exercise_index": 2,
                                                 "exercises": 2, "sets_done": 3, "rest_s": 90, "vl_threshold_pct": 20}),
        "heartbeat": envelope("heartbeat", "notifier", {"role": "notifier", "uptime_s": 3.0, "interval_s": 1.0,
                                                        "webhook": {"queued": 3, "delivered": 2, "failed": 0, "dropped": 1, "retries": 4}}),
    }
    for kind, msg in good.items():
        validate_message(msg)
    bad = [
        ("timer", {**good["timer"], "state": "ringing"}),
        ("timer", {**good["timer"], "remaining_s": -1}),
        ("alert", {k: v for k, v in good["alert"].items() if k != "message"}),
        ("alert", {**good["alert"], "severity": "panic"}),
        ("alert", {**good["alert"], "state": "open"}),
        ("alert", {**good["alert"], "message": ""}),
        ("workout", {**good["workout"], "state": "resting-ish"}),
        ("workout", {**good["workout"], "set": 0}),
        ("workout", {k: v for k, v in good["workout"].items() if k != "rest_s"}),
        ("heartbeat", {**good["heartbeat"], "webhook": {"queued": 1}}),
    ]
    for kind, msg in bad:
        assert schema_errors(msg, kind), f"{kind} schema accepted {msg}"
