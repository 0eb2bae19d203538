"""A coach's data end to end over real processes: an exercise added with
`vbt exercise add` is listed, assigned and planned; `vbt set note` puts an RPE and a note
on a stored set, shown by `vbt history` and carried by `vbt export` (CSV formula-safe); a
plan's load as %e1RM is resolved from the profile the real rep-detector fitted to simulated
sets at two loads; a plan's per-set loads reach the recorder's stored sets through the
notifier's `set.load` and the real detector."""

from __future__ import annotations

import csv
import json
import math
import re
import time
from pathlib import Path

import pytest

from test_notifier import messages
from test_recorder import RawPublisher, Recorder, rep_fields, vbt
from test_wire import Bus, bus, validate_message, wait_until  # noqa: F401 (fixture)

KG_PER_LB = 0.45359237


def test_exercise_add_is_listed_assigned_and_planned(bus: Bus, tmp_path: Path):
    recorder = Recorder(bus, tmp_path / "vbt.sqlite")
    try:
        vbt(bus, "athlete", "add", "ana", "--name", "Ana")
        added = json.loads(vbt(bus, "exercise", "add", "zercher-squat", "--name", "Zercher squat", "--rom-mm", "550",
                               "--mvt-mps", "0.32", "--rest-s", "150", "--description", "Bar in the elbows' crook.",
                               "--json").stdout)
        assert added == {"id": "zercher-squat", "name": "Zercher squat", "description": "Bar in the elbows' crook.",
                         "expected_rom_mm": 550, "mvt_mps": 0.32, "default_rest_s": 150}
        again = vbt(bus, "exercise", "add", "zercher-squat", "--name", "Other", "--rom-mm", "500", "--mvt-mps", "0.3",
                    expect_ok=False)
        assert again.returncode == 1 and "exists already" in again.stderr and "choose another id" in again.stderr, again.stderr
        for args, says in [(["Bad Id", "--rom-mm", "500", "--mvt-mps", "0.3"], "lower-case letters"),
                           (["x", "--rom-mm", "20", "--mvt-mps", "0.3"], "not between 50 and 1500"),
                           (["x", "--rom-mm", "500", "--mvt-mps", "2"], "not between 0.05 and 1.5"),
                           (["x", "--rom-mm", "500", "--mvt-mps", "0.3", "--rest-s", "4000"], "not between 0 and 1800")]:
            bad = vbt(bus, "exercise", "add", *args, "--name", "X", expect_ok=False)
            assert bad.returncode == 1 and says in bad.stderr, (args, bad.stderr)
        listed = json.loads(vbt(bus, "exercise", "list", "--json").stdout)
        assert [e["id"] for e in listed].count("zercher-squat") == 1 and "x" not in [e["id"] for e in listed]
        assert "Zercher squat" in vbt(bus, "exercise", "show", "zercher-squat").stdout

        # Assigned at a station: the command carries its ROM and rest, and the recorder stores it.
        record_path = tmp_path / "cmd.jsonl"
        record = bus.spawn("record", ["vbt", "record", "--out", str(record_path), "cmd."])
        record.wait_for_log("bus connected")
        vbt(bus, "station", "add", "rack-01")
        stored = json.loads(vbt(bus, "station", "assign", "rack-01", "--athlete", "ana", "--exercise", "zercher-squat",
                                "--load", "80", "--json").stdout)
        assert stored["exercise"] == "zercher-squat" and stored["load_kg"] == 80
        sent = wait_until(lambda: [m for m in messages(record_path) if m["type"] == "cmd"], "the assignment recorded")
        validate_message(sent[0])
        assert sent[0]["args"]["rom_mm"] == 550 and sent[0]["args"]["rest_s"] == 150, sent[0]
        # In a plan, with its own rest.
        plan = json.loads(vbt(bus, "plan", "create", "z", "--athlete", "ana", "--item", "zercher-squat:3x5@80kg",
                              "--json").stdout)
        assert plan["items"][0]["rest_s"] == 150
    finally:
        recorder.close()


