"""Load advice end to end over real processes on a real bus: a plan with a velocity target, the
detector's profile and a set that came out slow; the real notifier publishes the next set's load
advice in `workout`, `vbt advice accept ATHLETE` carries it into the plan (the notifier answers and
sends `set.load`), and accepting twice is refused with the reason. Every message validates against
proto/.

Readiness: with the real session-recorder holding ten earlier sessions of two athletes, the one
whose first sets today are clearly slow for her history gets advice of one set fewer with the
reason; the one on a usual day does not. Without a recorder the notifier says so once and goes on."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from test_notifier import of, pub, start, validate_all
from test_readiness import ANA_DAYS, publish_session, velocity
from test_recorder import RawPublisher, Recorder
from test_recorder import vbt as vbt_ok
from test_wire import Bus, binary, bus, free_port, wait_until  # noqa: F401 (fixture)

STATION = "rack-01"

PLAN = {"athlete": "ana", "plan": "ana-velocity", "exercises": [
    {"exercise": "squat", "sets": 3, "reps": 5, "rest_s": 60, "load_kg": 100.0, "target_mean_velocity_mps": 0.75},
    {"exercise": "bench", "sets": 1, "reps": 5, "rest_s": 60, "load_kg": 60.0},
]}


def vbt(bus: Bus, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary("vbt"), *args], env=bus.env, cwd=cwd, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_a_slow_set_gets_advice_and_vbt_accepts_it(bus: Bus, tmp_path: Path):
    # No session-recorder at this test's own query endpoint: readiness is not known.
    bus.env["VBT_QUERY_ENDPOINT"] = f"tcp://127.0.0.1:{free_port()}"
    notifier, rec = start(bus, tmp_path, extra=["--plate-step-kg", "2.5", "--bar-kg", "20"])
    pub(bus, f"cmd.{STATION}", {"id": "p1", "command": "plan.assign", "target": "*", "args": PLAN})
    wait_until(lambda: of(rec, "workout", event="plan-assigned"), "the plan to be taken", detail=bus.describe)
    # The detector's profile: 0.0075 m/s less per kg.
    pub(bus, f"profile.{STATION}", {"exercise": "squat", "loads_kg": [60, 100], "mean_velocities_mps": [0.92, 0.62],
                                    "intercept_mps": 1.37, "slope_mps_per_kg": -0.0075, "r2": 1.0, "mvt_mps": 0.3,
                                    "e1rm_kg": 142.7}, athlete="ana")
    # Set 1 at 100 kg came out at 0.62 m/s against 0.75: 82.67 kg on that slope, 82.5 on the plates.
    pub(bus, f"set.{STATION}", {"set_id": "s1", "event": "end", "reps": 5, "reason": "idle", "best_mean_velocity_mps": 0.62,
                                "velocity_loss_pct": 10, "exercise": "squat", "load_kg": 100}, athlete="ana")
    ended = wait_until(lambda: of(rec, "workout", event="set-ended"), "the set's end with advice", detail=bus.describe)[0]
    advice = ended["advice"]
    assert (advice["for_set"], advice["load_kg"], advice["method"], advice["applied"], advice["fewer_sets"]) == (
        2, 82.5, "profile-offset", False, False), advice
    # The question for the absent recorder goes unanswered: said once, and the notifier goes on.
    notifier.wait_for_log("today's readiness not known")
    assert not [m for m in of(rec, "cmd") if m["command"] == "set.load"], "nothing changes before the coach accepts"

    # The coach accepts by the athlete's name: vbt finds the station in the workout snapshots.
    accepted = vbt(bus, tmp_path, "advice", "accept", "ana")
    assert accepted.returncode == 0, accepted.stderr
    assert "advice accepted at rack-01: set 2 at 82.5 kg" in accepted.stdout, accepted.stdout
    after = wait_until(lambda: of(rec, "workout", event="advice-accepted"), "the accepted advice", detail=bus.describe)[0]
    assert after["advice"]["applied"] is True
    load = wait_until(lambda: [m for m in of(rec, "cmd") if m["command"] == "set.load" and m["src"].startswith("notifier-")],
                      "the notifier to tell the detector set 2's load", detail=bus.describe)[0]
    assert load["args"] == {"load_kg": 82.5}
    answer = [m for m in of(rec, "ack") if m["command"] == "advice.accept"]
    assert [(m["program"], m["state"]) for m in answer] == [("notifier", "done")]

    # Twice: refused, with the reason, by station name.
    again = vbt(bus, tmp_path, "advice", "accept", STATION)
    assert again.returncode == 1 and "applied already" in again.stderr, again.stderr

    # The rest ends (skipped): set 2 is at the advised load.
    assert vbt(bus, tmp_path, "rest", "skip", STATION).returncode == 0
    nxt = wait_until(lambda: of(rec, "workout", event="rest-skipped"), "set 2", detail=bus.describe)[0]
    assert (nxt["set"], nxt["load_kg"]) == (2, 82.5)
    notifier.terminate()
    assert notifier.stderr().count("today's readiness not known") == 1, notifier.stderr()
    validate_all(rec)


def today_set(publisher: RawPublisher, athlete: str, station: str, number: int, factor: float) -> None:
    """One set of today's squat at 80 kg, one rep, sent now, as the detector would."""
    set_id = f"{athlete}-now-{number}"
    v = velocity(80.0, factor, number)
    base = {"exercise": "squat", "load_kg": 80.0}
    publisher.send(publisher.message("set", station, {"set_id": set_id, "event": "start", **base}, athlete=athlete))
    publisher.send(publisher.message("rep", station, {
        "set_id": set_id, "rep_id": f"{set_id}-r1", "index": 1, "mean_velocity_mps": v, "peak_velocity_mps": v * 1.5,
        "mean_propulsive_velocity_mps": v * 1.05, "rom_mm": 600.0, "concentric_s": 0.6 / v, "time_to_peak_s": 0.25,
        "velocity_loss_pct": 0.0, "t_end": 10.0 * number, "detector": "rep-detector-0000beef", **base}, athlete=athlete))
    publisher.send(publisher.message("set", station, {"set_id": set_id, "event": "end", "reps": 1, "reason": "idle",
                                                      "best_mean_velocity_mps": v, "velocity_loss_pct": 0.0, **base},
                                     athlete=athlete))


