"""A command published while no rep-detector runs is not lost: real processes on a real bus.

Commands come from publishers that keep no journal, so a rep-detector that is down (killed,
restarting, not started yet) never sees one published meanwhile. The session-recorder stores
every assignment whole (`assignment.get`: its command and arguments); the detector asks it for
each station's assignment at start and when it first hears of the station, and applies a stored
one newer than the last command it applied (docs/programs/rep-detector.md, "At start").

Run from the repository root:  python3 -m pytest -q tests/python/test_detector_commands.py
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from pathlib import Path

import zmq

from test_recorder import RawPublisher, Recorder, vbt
from test_wire import Bus, bus, free_port, wait_until  # noqa: F401 (fixture)

STATION = "rack-07"
RATE_HZ = 50.0
TOP_MM, BOTTOM_MM = 700.0, 100.0  # 600 mm: the squat's ROM in the built-in catalogue
CAUGHT_UP = "assignment caught up from the recorder"


def bar_path(start: float, reps: int) -> list[tuple[float, float]]:
    """Readings (t, distance_mm) from `start`: still at the top, `reps` reps (down in 1 s, 0.3 s at
    the bottom, up in 0.7 s), then a last lowering, so the last rep's top is passed and judged."""
    moves = [(TOP_MM, 1.0)]
    for _ in range(reps):
        moves += [(TOP_MM, 1.5), (BOTTOM_MM, 1.0), (BOTTOM_MM, 0.3), (TOP_MM, 0.7)]
    moves += [(TOP_MM, 1.5), (BOTTOM_MM, 1.0), (BOTTOM_MM, 0.5)]
    readings = []
    position, now = TOP_MM, start
    for target, seconds in moves:
        steps = max(1, round(seconds * RATE_HZ))
        for k in range(1, steps + 1):
            x = k / steps
            readings.append((now + k / RATE_HZ, position + (target - position) * (1 - math.cos(math.pi * x)) / 2))
        position, now = target, now + steps / RATE_HZ
    return readings


def sample_messages(publisher: RawPublisher, readings: list[tuple[float, float]]) -> list[dict]:
    """Sample messages of 5 readings each, as a laser's bridge sends them."""
    return [publisher.message("sample", STATION, {
        "sensor": "distance", "device": "sim",
        "samples": [{"t": round(t, 4), "distance_mm": round(mm, 1)} for t, mm in readings[i:i + 5]]}, athlete=None)
        for i in range(0, len(readings), 5)]


class Reps:
    """Every rep message of the station, as a subscriber that never stops sees it."""

    def __init__(self, bus: Bus):
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, f"rep.{STATION}".encode())
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.connect(bus.sub_endpoint)
        self.seen: list[dict] = []

    def pump(self) -> list[dict]:
        while self.sub.poll(100, zmq.POLLIN):
            self.seen.append(json.loads(self.sub.recv_multipart()[1]))
        return self.seen

    def close(self) -> None:
        self.ctx.destroy(linger=0)


def lift(publisher: RawPublisher, detector, reps: Reps, start: float, count: int, bus: Bus) -> list[dict]:
    """Publishes `count` reps' readings once the detector has caught up on the station's
    assignment (the first message makes a fresh detector ask), and returns the reps it publishes."""
    before = len(reps.pump())
    messages = sample_messages(publisher, bar_path(start, count))
    publisher.send(messages[0])
    detector.wait_for_log(CAUGHT_UP)
    for message in messages[1:]:
        publisher.send(message)
    wait_until(lambda: len(reps.pump()) >= before + count, f"{count} reps at {STATION}", timeout=30, detail=bus.describe)
    return reps.seen[before:]


def assign_stored(recorder: Recorder, cmd_id: str) -> dict:
    """The recorder's assignment of the station made by `cmd_id`, once it has stored it."""
    def stored():
        got = recorder.result("assignment.get", {"station": STATION, "cmd_id": cmd_id})
        return got if got and got.get("cmd_id") == cmd_id else None
    return wait_until(stored, f"the recorder to store {cmd_id}", detail=recorder.program.describe)


def test_an_assignment_made_before_the_detector_starts_reaches_its_reps(bus: Bus, tmp_path: Path):
    recorder = Recorder(bus, tmp_path / "vbt.sqlite")
    reps = Reps(bus)
    publisher = RawPublisher(bus, "sample.")
    try:
        vbt(bus, "athlete", "add", "ana", "--name", "Ana")
        vbt(bus, "station", "add", STATION)
        # As the notifier sends a plan's item: with its tempo and velocity-loss threshold.
        args = {"athlete": "ana", "exercise": "squat", "load_kg": 100, "tempo": "3-1-X-0", "vl_threshold_pct": 15}
        vbt(bus, "pub", f"cmd.{STATION}", json.dumps({"id": "c-ana", "command": "athlete.assign", "target": "*", "args": args}))
        stored = assign_stored(recorder, "c-ana")
        assert stored["command"] == "athlete.assign" and stored["args"] == args, stored

        detector = bus.spawn("rep-detector", ["rep-detector", "--patterns", str(tmp_path / "patterns.json")])
        detector.wait_for_log("rep detector running")
        got = lift(publisher, detector, reps, time.time(), 2, bus)
        for rep in got:
            assert (rep.get("athlete"), rep["exercise"], rep.get("load_kg"), rep.get("tempo")) == ("ana", "squat", 100, "3-1-X-0"), rep
        caught = [line for line in detector.stderr().splitlines() if CAUGHT_UP in line]
        assert len(caught) == 1 and "c-ana" in caught[0] and STATION in caught[0], caught
    finally:
        publisher.close()
        reps.close()
        recorder.close()