def test_set_note_shown_in_history_and_exported(bus: Bus, tmp_path: Path):
    recorder = Recorder(bus, tmp_path / "vbt.sqlite")
    publisher = RawPublisher(bus, "set.rack-05")
    try:
        messages_ = [publisher.message("set", "rack-05", {"set_id": "s5", "event": "start", "exercise": "squat", "load_kg": 100})]
        messages_ += [publisher.message("rep", "rack-05", rep_fields("s5", i, 1000.0 + i)) for i in (1, 2, 3)]
        messages_.append(publisher.message("set", "rack-05", {"set_id": "s5", "event": "end", "reps": 3, "reason": "idle",
                                                             "best_mean_velocity_mps": 0.77, "velocity_loss_pct": 6.0}))
        for message in messages_:
            publisher.send(message)
        wait_until(lambda: recorder.rows("reps") == 3 and recorder.result("history", {})[0].get("ended_ts"),
                   "the set stored", detail=bus.describe)

        note = "=SUM(A1), grindy last rep"
        out = vbt(bus, "set", "note", "s5", "--rpe", "8.5", "--note", note)
        assert "RPE 8.5" in out.stdout, out.stdout
        table = vbt(bus, "history").stdout
        header, rule, row = table.splitlines()[:3]
        assert header.split()[-2:] == ["RPE", "note"], header
        assert "8.5" in row.split() and row.endswith(note), table
        assert json.loads(vbt(bus, "history", "--json").stdout)[0]["note"] == note

        vbt(bus, "export", "--format", "csv", "--out", str(tmp_path / "csv"), "--tables", "sets")
        raw = (tmp_path / "csv" / "sets.csv").read_text()
        assert "\"'=SUM(A1), grindy last rep\"" in raw, raw  # quoted for the comma, an apostrophe before the formula
        with open(tmp_path / "csv" / "sets.csv", newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert rows[0]["set_id"] == "s5" and float(rows[0]["rpe"]) == 8.5 and rows[0]["note"] == "'" + note, rows
        vbt(bus, "export", "--format", "json", "--out", str(tmp_path / "json"), "--tables", "sets")
        exported = json.loads((tmp_path / "json" / "vbt-export.json").read_text())["sets"][0]
        assert exported["rpe"] == 8.5 and exported["note"] == note

        for args, says in [(["s5", "--rpe", "8.3"], "steps of 0.5"), (["s5", "--rpe", "11"], "1 to 10"),
                           (["s5", "--note", "n" * 501], "at most 500"), (["nope", "--rpe", "7"], "no set 'nope'"),
                           (["s5"], "give --rpe, --note or --clear")]:
            bad = vbt(bus, "set", "note", *args, expect_ok=False)
            assert bad.returncode != 0 and says in bad.stderr, (args, bad.stderr)
        vbt(bus, "set", "note", "s5", "--clear")
        cleared = json.loads(vbt(bus, "history", "--json").stdout)[0]
        assert "rpe" not in cleared and "note" not in cleared, cleared
    finally:
        publisher.close()
        recorder.close()


READINGS_END: dict[str, float] = {}


def simulate_set(bus: Bus, recorder: Recorder, load: float, seed: int, reps: int = 3) -> None:
    """One simulated set of `reps` at `load` through the real bridge and detector, ended by command once stored.

    The simulator at --speed 0 stamps its readings with sensor time from its start, so they run
    ahead of the clock; the detector skips readings older than the last it had, so each simulation
    at the station is placed (--t0) after the previous one's last reading."""
    before = recorder.rows("reps")
    start = max(time.time(), READINGS_END.get("rack-01", 0))
    run = bus.run(["sensor-bridge", "--simulate", "--station", "rack-01", "--exercise", "squat", "--load-kg", str(load),
                   "--seed", str(seed), "--sets", "1", "--reps", str(reps), "--speed", "0", "--athlete", "ana",
                   "--t0", repr(start)], timeout=60)
    seconds = re.search(r"reps=\d+ seconds=(\d+)", run.stderr)
    assert seconds, run.stderr
    READINGS_END["rack-01"] = start + int(seconds.group(1)) + 2
    wait_until(lambda: recorder.rows("reps") >= before + reps, f"the {load} kg set's reps stored", timeout=30,
               detail=bus.describe)
    open_sets = [s for s in recorder.result("history", {"athlete": "ana"}) if not s.get("ended_ts")]
    if open_sets:
        vbt(bus, "pub", "cmd.rack-01", json.dumps({"id": f"end-{seed}", "command": "set.end", "target": "rep-detector"}))
        wait_until(lambda: all(s.get("ended_ts") for s in recorder.result("history", {"athlete": "ana"})),
                   "the set ended", detail=bus.describe)


def test_percent_of_e1rm_and_per_set_loads_through_the_notifier(bus: Bus, tmp_path: Path):
    READINGS_END.clear()
    recorder = Recorder(bus, tmp_path / "vbt.sqlite")
    try:
        vbt(bus, "athlete", "add", "ana", "--name", "Ana")
        detector = bus.spawn("rep-detector", ["rep-detector", "--patterns", str(tmp_path / "patterns.json")])
        detector.wait_for_log("bus connected")
        record_path = tmp_path / "bus.jsonl"
        record = bus.spawn("record", ["vbt", "record", "--out", str(record_path), "cmd.", "ack.", "workout.", "set."])
        record.wait_for_log("bus connected")

        for station in ("rack-01", "rack-08", "rack-09"):
            vbt(bus, "station", "add", station)
        vbt(bus, "plan", "create", "pct", "--athlete", "ana", "--item", "squat:2x3@80%/5s")
        vbt(bus, "plan", "create", "pct-lb", "--athlete", "ana", "--unit", "lb", "--item", "squat:1x3@80%")
        # No e1RM yet: the plan does not start, and says what to do.
        refused = vbt(bus, "plan", "assign", "pct", "--station", "rack-01", expect_ok=False)
        assert refused.returncode == 1 and "no e1RM for ana's squat yet: record sets at 2+ loads, or give the load in kg" \
            in refused.stderr, refused.stderr

        # Sets at two loads: the detector fits ana's squat profile; the recorder stores it.
        for load, seed in [(60, 11), (100, 12)]:
            vbt(bus, "station", "assign", "rack-01", "--athlete", "ana", "--exercise", "squat", "--load", str(load))
            simulate_set(bus, recorder, load, seed)
        progress = wait_until(lambda: (p := recorder.result("progress", {"athlete": "ana"}))["exercises"][0]["e1rm"] and p,
                              "an e1RM for ana's squat", detail=bus.describe)
        e1rm = max(progress["exercises"][0]["e1rm"], key=lambda e: e["ts"])["e1rm_kg"]
        expected = math.floor(0.8 * e1rm / 2.5 + 0.5) * 2.5  # the nearest 2.5 kg, halves up
        assert 60 < e1rm < 400, progress

        # The same plan now starts with 80 % of that e1RM, rounded to 2.5 kg, and so does its pound twin (5 lb steps).
        notifier = bus.spawn("notifier", ["notifier", "--state", str(tmp_path / "notifier.json")])
        notifier.wait_for_log("bus connected")
        started = vbt(bus, "plan", "assign", "pct", "--station", "rack-09", "--move").stdout  # ana was at rack-01
        assert f"= {expected:g} kg" in started, (started, e1rm)
        assert recorder.result("assignment.get", {"station": "rack-09"})["load_kg"] == pytest.approx(expected)
        step_lb = 5
        expected_lb = math.floor(0.8 * e1rm / KG_PER_LB / step_lb + 0.5) * step_lb
        started = vbt(bus, "plan", "assign", "pct-lb", "--station", "rack-08", "--move").stdout
        assert f"= {expected_lb:g} lb" in started, (started, e1rm)
        plans = wait_until(lambda: (p := {m["station"]: m for m in messages(record_path)
                                         if m["type"] == "cmd" and m["command"] == "plan.assign"}).keys() >= {"rack-08", "rack-09"} and p,
                           "both plan.assign commands recorded", detail=bus.describe)
        assert plans["rack-09"]["args"]["exercises"][0]["load_kg"] == pytest.approx(expected)
        assert plans["rack-08"]["args"]["exercises"][0]["load_kg"] == pytest.approx(expected_lb * KG_PER_LB)

        # Per-set loads, in pounds, with a velocity target: the plan shows them as written.
        vbt(bus, "plan", "create", "ramp", "--athlete", "ana", "--item", "squat:2x3@135,155lb~0.7mps/3s")
        shown = vbt(bus, "plan", "show", "ramp").stdout
        assert "135, 155 lb" in shown and "0.70" in shown, shown
        vbt(bus, "plan", "assign", "ramp", "--station", "rack-01", "--move")
        workout = wait_until(lambda: [m for m in messages(record_path) if m["type"] == "workout" and m["station"] == "rack-01"
                                      and m["event"] == "plan-assigned"], "the notifier to take the plan")[-1]
        validate_message(workout)
        assert workout["target_mean_velocity_mps"] == 0.7 and workout["load_kg"] == pytest.approx(135 * KG_PER_LB)

        # Set 1 at 135 lb; when it ends the notifier tells the detector set 2's load, and the detector takes it.
        simulate_set(bus, recorder, 135 * KG_PER_LB, 21)
        load_cmd = wait_until(lambda: [m for m in messages(record_path) if m["type"] == "cmd" and m["command"] == "set.load"
                                       and m["station"] == "rack-01"], "the notifier's set.load", detail=bus.describe)[-1]
        validate_message(load_cmd)
        assert load_cmd["src"].startswith("notifier") and load_cmd["args"]["load_kg"] == pytest.approx(155 * KG_PER_LB)
        wait_until(lambda: [m for m in messages(record_path) if m["type"] == "ack" and m.get("cmd_id") == load_cmd["id"]
                            and m.get("program") == "rep-detector" and m.get("state") == "done"],
                   "the detector to take the load", detail=bus.describe)
        simulate_set(bus, recorder, 155 * KG_PER_LB, 22)
        sets = recorder.result("history", {"athlete": "ana", "station": "rack-01", "limit": 2})
        assert [s["load_kg"] for s in sets] == [pytest.approx(155 * KG_PER_LB), pytest.approx(135 * KG_PER_LB)], sets
        assert notifier.terminate() == 0 and detector.terminate() == 0 and record.terminate() == 0
    finally:
        recorder.close()
