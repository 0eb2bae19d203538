"""What sensor-bridge publishes validates against proto/: simulated readings of
both sensors, their status messages, and a replay of that recording fanned out
to several stations."""

import re
import signal
import time
from pathlib import Path

from test_wire import (Bus, bus, read_recording, read_stats, received_by_topic,  # noqa: F401 (fixture)
                       validate_message, wait_until, check_src)


def readings(records: list[dict]) -> int:
    return sum(len(r["msg"]["samples"]) for r in records if r["msg"]["type"] == "sample")


def test_simulated_and_replayed_bridge_messages_validate(bus: Bus, tmp_path: Path):
    live, live_stats = tmp_path / "live.jsonl", tmp_path / "live.stats.json"
    recorder = bus.spawn("record-live", ["vbt", "record", "--out", str(live), "--stats", str(live_stats),
                                         "--stats-interval", "0.1", "sample.", "status."])
    recorder.wait_for_log("bus connected")
    # Placed in time with --t0: the simulation's first readings (both sensors read at its start) are at T.
    t0 = round(time.time()) + 0.25
    result = bus.run(["sensor-bridge", "--simulate", "--station", "sim-py", "--speed", "0", "--sets", "1",
                      "--reps", "2", "--rest", "1", "--athlete", "ana", "--t0", repr(t0)], timeout=60)
    published = _published(result.stderr)
    assert published.get("sample", 0) > 0 and published.get("status", 0) >= 2, result.stderr
    wanted = {"sample.sim-py": published["sample"], "status.sim-py": published["status"]}
    wait_until(lambda: {t: n for t, n in received_by_topic(read_stats(live_stats)).items() if t in wanted} == wanted,
               f"the recorder to receive what the bridge published ({published})", detail=bus.describe)
    assert recorder.terminate() == 0, recorder.describe()
    records = read_recording(live)
    kinds = {(r["msg"]["type"], r["msg"].get("sensor")) for r in records}
    assert {("sample", "imu"), ("sample", "distance"), ("status", "imu"), ("status", "distance")} <= kinds, kinds
    for record in records:
        validate_message(record["msg"])
        check_src(record["msg"], record["topic"])
    for sensor in ["imu", "distance"]:
        times = [s["t"] for r in records if r["msg"]["type"] == "sample" and r["msg"]["sensor"] == sensor for s in r["msg"]["samples"]]
        assert abs(min(times) - t0) < 1e-6 and max(times) - t0 < 60, (sensor, t0, min(times), max(times))

    copies = 3
    fanned, fanned_stats = tmp_path / "replay.jsonl", tmp_path / "replay.stats.json"
    recorder2 = bus.spawn("record-replay", ["vbt", "record", "--out", str(fanned), "--stats", str(fanned_stats),
                                            "--stats-interval", "0.1", "sample.", "status.", "heartbeat.bridge-replay"])
    recorder2.wait_for_log("bus connected")
    bus.run(["sensor-bridge", "--replay", str(live), "--speed", "0", "--stations", str(copies), "--no-journal"], timeout=60)
    want = readings(records) * copies
    wait_until(lambda: _readings_so_far(fanned) >= want and _stopping_recorded(fanned), f"{want} replayed readings and the last heartbeat",
               detail=bus.describe)
    assert recorder2.terminate() == 0, recorder2.describe()
    everything = read_recording(fanned)
    # A replay with --no-journal says so: its heartbeat offers nothing to fetch, and a consumer
    # gives up at once what it missed of the replay's streams. Its last heartbeat says it stops
    # (ended, not silent: the notifier raises no alert for it), and only the last.
    beats = [r["msg"] for r in everything if r["msg"]["type"] == "heartbeat"]
    assert beats and all(b["station"] == "bridge-replay" and "replay" not in b for b in beats), beats
    assert [b.get("stopping") for b in beats] == [None] * (len(beats) - 1) + [True], beats
    for beat in beats:
        validate_message(beat)
    replayed = [r for r in everything if r["msg"]["type"] != "heartbeat"]
    assert readings(replayed) == want
    assert {r["msg"]["station"] for r in replayed} == {f"sim-py-{i}" for i in range(1, copies + 1)}
    for record in replayed:
        validate_message(record["msg"])
        check_src(record["msg"], record["topic"])
        assert record["msg"]["src"].startswith("sensor-bridge-")
    stats = read_stats(fanned_stats)
    assert stats and stats["malformed"] == {}
    assert all(s["gaps"] == 0 and s["duplicates"] == 0 for s in stats["sources"].values()), stats


