"""Stations as data, on a real installation: a bus, the session-recorder, the
rep-detector, notifier and posture-evaluator, and a simulated station (`sensor-bridge
--simulate`, with a posture wearable). A pyzmq subscriber keeps what is on the bus.

Each check is a friction a gym operator met: free-text station names became stations,
one athlete stood at three stations, commands to rack-77 "succeeded", a calibration for
nobody-here changed who was at the station, there was no list or unassign."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bus_tap import BusLog
from test_recorder import Recorder
from test_wire import Bus, binary, wait_until

STATION = "rack-01"


class Gym:
    def __init__(self, bus: Bus, tmp_path: Path):
        self.bus = bus
        self.log = BusLog(bus.sub_endpoint)
        self.recorder = Recorder(bus, tmp_path / "vbt.sqlite")
        for athlete, name in (("ana", "Ana"), ("ben", "Ben")):
            bus.run(["vbt", "athlete", "add", athlete, "--name", name])
        self.detector = bus.spawn("rep-detector", ["rep-detector"])
        self.detector.wait_for_log("bus connected")
        self.notifier = bus.spawn("notifier", ["notifier", "--state", str(tmp_path / "notifier.json")])
        self.notifier.wait_for_log("bus connected")
        self.evaluator = bus.spawn("posture-evaluator", ["posture-evaluator", "--calibrations", str(tmp_path / "cal.json")])
        self.evaluator.wait_for_log("bus connected")
        bus.spawn("bridge", ["sensor-bridge", "--simulate", "--loop", "--station", STATION, "--exercise", "squat",
                             "--load-kg", "100", "--sets", "2", "--reps", "5", "--rest", "20", "--seed", "8",
                             "--posture-rate", "20"])

    def vbt(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([binary("vbt"), *args], env=self.bus.env, cwd=self.bus.tmp_path, capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)

    def ok(self, *args: str) -> subprocess.CompletedProcess:
        result = self.vbt(*args)
        assert result.returncode == 0, f"vbt {' '.join(args)} exited {result.returncode}:\n{result.stderr}\n{self.bus.describe()}"
        return result

    def refused(self, *args: str, because: str) -> str:
        result = self.vbt(*args)
        assert result.returncode == 1 and because in result.stderr, (args, result.returncode, result.stdout, result.stderr)
        return result.stderr

    def stations(self) -> dict[str, dict]:
        return {s["name"]: s for s in json.loads(self.ok("station", "list", "--json").stdout)}

    def commands(self, command: str, station: str | None = None) -> list[dict]:
        return [m for m in self.log.of("cmd", station) if m["command"] == command]


@pytest.fixture(scope="module")
def gym(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("stations")
    bus = Bus(tmp_path)
    gym = None
    try:
        bus.start(heartbeat_interval=1)
        gym = Gym(bus, tmp_path)
        wait_until(lambda: gym.stations().get(STATION, {}).get("live"), "the simulated station seen, live", detail=bus.describe)
        yield gym
    finally:
        if gym:
            gym.log.close()
            gym.recorder.close()
        bus.stop_all()


def test_station_names_are_checked_and_an_athlete_is_at_one_station(gym: Gym):
    seen = gym.stations()[STATION]
    assert seen.get("added_ts") is None and seen.get("athlete") is None, seen
    assert f"{STATION}  " in gym.ok("station", "list").stdout and "live" in gym.ok("station", "list").stdout

    # A mistyped name is not a new station: refused, with the name meant.
    for typo in ("Rack-1", "rack-1"):
        stderr = gym.refused("station", "assign", typo, "--athlete", "ana", "--exercise", "squat", "--load", "100",
                             because=f"no station '{typo}' is known")
        assert f"did you mean {STATION}?" in stderr, stderr
    assert gym.commands("athlete.assign", "Rack-1") == [] and "Rack-1" not in gym.stations()

    # A registered station that has not spoken yet: listed as never heard; an assignment waits for it.
    gym.ok("station", "add", "bench-09", "--label", "Bench by the window")
    assert "never heard" in gym.ok("station", "list").stdout
    assigned = gym.ok("station", "assign", STATION, "--athlete", "ana", "--exercise", "squat", "--load", "100")
    # The programs that act on it answered, and vbt says what they said.
    assert "(notifier: done; rep-detector: squat at 100 kg for ana)" in assigned.stdout, assigned.stdout
    stderr = gym.refused("station", "assign", "bench-09", "--athlete", "ana", "--exercise", "bench", "--load", "60",
                         because=f"ana is at {STATION}")
    assert "--move" in stderr
    moved = gym.ok("station", "assign", "bench-09", "--athlete", "ana", "--exercise", "bench", "--load", "60", "--move")
    assert "bench-09 has never been heard from" in moved.stderr, moved.stderr
    stations = gym.stations()
    assert stations[STATION].get("athlete") is None and stations["bench-09"]["athlete"] == "ana", stations
    assert stations["bench-09"]["label"] == "Bench by the window"

    # The move unassigned rack-01 on the bus, and each program that acts on it answered.
    unassign = gym.commands("athlete.unassign", STATION)
    assert len(unassign) == 1 and unassign[0]["athlete"] == "ana", unassign
    wait_until(lambda: {a["program"] for a in gym.log.of("ack", STATION, cmd_id=unassign[0]["id"], state="done")}
               == {"rep-detector", "notifier"}, "the detector's and the notifier's answers", detail=gym.bus.describe)
    gym.refused("station", "unassign", STATION, because=f"nobody is at {STATION}")

    # Removal keeps history and is refused while someone is assigned or the station is live.
    gym.refused("station", "remove", "bench-09", because="ana is assigned to bench-09")
    gym.ok("station", "unassign", "bench-09")
    gym.ok("station", "remove", "bench-09")
    assert "bench-09" not in gym.stations()
    gym.refused("station", "remove", STATION, because=f"{STATION} is live")
    gym.refused("station", "rename", STATION, "rack-02", because=f"{STATION} is live")


def test_posture_calibration_checks_the_athlete_and_the_station_and_changes_nobody(gym: Gym):
    sent = len(gym.commands("posture.calibrate"))
    gym.refused("posture", "calibrate", "--station", STATION, "--athlete", "nobody-here", because="no athlete 'nobody-here'")
    gym.refused("posture", "calibrate", "--station", "rack-77", "--athlete", "ana", because="no station 'rack-77' is known")
    gym.ok("station", "add", "rack-05")
    gym.refused("posture", "calibrate", "--station", "rack-05", "--athlete", "ana", because="rack-05 has never been heard from")
    assert len(gym.commands("posture.calibrate")) == sent, "nothing refused was sent"

    # Ana is calibrated at her station; then ben is, there: his calibration is made and stored,
    # ana stays there, judged with her own.
    gym.ok("station", "assign", STATION, "--athlete", "ana", "--exercise", "squat", "--load", "100")
    gym.ok("posture", "calibrate", "--station", STATION, "--athlete", "ana", "--seconds", "1")
    wait_until(lambda: gym.log.of("calibration", STATION, athlete="ana"), "ana's calibration", detail=gym.bus.describe)
    result = gym.ok("posture", "calibrate", "--station", STATION, "--athlete", "ben", "--seconds", "1")
    assert "calibrating ben for 1 s" in result.stdout, result.stdout
    wait_until(lambda: gym.log.of("calibration", STATION, athlete="ben"), "ben's calibration", detail=gym.bus.describe)
    wait_until(lambda: gym.recorder.result("calibration.get", {"athlete": "ben"}), "ben's calibration stored")
    calibrated_at = gym.log.of("calibration", STATION, athlete="ben")[0]["ts"]
    wait_until(lambda: [p for p in gym.log.of("posture", STATION) if p["ts"] > calibrated_at + 0.5],
               "posture judged after the calibration", detail=gym.bus.describe)
    after = [p for p in gym.log.of("posture", STATION) if p["ts"] > calibrated_at]
    assert after and all(p.get("athlete") == "ana" for p in after), {p.get("athlete") for p in after}
    assert gym.stations()[STATION].get("athlete") == "ana"


def test_topics_says_who_publishes_and_who_listens(gym: Gym):
    rows = {r["type"]: r for r in json.loads(gym.ok("topics", "--json", "--seconds", "3").stdout)}
    sample = rows["sample"]
    assert [p["program"] for p in sample["publishers"]] == ["sensor-bridge"] and sample["publishers"][0]["per_s"] > 10, sample
    assert sample["stations"] == [STATION], sample
    listeners = {listener["program"]: listener.get("scope") for listener in sample["listeners"]}
    # The posture-evaluator takes the samples of the stations with a posture wearable only (this one has one); the
    # session-recorder takes every sample, on a connection of their own.
    assert listeners == {"rep-detector": None, "posture-evaluator": f"sample.{STATION}", "session-recorder": None}, listeners
    # What the detector publishes, the notifier listens to; a heartbeat's publishers are every program.
    assert "rep-detector" in {p["program"] for p in rows["heartbeat"]["publishers"]}
    assert "notifier" in {listener["program"] for listener in rows["set"]["listeners"]}
    table = gym.ok("topics", "--seconds", "2").stdout
    assert any(line.startswith("sample") and "sensor-bridge" in line and "rep-detector" in line for line in table.splitlines()), table
