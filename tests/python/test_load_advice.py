"""Load advice end to end over real processes on a real bus: a plan with a velocity target, the
detector's profile and a set that came out slow; the real notifier publishes the next set's load
advice in `workout`, `vbt advice accept ATHLETE` carries it into the plan (the notifier answers and
sends `set.load`), and accepting twice is refused with the reason. Every message validates against
proto/."""

from __future__ import annotations

import subprocess
from pathlib import Path

from test_notifier import of, pub, start, validate_all
from test_wire import Bus, binary, bus, wait_until  # noqa: F401 (fixture)

STATION = "rack-01"

PLAN = {"athlete": "ana", "plan": "ana-velocity", "exercises": [
    {"exercise": "squat", "sets": 3, "reps": 5, "rest_s": 60, "load_kg": 100.0, "target_mean_velocity_mps": 0.75},
    {"exercise": "bench", "sets": 1, "reps": 5, "rest_s": 60, "load_kg": 60.0},
]}


def vbt(bus: Bus, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary("vbt"), *args], env=bus.env, cwd=cwd, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_a_slow_set_gets_advice_and_vbt_accepts_it(bus: Bus, tmp_path: Path):
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
    validate_all(rec)
