"""The short fault run (nothing lost or doubled when programs die): kill -9 each of session-recorder,
rep-detector, posture-evaluator, notifier and vbt-bus once at seeded random
moments during a 20-station replay at speed 1, restart each 0.5-5 s later, and
compare the store with a clean run of the same recording (tests/python/fault_run.py;
`make soak` runs the long one). Also checks that the comparison itself finds
what is lost, doubled, different or left open.

Run from the repository root:  python3 -m pytest -q tests/python/test_fault_run.py
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import fault_run

# The columns fault_run reads, as Sources/VBTStore/Schema.swift has them.
MINI_SCHEMA = """
CREATE TABLE sets (id TEXT PRIMARY KEY, station TEXT, reps INTEGER, reason TEXT, ended_ts REAL);
CREATE TABLE reps (id TEXT PRIMARY KEY, station TEXT, set_id TEXT, idx INTEGER, mean_velocity_mps REAL,
    peak_velocity_mps REAL, mean_propulsive_velocity_mps REAL, rom_mm REAL, concentric_s REAL, time_to_peak_s REAL,
    velocity_loss_pct REAL, mean_power_w REAL, zone TEXT, sensor TEXT, t_end REAL, exercise TEXT, load_kg REAL);
CREATE TABLE rejected (src TEXT, seq INTEGER, station TEXT, reason TEXT, t_end REAL, rom_mm REAL, mean_velocity_mps REAL);
CREATE TABLE posture_changes (src TEXT, seq INTEGER, station TEXT, t REAL, correct INTEGER);
CREATE TABLE alerts (src TEXT, seq INTEGER, station TEXT, json TEXT);
CREATE TABLE samples (id INTEGER PRIMARY KEY, station TEXT, sensor TEXT, t REAL, data TEXT);
"""


def make_store(path: Path, src: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.executescript(MINI_SCHEMA)
        t0 = 1_795_000_000.0
        for station in ("rack-1", "rack-2"):
            set_id = f"{station}-set-{int(t0 * 1e6)}"
            conn.execute("INSERT INTO sets VALUES (?, ?, 3, 'idle', ?)", (set_id, station, t0 + 20))
            for index in range(1, 4):
                t_end = t0 + 3 * index
                conn.execute("INSERT INTO reps VALUES (?, ?, ?, ?, 0.6, 0.9, 0.65, 600, 0.8, 0.3, ?, 300, 'strength-speed',"
                             " 'distance', ?, 'squat', 100)",
                             (f"{station}-{int(t_end * 1e6)}", station, set_id, index, 2.0 * index, t_end))
            for k in range(50):
                conn.execute("INSERT INTO samples (station, sensor, t, data) VALUES (?, 'distance', ?, '{}')",
                             (station, round(t0 + 0.02 * k, 6)))
            conn.execute("INSERT INTO rejected VALUES (?, 1, ?, 'rom', ?, 420, 0.5)", (f"{src}/rejected.{station}", station, t0 + 15))
            conn.execute("INSERT INTO posture_changes VALUES (?, 1, ?, ?, 0)", (f"{src}/posture.{station}", station, t0 + 9))
            for seq, (kind, state) in enumerate([("posture", "raised"), ("posture", "repeat"), ("heartbeat-missing", "raised"),
                                                 ("rest-over", "notice")], 1):
                conn.execute("INSERT INTO alerts VALUES (?, ?, ?, ?)",
                             (f"{src}/alert.{station}", seq, station, json.dumps({"kind": kind, "state": state})))


def test_the_comparison_finds_what_was_lost_doubled_changed_or_left_open(tmp_path: Path):
    clean, faulted = tmp_path / "clean.sqlite", tmp_path / "faulted.sqlite"
    make_store(clean, "a")
    make_store(faulted, "b")  # other src: the same content, as a second installation stores it
    same = fault_run.compare(clean, faulted)
    assert same["ok"], same["problems"]
    assert {c: e["clean"] for c, e in same["categories"].items()} == {
        "readings": 100, "reps": 6, "sets": 2, "rejected": 2, "posture": 2, "alerts": 4}, "repeats and heartbeat-missing not compared"

    with sqlite3.connect(faulted) as conn:
        rep_id = conn.execute("SELECT id FROM reps WHERE station = 'rack-2' ORDER BY t_end LIMIT 1").fetchone()[0]
        conn.execute("DELETE FROM reps WHERE id = ?", (rep_id,))
        conn.execute("UPDATE reps SET mean_velocity_mps = 0.61 WHERE station = 'rack-1' AND idx = 2")
        conn.execute("INSERT INTO samples (station, sensor, t, data) SELECT station, sensor, t, data FROM samples WHERE id = 7")
        conn.execute("DELETE FROM samples WHERE id IN (60, 61)")
        conn.execute("UPDATE sets SET ended_ts = NULL WHERE station = 'rack-1'")
        conn.execute("DELETE FROM posture_changes WHERE station = 'rack-2'")
        conn.execute("INSERT INTO alerts VALUES ('b/alert.rack-1', 99, 'rack-1', ?)", (json.dumps({"kind": "rest-over", "state": "notice"}),))
        conn.execute("INSERT INTO alerts VALUES ('b/alert.rack-1', 100, 'rack-1', ?)", (json.dumps({"kind": "data-lost", "state": "notice"}),))
    found = fault_run.compare(clean, faulted)
    got = {c: (e["lost"], e["doubled"], e["differ"]) for c, e in found["categories"].items()}
    assert got == {"readings": (2, 1, 0), "reps": (1, 0, 1), "sets": (0, 0, 1), "rejected": (0, 0, 0),
                   "posture": (1, 0, 0), "alerts": (0, 1, 0)}, got
    assert found["categories"]["reps"]["examples"]["lost"] == [rep_id]
    assert found["open_sets"] == {"clean": 0, "faulted": 1}
    assert found["rep_streams_differ"] == ["rack-2"]
    assert not found["ok"] and "reps: 1 lost" in found["problems"]
    assert "FAILED" in fault_run.format_report(found)


def test_five_kills_one_of_each_program_lose_and_double_nothing(tmp_path: Path):
    """The CI version of the soak: 20 stations at speed 1, each of the five programs killed once."""
    result = fault_run.run(kills=5, copies=5, seed=13, folder=tmp_path, profile=fault_run.SHORT)
    report = fault_run.format_report(result)
    print(report)
    assert result["kills_done"] == 5 and set(result["kills_by_target"]) == set(fault_run.TARGETS), report
    assert result["categories"]["reps"]["clean"] > 0 and result["categories"]["posture"]["clean"] > 0, report
    assert result["ok"], report


def test_recovery_is_timed_from_each_restart_to_the_last_caught_up_before_the_next_kill():
    first = fault_run.Kill("session-recorder", 10, 1, killed_wall=100.0, restarted_wall=101.0)
    second = fault_run.Kill("vbt-bus", 20, 1, killed_wall=110.0, restarted_wall=111.0)
    third = fault_run.Kill("session-recorder", 30, 1, killed_wall=120.0, restarted_wall=121.0)
    lines = [("session-recorder.1", 101.5), ("rep-detector.0", 102.25), ("notifier.0", 112.0), ("session-recorder.2", 190.0)]
    fault_run.time_recovery([first, second, third], lines)
    assert (first.caught_up_s, second.caught_up_s) == (1.25, 1.0)
    assert third.caught_up_s is None, "a line past the window is not this kill's"
    summary = fault_run.recovery_summary([first, second, third])
    assert summary["session-recorder"] == {"kills": 1, "median_s": 1.25, "max_s": 1.25, "nothing_to_fetch": 1}
    match = fault_run.Installation.CAUGHT_UP.search(
        "2026-11-25T23:53:21+0000 notice rep-detector: after_s=0.4 at=1795650796.679 lost=0 recovered=44 [VBTBus] caught up")
    assert match and float(match.group(1) or match.group(2)) == 1795650796.679