def test_an_assignment_changed_while_the_detector_is_killed_reaches_the_next_rep(bus: Bus, tmp_path: Path):
    recorder = Recorder(bus, tmp_path / "vbt.sqlite")
    reps = Reps(bus)
    publisher = RawPublisher(bus, "sample.")
    journal = tmp_path / "journal-detector"
    command = ["rep-detector", "--patterns", str(tmp_path / "patterns.json"), "--journal", str(journal)]
    try:
        for athlete in ("ana", "ben"):
            vbt(bus, "athlete", "add", athlete, "--name", athlete.title())
        vbt(bus, "station", "add", STATION)
        vbt(bus, "station", "assign", STATION, "--athlete", "ana", "--exercise", "squat", "--load", "100")
        first = bus.spawn("rep-detector-1", command)
        first.wait_for_log("journalling")
        start = time.time()
        got = lift(publisher, first, reps, start, 1, bus)
        assert got[0].get("athlete") == "ana" and got[0].get("load_kg") == 100, got

        # The station's state after every reading published, with the last command applied, is on
        # disk (this test's publisher keeps no journal to fetch them from again): then killed outright.
        src = f"{publisher.instance}/sample.{STATION}"

        def checkpointed() -> bool:
            path = journal / "checkpoint.json"
            try:
                saved = json.loads(path.read_text())
            except (OSError, ValueError):
                return False
            return saved["inputs"].get(src) == publisher.seqs[f"sample.{STATION}"] and "lastCommand" in saved["state"][0]
        wait_until(checkpointed, "a checkpoint holding every reading and the station's last command", detail=first.describe)
        first.kill()
        assert first.proc.returncode == -9

        changed = json.loads(vbt(bus, "station", "assign", STATION, "--athlete", "ben", "--exercise", "squat",
                                 "--load", "120", "--json").stdout)
        assert changed["athlete"] == "ben" and changed["command"] == "athlete.assign", changed

        second = bus.spawn("rep-detector-2", command)
        second.wait_for_log("restored from the checkpoint")
        # Asked at start for the restored station: caught up before any reading comes.
        got = lift(publisher, second, reps, start + 20, 1, bus)
        assert got[0].get("athlete") == "ben" and got[0].get("load_kg") == 120, got
        assert changed["cmd_id"] in "".join(line for line in second.stderr().splitlines() if CAUGHT_UP in line)
        second.terminate()
    finally:
        publisher.close()
        reps.close()
        recorder.close()


def test_set_load_changes_the_stored_assignments_load(bus: Bus, tmp_path: Path):
    recorder = Recorder(bus, tmp_path / "vbt.sqlite")
    try:
        vbt(bus, "athlete", "add", "ana", "--name", "Ana")
        vbt(bus, "station", "add", STATION)
        vbt(bus, "station", "assign", STATION, "--athlete", "ana", "--exercise", "squat", "--load", "100")
        vbt(bus, "pub", f"cmd.{STATION}", json.dumps({"id": "c-load", "command": "set.load", "target": "rep-detector",
                                                      "args": {"load_kg": 105}}))
        stored = assign_stored(recorder, "c-load")
        assert (stored["athlete"], stored["exercise"], stored["load_kg"], stored["command"]) == ("ana", "squat", 105, "set.load"), stored
        assert stored["args"]["athlete"] == "ana" and stored["args"]["load_kg"] == 105, stored
        # The station's latest assignment is the one with the new load.
        assert recorder.result("assignment.get", {"station": STATION})["cmd_id"] == "c-load"
        listed = json.loads(vbt(bus, "station", "list", "--json").stdout)
        assert [s["load_kg"] for s in (listed if isinstance(listed, list) else listed["stations"]) if s["name"] == STATION] == [105]
        # Erased, the athlete is named neither in the stored assignment nor in its arguments.
        vbt(bus, "station", "unassign", STATION)
        vbt(bus, "athlete", "erase", "ana", "--confirm", "ana")
        erased = recorder.result("assignment.get", {"station": STATION, "cmd_id": "c-load"})
        assert erased["athlete"].startswith("erased-") and erased["args"]["athlete"] == erased["athlete"], erased
    finally:
        recorder.close()


def test_a_detector_without_a_recorder_says_so_once_and_detects(bus: Bus, tmp_path: Path):
    reps = Reps(bus)
    # Nobody answers on the query endpoint.
    bus.env["VBT_QUERY_ENDPOINT"] = f"tcp://127.0.0.1:{free_port()}"
    detector = bus.spawn("rep-detector", ["rep-detector", "--patterns", str(tmp_path / "patterns.json"), "--recorder-timeout", "1"])
    detector.wait_for_log("rep detector running")
    publisher = RawPublisher(bus, "sample.")
    try:
        messages = sample_messages(publisher, bar_path(time.time(), 1))
        for message in messages:
            publisher.send(message)
        wait_until(lambda: len(reps.pump()) >= 1, f"a rep at {STATION}", timeout=30, detail=bus.describe)
        detector.wait_for_log("no assignment from the session-recorder")
        assert reps.seen[0].get("athlete") is None
        assert detector.stderr().count("no assignment from the session-recorder") == 1
        assert CAUGHT_UP not in detector.stderr()
    finally:
        publisher.close()
        reps.close()