def test_readiness_below_usual_advises_one_set_fewer(bus: Bus, tmp_path: Path):
    recorder = Recorder(bus, tmp_path / "vbt.sqlite")  # sets VBT_QUERY_ENDPOINT for the notifier
    try:
        for athlete in ("ana", "ben"):
            vbt_ok(bus, "athlete", "add", athlete, "--name", athlete.title())
        notifier, rec = start(bus, tmp_path)
        publisher = RawPublisher(bus, "rep.")
        # Ten earlier days of both athletes, at other racks: the same history, a ~2 % typical error.
        start_ts = time.time() - 3600
        sent = 0
        for back, factor in zip(range(len(ANA_DAYS), 0, -1), ANA_DAYS):
            for athlete, station in (("ana", "rack-30"), ("ben", "rack-40")):
                sent += publish_session(publisher, athlete, station, start_ts - 86_400 * back, factor, f"d{back}")
        wait_until(lambda: recorder.rows("sets") >= sent, "the earlier sessions stored", detail=bus.describe)

        # Today: each on a plan of 4 sets at 80 kg with a velocity target; ana 8 % slow, ben as usual.
        days = {"ana": ("rack-31", 0.92), "ben": ("rack-32", 1.0)}
        for athlete, (station, _) in days.items():
            plan = {"athlete": athlete, "plan": f"{athlete}-today", "exercises": [
                {"exercise": "squat", "sets": 4, "reps": 5, "rest_s": 60, "load_kg": 80.0, "target_mean_velocity_mps": 0.6}]}
            pub(bus, f"cmd.{station}", {"id": f"p-{athlete}", "command": "plan.assign", "target": "*", "args": plan})
            wait_until(lambda station=station: of(rec, "workout", station, event="plan-assigned"), f"{athlete}'s plan",
                       detail=bus.describe)

        def answered(station: str) -> int:
            """Sets whose readiness the notifier has had from the recorder (its log says each)."""
            return sum(1 for line in notifier.stderr().splitlines() if "readiness from the session-recorder" in line and station in line)

        for number in (1, 2):
            for athlete, (station, factor) in days.items():
                today_set(publisher, athlete, station, number, factor)
            for athlete, (station, _) in days.items():
                wait_until(lambda station=station, number=number: answered(station) >= number,
                           f"{athlete}'s readiness after set {number}", detail=bus.describe)
        publisher.close()

        # Ana: her second set makes the verdict below usual beyond noise, and the advice for set 3
        # says one set fewer, with the recorder's figure.
        stored = recorder.result("readiness", {"athlete": "ana", "exercise": "squat", "limit": 1})[0]["assessment"]
        assert stored["verdict"] == "below-usual" and not stored["within_noise"] and stored["sets"] == 2, stored
        fewer = wait_until(lambda: [m for m in of(rec, "workout", "rack-31") if (m.get("advice") or {}).get("fewer_sets")],
                           "ana's advice of one set fewer", detail=bus.describe)
        advice = fewer[-1]["advice"]
        assert advice["for_set"] == 3 and not advice["applied"], advice
        band = f"{stored['swc_pct']:.0f}" if stored["swc_pct"] >= 1 else f"{stored['swc_pct']:.1f}"
        assert advice["fewer_sets_reason"] == f"readiness {stored['score_pct']:.0f}, below your usual 100 ± {band}", advice
        assert re.fullmatch(r"readiness (8\d|9[0-5]), below your usual 100 ± [\d.]+", advice["fewer_sets_reason"]), advice

        # Ben: as usual after both sets; no advice of his ever says fewer sets.
        usual = recorder.result("readiness", {"athlete": "ben", "exercise": "squat", "limit": 1})[0]["assessment"]
        assert usual["verdict"] == "as-usual" and usual["sets"] == 2, usual
        bens = [m for m in of(rec, "workout", "rack-32") if m.get("advice")]
        assert bens and not [m for m in bens if m["advice"]["fewer_sets"]], bens
        assert "today's readiness not known" not in notifier.stderr()
        notifier.terminate()
        validate_all(rec)
    finally:
        recorder.close()