def _published(stderr: str) -> dict[str, int]:
    """The bridge's own count of what it published, from its `bridge stopped` log line."""
    for line in stderr.splitlines():
        if "bridge stopped" in line:
            match = re.search(r"published=(\S*)", line)
            if match and match[1]:
                return {k: int(v) for k, v in (part.split("=") for part in match[1].split(","))}
    return {}


def _stopping_recorded(path: Path) -> bool:
    try:
        return any(r["msg"]["type"] == "heartbeat" and r["msg"].get("stopping") for r in read_recording(path))
    except (OSError, ValueError):
        return False


def _readings_so_far(path: Path) -> int:
    try:
        return readings(read_recording(path))
    except (OSError, ValueError):
        return 0


def test_detector_messages_validate(bus: Bus, tmp_path: Path):
    """rep-detector's rep, set and rejected messages, from a simulated session, validate against proto/."""
    out, stats = tmp_path / "detector.jsonl", tmp_path / "detector.stats.json"
    recorder = bus.spawn("record-detector", ["vbt", "record", "--out", str(out), "--stats", str(stats),
                                             "--stats-interval", "0.1", "rep.", "set.", "rejected."])
    recorder.wait_for_log("bus connected")
    detector = bus.spawn("rep-detector", ["rep-detector", "--idle-timeout", "6"])
    detector.wait_for_log("bus connected")
    bus.run(["sensor-bridge", "--simulate", "--station", "det-py", "--speed", "0", "--sets", "1", "--reps", "3",
             "--rest", "8", "--imu-rate", "0"], timeout=60)
    # The set ends 6 s (reading time) after its last rep: the rest in the session covers it.
    wait_until(lambda: received_by_topic(read_stats(stats)).get("set.det-py", 0) >= 2
               and received_by_topic(read_stats(stats)).get("rep.det-py", 0) >= 3,
               "3 reps and a whole set", detail=bus.describe)
    assert detector.terminate() == 0, detector.describe()
    assert recorder.terminate() == 0, recorder.describe()
    records = read_recording(out)
    reps = [r["msg"] for r in records if r["msg"]["type"] == "rep"]
    assert [r["index"] for r in reps] == [1, 2, 3]
    assert len({r["rep_id"] for r in reps}) == 3 and len({r["set_id"] for r in reps}) == 1
    for record in records:
        validate_message(record["msg"])
        check_src(record["msg"], record["topic"])
    ends = [r["msg"] for r in records if r["msg"]["type"] == "set" and r["msg"]["event"] == "end"]
    assert ends and ends[0]["reps"] == 3 and ends[0]["reason"] == "idle"


def test_sigusr1_ends_a_looping_simulation_which_then_lingers(bus: Bus, tmp_path: Path):
    """SIGUSR1 ends a --loop simulation as if it had run out (how `vbt loadtest --journal` stops its replay): the
    bridge stops publishing, answers replay requests for --linger seconds, then exits 0."""
    bridge = bus.spawn("sensor-bridge", ["sensor-bridge", "--station", "rack-usr1", "--simulate", "--loop", "--journal",
                                         str(tmp_path / "journal"), "--linger", "1", "--wait-subscribers", "0"])
    bridge.wait_for_log("simulated session")
    bridge.proc.send_signal(signal.SIGUSR1)
    bridge.wait_for_log("sources finished; answering replay requests a while longer")
    bridge.wait_for_log("bridge stopped")
    assert bridge.proc.wait(timeout=30) == 0, bridge.stderr()
    assert "asked to end the replay or simulation (SIGUSR1)" in bridge.stderr()
