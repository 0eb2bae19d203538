#!/usr/bin/env python3
"""The fault-injection run: is anything lost or doubled when programs die?

Real processes on loopback. One recording (simulated stations through a bus and
`vbt record`, made at the start of the run) is replayed at speed 1 as many
stations (`sensor-bridge --replay FILE --stations N --t0 T --journal DIR`) into
two installations, each with its own bus ports, folders and database:

- the CLEAN run: vbt-bus, session-recorder, rep-detector, posture-evaluator and
  notifier (every one journalling where it can), left alone;
- the FAULTED run: the same programs and the same recording at the same --t0
  (so the same reading times and rep ids), where one of session-recorder,
  rep-detector, posture-evaluator, notifier or vbt-bus is killed with SIGKILL at
  seeded random moments and started again 0.5-5 s later with the same
  arguments, folders and ports.

Once both have settled (the replay over, the stores unchanged for a while,
bounded), the two SQLite stores are compared per category: readings (per
station, sensor and `t`), reps (ids and every metric, and the rep stream per
station), sets (ids, reps, reason; none left open), rejected reps, posture
changes, and the alerts whose kind does not depend on the faults (not
`heartbeat-missing` or `data-lost`, which a kill rightly causes; not `repeat`s,
which are paced by the wall clock). Each category reports the clean count, the
faulted count, what was lost (in the clean store, not in the faulted one),
doubled (in the faulted store more often than in the clean one) and, for reps
and sets, rows whose values differ.

    python3 tests/python/fault_run.py --kills 20 --stations 20 --seed 7 [--json]

exits 0 when everything matches. `make soak` runs the long version;
tests/python/test_fault_run.py the short one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import secrets
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import zmq  # noqa: E402

from test_wire import Program, binary, free_port, wait_until  # noqa: E402

# The programs a fault run kills, by the name the report uses.
TARGETS = ["session-recorder", "rep-detector", "posture-evaluator", "notifier", "vbt-bus"]

# Alerts a kill rightly causes (a silent program, messages no journal held):
# not compared. Repeats are paced by the wall clock: not compared either.
FAULT_ALERT_KINDS = {"heartbeat-missing", "data-lost"}
UNCOMPARED_ALERT_STATES = {"repeat"}

# The notifier's rest when no plan or exercise gives one: shorter than the
# recording's rests, so every rest between two sets ends `over` (a notice).
DEFAULT_REST_S = 5.0


# --------------------------------------------------------------------------
# The recording


@dataclass(frozen=True)
class SimStation:
    station: str
    exercise: str
    load_kg: float
    one_rep_max_kg: float
    seed: int
    athlete: str
    sensors: tuple[str, ...]  # extra sensor-bridge arguments (rates)
    assign: tuple[tuple[str, float], ...] = ()  # extra athlete.assign arguments


# Four different stations: laser squats with a posture wearable, laser bench and
# deadlift, and a shoulder press measured by a bar IMU alone. The bench's coach
# set a ROM a little short (355 mm: its reps of 410-423 mm straddle the
# +15 % +10 mm limit), so about half its attempts are rejected; the deadlift's
# athlete stops at 10 % velocity loss (sets ended on it, velocity-loss alerts).
SIM_STATIONS = [
    SimStation("rack", "squat", 100, 140, 1, "ana", ("--imu-rate", "0", "--posture-rate", "20")),
    SimStation("bench", "bench", 70, 95, 2, "ben", ("--imu-rate", "0"), (("rom_mm", 355),)),
    SimStation("platform", "deadlift", 140, 180, 3, "cleo", ("--imu-rate", "0"), (("vl_threshold_pct", 10),)),
    SimStation("press", "press", 40, 60, 4, "dan", ("--distance-rate", "0", "--imu-rate", "100")),
]


@dataclass
class Profile:
    """How big a run is."""
    sets: int
    reps: int
    rest_s: float
    kills: int
    stations: int


SHORT = Profile(sets=2, reps=5, rest_s=25, kills=5, stations=20)
LONG = Profile(sets=6, reps=6, rest_s=30, kills=20, stations=20)


def log(message: str) -> None:
    print(f"[fault-run {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Node:
    """Processes on one bus: spawn, respawn with the same arguments, stop."""

    def __init__(self, folder: Path, env_extra: dict[str, str] | None = None):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.pub_endpoint = f"tcp://127.0.0.1:{free_port()}"
        self.sub_endpoint = f"tcp://127.0.0.1:{free_port()}"
        self.env = dict(os.environ, VBT_PUB_ENDPOINT=self.pub_endpoint, VBT_SUB_ENDPOINT=self.sub_endpoint,
                        VBT_LOG_LEVEL=os.environ.get("VBT_LOG_LEVEL", "info"),
                        # plaintext on loopback, said explicitly (proto/security.md)
                        VBT_INSECURE=os.environ.get("VBT_INSECURE", "1"), **(env_extra or {}))
        self.args: dict[str, list[str]] = {}
        self.nices: dict[str, int] = {}
        self.rrs: dict[str, int] = {}
        self.current: dict[str, Program] = {}
        self.generations: dict[str, list[Program]] = {}

    def spawn(self, name: str, args: list[str], nice: int = 0, rr: int = 0) -> Program:
        self.args[name] = args
        self.nices[name] = nice
        self.rrs[name] = rr
        generation = len(self.generations.get(name, []))
        program = Program(f"{name}.{generation}", args, self.env, self.folder, nice, rr)
        self.generations.setdefault(name, []).append(program)
        self.current[name] = program
        return program

    def respawn(self, name: str) -> Program:
        return self.spawn(name, self.args[name], self.nices[name], self.rrs[name])

    def stop_all(self) -> None:
        for program in [p for programs in self.generations.values() for p in programs]:
            if program.proc.poll() is None:
                program.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for program in [p for programs in self.generations.values() for p in programs]:
            try:
                program.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                program.kill()

    def describe(self) -> str:
        return "\n".join(p.describe() for p in self.current.values())


def make_recording(folder: Path, profile: Profile, sim_speed: float = 4.0, timeout: float = 600,
                   sims: list[SimStation] | None = None) -> Path:
    """Simulates `sims` (default SIM_STATIONS) through a bus into `vbt record`, then stretches the
    lines' `t` by `sim_speed` so a replay at speed 1 is real time again (the
    readings' own `t` are sensor time already). Each station is assigned its
    athlete, exercise and load (`athlete.assign`), and the squatter's posture
    wearable is calibrated while she sits well (`posture.calibrate`): both are
    in the recording, so a replay sends them to every copy of the station."""
    node = Node(folder)
    raw = folder / "recording.raw.jsonl"
    out = folder / "recording.jsonl"
    try:
        bus = node.spawn("vbt-bus", ["vbt-bus"])
        bus.wait_for_log("bus forwarding")
        raw.unlink(missing_ok=True)  # a folder used before: vbt record keeps an existing file
        record = node.spawn("vbt-record", ["vbt", "record", "--out", str(raw), "sample.", "status.", "cmd."])
        record.wait_for_log("bus connected")

        def pub(topic: str, body: dict) -> None:
            exe = binary("vbt")
            subprocess.run([exe, "pub", topic, json.dumps(body)], env=node.env, cwd=folder, check=True,
                           capture_output=True, timeout=30, stdin=subprocess.DEVNULL)

        sims = SIM_STATIONS if sims is None else sims
        for sim in sims:
            pub(f"cmd.{sim.station}", {"id": f"assign-{sim.station}", "command": "athlete.assign", "target": "*",
                                       "args": {"athlete": sim.athlete, "exercise": sim.exercise, "load_kg": sim.load_kg,
                                                **dict(sim.assign)}})
        pub("cmd.rack", {"id": "calibrate-rack", "command": "posture.calibrate", "target": "posture-evaluator",
                         "args": {"athlete": "ana", "seconds": 10}})
        bridges = [node.spawn(f"sim-{sim.station}", [
            "sensor-bridge", "--simulate", "--station", sim.station, "--exercise", sim.exercise,
            "--load-kg", str(sim.load_kg), "--one-rep-max-kg", str(sim.one_rep_max_kg), "--seed", str(sim.seed),
            "--athlete", sim.athlete, "--sets", str(profile.sets), "--reps", str(profile.reps),
            "--rest", str(profile.rest_s), "--speed", str(sim_speed), *sim.sensors]) for sim in sims]
        wait_until(lambda: all(b.proc.poll() is not None for b in bridges), "the simulated sessions to end",
                   timeout=timeout, interval=0.2, detail=node.describe)
        for bridge in bridges:
            assert bridge.proc.returncode == 0, bridge.describe()
        time.sleep(0.5)  # the last messages on their way through the bus to the recorder
        assert record.terminate() == 0, record.describe()
    finally:
        node.stop_all()
    lines = [json.loads(line) for line in raw.read_text(encoding="utf-8").splitlines() if line.strip()]
    with out.open("w", encoding="utf-8") as sink:
        for line in lines:
            line["t"] = round(line["t"] * sim_speed, 6)
            sink.write(json.dumps(line, separators=(",", ":")) + "\n")
    return out


@dataclass
class RecordingInfo:
    path: Path
    duration_s: float  # the last line's t
    first_reading_line_t: float  # the t of the first line that holds readings
    stations: list[str]
    readings: int
    messages: Counter


def describe_recording(path: Path) -> RecordingInfo:
    duration, first, stations, readings, messages = 0.0, None, set(), 0, Counter()
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = json.loads(raw)
        duration = max(duration, line["t"])
        kind, station = line["topic"].split(".", 1)
        messages[kind] += 1
        stations.add(station)
        if kind == "sample":
            readings += len(line["msg"]["samples"])
            first = line["t"] if first is None else first
    return RecordingInfo(path, duration, first or 0.0, sorted(stations), readings, messages)


# --------------------------------------------------------------------------
# An installation


class Installation:
    """One gym: its bus on its own ports, its folders and database, every
    program journalling, and the replay bridge."""

    def __init__(self, name: str, folder: Path, recording: RecordingInfo, copies: int, t0: float):
        self.name = name
        self.db = folder / "vbt.sqlite"
        self.query_endpoint = f"tcp://127.0.0.1:{free_port()}"
        self.node = Node(folder, {"VBT_QUERY_ENDPOINT": self.query_endpoint, "VBT_DB": str(folder / "vbt.sqlite")})
        self.folder = folder
        self.recording = recording
        self.copies = copies
        self.t0 = t0
        self.bridge: Program | None = None
        self.bridge_started = 0.0
        self.replay_ended: float | None = None
        journal = folder / "journal"
        self.commands = {
            "vbt-bus": ["vbt-bus"],
            "session-recorder": ["session-recorder", "--db", str(self.db), "--query-endpoint", self.query_endpoint],
            "rep-detector": ["rep-detector", "--patterns", str(folder / "patterns.json"),
                             "--journal", str(journal / "rep-detector")],
            "posture-evaluator": ["posture-evaluator", "--calibrations", str(folder / "calibrations.json"),
                                  "--journal", str(journal / "posture-evaluator")],
            "notifier": ["notifier", "--state", str(folder / "notifier.json"), "--default-rest", str(DEFAULT_REST_S),
                         "--journal", str(journal / "notifier")],
        }
        self.bridge_command = ["sensor-bridge", "--replay", str(recording.path), "--stations", str(copies),
                               "--speed", "1", "--t0", f"{t0:.6f}", "--replay-types", "sample,status,cmd",
                               "--journal", str(journal / "bridge"), "--linger", "3600"]

    # The log line that says a (re)started program is at work.
    READY = {"vbt-bus": ["bus forwarding"], "session-recorder": ["bus connected"],
             "rep-detector": ["bus connected", "journalling"], "posture-evaluator": ["bus connected", "journalling"],
             "notifier": ["bus connected", "journalling"]}

    def start(self, name: str, wait: bool = True) -> Program:
        program = self.node.spawn(name, self.commands[name])
        if wait:
            self.wait_ready(name)
        return program

    @classmethod
    def ready(cls, name: str) -> list[str]:
        """READY of a program, or of the program it is a shard of (`rep-detector-2`: `rep-detector`)."""
        return cls.READY.get(name) or cls.READY[name.rsplit("-", 1)[0]]

    def wait_ready(self, name: str, timeout: float = 30) -> None:
        for needle in self.ready(name):
            self.node.current[name].wait_for_log(needle, timeout=timeout)

    def start_all(self) -> None:
        for name in ["vbt-bus", "session-recorder", "rep-detector", "posture-evaluator", "notifier"]:
            self.start(name)

    def start_replay(self) -> None:
        self.bridge = self.node.spawn("bridge", self.bridge_command)
        self.bridge_started = time.time()

    def replay_done(self) -> bool:
        """The replay has published its last reading (the bridge lingers to answer replay requests)."""
        if self.bridge is not None and (self.bridge.proc.poll() is not None or "sources finished" in self.bridge.stderr()):
            if self.replay_ended is None:
                self.replay_ended = time.time()
            return True
        return False

    def reading_time(self, wall: float) -> float:
        """The reading time the replay had reached at wall time `wall` (speed 1)."""
        return self.t0 + (wall - self.bridge_started) - self.recording.first_reading_line_t

    def kill(self, name: str) -> None:
        self.node.current[name].kill()

    def stop(self) -> None:
        self.node.stop_all()

    def status(self) -> dict | None:
        """The recorder's `status` answer (proto/query.md), or None."""
        ctx = zmq.Context()
        try:
            sock = ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(self.query_endpoint)
            request = {"id": secrets.token_hex(4), "query": "status", "args": {}}
            sock.send_multipart([b"", json.dumps(request).encode()])
            if not sock.poll(5000, zmq.POLLIN):
                return None
            reply = json.loads(sock.recv_multipart()[-1])
            return reply.get("result") if reply.get("ok") else None
        finally:
            ctx.destroy(linger=0)

    def log_lines(self, needles: tuple[str, ...] = ("error", "warning", "critical", "lost")) -> dict[str, list[str]]:
        """Notable log lines of every program generation, by generation."""
        found = {}
        for programs in self.node.generations.values():
            for program in programs:
                lines = [line for line in program.stderr().splitlines()
                         if any(needle in line.lower() for needle in needles)]
                if lines:
                    found[program.name] = lines
        return found

    CAUGHT_UP = re.compile(r"\bat=(\d+(?:\.\d+)?) .*\bcaught up\b|\bcaught up\b.*\bat=(\d+(?:\.\d+)?)")

    def caught_up_times(self) -> list[tuple[str, float]]:
        """Every `caught up` line (a consumer has fetched all it missed: VBTBus CatchUpReport), as (program, wall time)."""
        found = []
        for programs in self.node.generations.values():
            for program in programs:
                for line in program.stderr().splitlines():
                    if "caught up" in line:
                        match = self.CAUGHT_UP.search(line)
                        if match:
                            found.append((program.name, float(match.group(1) or match.group(2))))
        return sorted(found, key=lambda item: item[1])


# --------------------------------------------------------------------------
# Reading the stores


def connect(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)


def table_exists(conn: sqlite3.Connection, table: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() is not None


def fingerprint(db: Path) -> tuple | None:
    """Counts that change while anything is still arriving or being recovered."""
    if not db.exists():
        return None
    try:
        with connect(db) as conn:
            if not table_exists(conn, "source_holes"):
                return None
            # Raw readings by their rows' counts (the view samples would unpack every row's JSON).
            readings = ("SELECT coalesce(sum(n), 0) FROM sample_batches" if table_exists(conn, "sample_batches")
                        else "SELECT count(*) FROM samples")
            return tuple(conn.execute(sql).fetchone()[0] for sql in [
                readings, "SELECT count(*) FROM reps", "SELECT count(*) FROM sets",
                "SELECT count(*) FROM sets WHERE ended_ts IS NULL", "SELECT count(*) FROM rejected",
                "SELECT count(*) FROM posture_changes", "SELECT count(*) FROM alerts",
                "SELECT count(*) FROM source_holes", "SELECT coalesce(sum(last_seq), 0) FROM sources"])
    except sqlite3.Error:
        return None


def subject(alert: dict) -> str:
    kind = alert.get("kind")
    if kind == "velocity-loss":
        return alert.get("set_id", "")
    if kind in ("sensor-disconnected", "sensor-rate"):
        return alert.get("sensor", "")
    return ""


def load_store(db: Path) -> dict[str, Any]:
    """What the comparison looks at, read from one database."""
    with connect(db) as conn:
        readings = Counter(conn.execute("SELECT station, sensor, t FROM samples").fetchall())
        reps = {row[0]: row[1:] for row in conn.execute(
            "SELECT id, station, set_id, idx, mean_velocity_mps, peak_velocity_mps, mean_propulsive_velocity_mps, rom_mm,"
            " concentric_s, time_to_peak_s, velocity_loss_pct, mean_power_w, zone, sensor, t_end, exercise, load_kg FROM reps")}
        sets = {row[0]: row[1:] for row in conn.execute(
            "SELECT id, station, reps, reason, ended_ts IS NOT NULL FROM sets")}
        rejected = Counter(conn.execute(
            "SELECT station, reason, round(t_end, 6), round(rom_mm, 3), round(mean_velocity_mps, 6) FROM rejected").fetchall())
        posture = Counter(conn.execute("SELECT station, round(t, 6), correct FROM posture_changes").fetchall())
        alerts: Counter = Counter()
        excluded: Counter = Counter()
        for station, body in conn.execute("SELECT station, json FROM alerts"):
            alert = json.loads(body)
            key = (station, alert.get("kind"), alert.get("state"), subject(alert))
            if alert.get("kind") in FAULT_ALERT_KINDS or alert.get("state") in UNCOMPARED_ALERT_STATES:
                excluded[(alert.get("kind"), alert.get("state"))] += 1
            else:
                alerts[key] += 1
        rep_streams: dict[str, list[str]] = {}
        for rep_id, station in conn.execute("SELECT id, station FROM reps ORDER BY station, t_end, id"):
            rep_streams.setdefault(station, []).append(rep_id)
    return {"readings": readings, "reps": reps, "sets": sets, "rejected": rejected, "posture": posture,
            "alerts": alerts, "alerts_excluded": excluded, "rep_streams": rep_streams}


def compare_counters(clean: Counter, faulted: Counter) -> tuple[int, int, list, list]:
    lost_keys = clean - faulted
    doubled_keys = faulted - clean
    return sum(lost_keys.values()), sum(doubled_keys.values()), sorted(lost_keys.elements()), sorted(doubled_keys.elements())


def compare_rows(clean: dict, faulted: dict) -> tuple[int, int, int, list, list, list]:
    lost = sorted(set(clean) - set(faulted))
    doubled = sorted(set(faulted) - set(clean))
    differ = sorted(key for key in set(clean) & set(faulted) if clean[key] != faulted[key])
    return len(lost), len(doubled), len(differ), lost, doubled, differ


CATEGORIES = ["readings", "reps", "sets", "rejected", "posture", "alerts"]


def compare(clean_db: Path, faulted_db: Path, examples: int = 5) -> dict[str, Any]:
    """Compares two stores; `ok` when nothing is lost, doubled, different or left open."""
    clean, faulted = load_store(clean_db), load_store(faulted_db)
    result: dict[str, Any] = {"categories": {}}
    for category in CATEGORIES:
        a, b = clean[category], faulted[category]
        entry: dict[str, Any] = {"clean": sum(a.values()) if isinstance(a, Counter) else len(a),
                                 "faulted": sum(b.values()) if isinstance(b, Counter) else len(b)}
        if isinstance(a, Counter):
            entry["lost"], entry["doubled"], lost, doubled = compare_counters(a, b)
            entry["differ"] = 0
            differ = []
        else:
            entry["lost"], entry["doubled"], entry["differ"], lost, doubled, differ = compare_rows(a, b)
            differ = [{"id": key, "clean": a[key], "faulted": b[key]} for key in differ]
        entry["examples"] = {"lost": lost[:examples], "doubled": doubled[:examples], "differ": differ[:examples]}
        entry["_lost_all"], entry["_doubled_all"] = lost, doubled
        result["categories"][category] = entry
    # Per station, as the breakdown of the readings.
    per_station: dict[str, dict[str, int]] = {}
    for (station, _, _), n in clean["readings"].items():
        per_station.setdefault(station, {"clean": 0, "faulted": 0})["clean"] += n
    for (station, _, _), n in faulted["readings"].items():
        per_station.setdefault(station, {"clean": 0, "faulted": 0})["faulted"] += n
    result["readings_per_station"] = dict(sorted(per_station.items()))
    result["open_sets"] = {"clean": sum(1 for row in clean["sets"].values() if not row[3]),
                           "faulted": sum(1 for row in faulted["sets"].values() if not row[3])}
    streams_differ = sorted(station for station in set(clean["rep_streams"]) | set(faulted["rep_streams"])
                            if clean["rep_streams"].get(station) != faulted["rep_streams"].get(station))
    result["rep_streams_differ"] = streams_differ
    result["alerts_not_compared"] = {"clean": {f"{k}/{s}": n for (k, s), n in sorted(clean["alerts_excluded"].items())},
                                     "faulted": {f"{k}/{s}": n for (k, s), n in sorted(faulted["alerts_excluded"].items())}}
    problems = []
    for category, entry in result["categories"].items():
        for what in ("lost", "doubled", "differ"):
            if entry[what]:
                problems.append(f"{category}: {entry[what]} {what}")
    for run, n in result["open_sets"].items():
        if n:
            problems.append(f"{run} run: {n} sets left open")
    if streams_differ:
        problems.append(f"rep stream differs at {len(streams_differ)} stations")
    for category in ("readings", "reps", "sets"):
        if result["categories"][category]["clean"] == 0:
            problems.append(f"the clean run stored no {category}: nothing to compare")
    result["problems"] = problems
    result["ok"] = not problems
    return result


# --------------------------------------------------------------------------
# The run


@dataclass
class Kill:
    target: str
    at_s: float  # after the replay started
    down_s: float  # how long it stays dead
    killed_wall: float = 0.0
    restarted_wall: float | None = None
    reading_t: float = 0.0
    ready_s: float | None = None  # from restart to working again
    caught_up_s: float | None = None  # from restart until every program has fetched what it missed
    error: str | None = None


def kill_plan(rng: random.Random, kills: int, targets: list[str], start_s: float, end_s: float,
              min_down: float = 0.5, max_down: float = 5.0) -> list[Kill]:
    """`kills` kills spread over [start_s, end_s], one program down at a time;
    every target at least once when there are enough kills."""
    if kills <= 0:
        return []
    order = targets * (kills // len(targets)) + rng.sample(targets, kills % len(targets))
    rng.shuffle(order)
    slot = (end_s - start_s) / kills
    assert slot >= 4, f"{kills} kills do not fit in {end_s - start_s:.0f} s of replay: use a longer recording"
    plan = []
    for index, target in enumerate(order):
        down = rng.uniform(min_down, min(max_down, slot - 2.5))
        at = start_s + index * slot + rng.uniform(0, slot - down - 2)
        plan.append(Kill(target, round(at, 2), round(down, 2)))
    return plan


def wait_settled(installations: list[Installation], quiet_s: float, timeout: float) -> dict[str, bool]:
    """Waits until each installation's replay has ended and its store has not
    changed for `quiet_s` (longer than the detector's 10 s wall-time idle
    close plus the notifier's rest), bounded by `timeout`."""
    deadline = time.monotonic() + timeout
    last: dict[str, tuple] = {}
    since: dict[str, float] = {}
    settled: dict[str, bool] = {}
    while True:
        now = time.monotonic()
        for inst in installations:
            if settled.get(inst.name) or not inst.replay_done():
                continue
            fp = fingerprint(inst.db)
            if fp is None or fp != last.get(inst.name):
                last[inst.name], since[inst.name] = fp, now
            elif now - since[inst.name] >= quiet_s:
                settled[inst.name] = True
                log(f"{inst.name}: settled (store unchanged for {quiet_s:.0f} s): {fp}")
        if all(settled.get(inst.name) for inst in installations):
            return settled
        if now >= deadline:
            for inst in installations:
                settled.setdefault(inst.name, False)
            return settled
        time.sleep(0.5)


def run_faults(inst: Installation, plan: list[Kill], restart: bool, stop: threading.Event) -> None:
    for kill in plan:
        due = inst.bridge_started + kill.at_s
        while not stop.is_set() and time.time() < due:
            time.sleep(min(0.05, max(0.0, due - time.time())))
        if stop.is_set() or inst.replay_done():
            kill.error = "not done: the replay had ended"
            continue
        kill.killed_wall = time.time()
        kill.reading_t = inst.reading_time(kill.killed_wall)
        inst.kill(kill.target)
        log(f"{inst.name}: killed {kill.target} at {kill.killed_wall - inst.bridge_started:.1f} s (down {kill.down_s:.1f} s)")
        if not restart:
            continue
        time.sleep(kill.down_s)  # the fault itself: how long the program stays dead
        inst.start(kill.target, wait=False)
        kill.restarted_wall = time.time()
        try:
            inst.wait_ready(kill.target)
            kill.ready_s = round(time.time() - kill.restarted_wall, 2)
        except AssertionError as error:
            kill.error = str(error).splitlines()[0]


def time_recovery(plan: list[Kill], caught_up: list[tuple[str, float]], window_s: float = 60.0) -> None:
    """Per kill: from the restart until the last `caught up` line before the next
    kill (every consumer that missed something has fetched it), within `window_s`."""
    done = [k for k in plan if k.restarted_wall]
    for index, kill in enumerate(done):
        end = min(done[index + 1].killed_wall if index + 1 < len(done) else math.inf, kill.restarted_wall + window_s)
        times = [at for _, at in caught_up if kill.restarted_wall <= at < end]
        kill.caught_up_s = round(max(times) - kill.restarted_wall, 2) if times else None


def recovery_summary(plan: list[Kill]) -> dict[str, dict]:
    """Per kind of kill: the median and the longest time from restart to caught up."""
    by_target: dict[str, list[float]] = {}
    nothing: Counter = Counter()
    for kill in plan:
        if kill.caught_up_s is not None:
            by_target.setdefault(kill.target, []).append(kill.caught_up_s)
        elif kill.restarted_wall:
            nothing[kill.target] += 1
    return {target: {"kills": len(times), "median_s": round(statistics.median(times), 2), "max_s": max(times),
                     "nothing_to_fetch": nothing[target]}
            for target, times in sorted(by_target.items())}


def attribute(result: dict, plan: list[Kill], t0: float) -> list[dict]:
    """Per kill, what was lost or doubled at reading times from this kill to the next
    (readings by `t`, reps by `t_end` from their ids' microseconds, posture changes by `t`)."""
    done = [k for k in plan if k.killed_wall]
    if not done:
        return []
    bounds = [k.reading_t for k in done] + [math.inf]

    def when(category: str, key: Any) -> float | None:
        try:
            if category == "readings":
                return key[2]
            if category == "posture":
                return key[1]
            if category == "rejected":
                return key[2]
            if category in ("reps", "sets"):
                return int(str(key).rsplit("-", 1)[1]) / 1e6
        except (ValueError, IndexError, TypeError):
            return None
        return None

    rows = [{"kill": i + 1, "target": k.target, "reading_t": round(k.reading_t - t0, 1), "lost": {}, "doubled": {}}
            for i, k in enumerate(done)]
    before = {"kill": 0, "target": "(before the first kill)", "reading_t": 0.0, "lost": {}, "doubled": {}}
    for category, entry in result["categories"].items():
        for what in ("lost", "doubled"):
            for key in entry[f"_{what}_all"]:
                t = when(category, key)
                if t is None:
                    continue
                index = next((i for i in range(len(done)) if bounds[i] <= t < bounds[i + 1]), None)
                row = before if index is None else rows[index]
                row[what][category] = row[what].get(category, 0) + 1
    return ([before] if before["lost"] or before["doubled"] else []) + rows


def run(kills: int, copies: int, seed: int, folder: Path, profile: Profile, targets: list[str] | None = None,
        restart: bool = True, parallel: bool = True, quiet_s: float = 15.0, settle_timeout: float = 240.0,
        recording: Path | None = None) -> dict[str, Any]:
    """The whole fault run; returns the report (see `compare`), with the kills and timings."""
    started = time.monotonic()
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    if recording is None:
        log(f"recording {len(SIM_STATIONS)} simulated stations ({profile.sets} sets of {profile.reps}, {profile.rest_s:.0f} s rests)")
        recording = make_recording(folder / "recording", profile)
    info = describe_recording(recording)
    recorded_s = time.monotonic() - started
    log(f"recording: {info.duration_s:.0f} s, {info.readings} readings, stations {info.stations}, {dict(info.messages)}")
    t0 = math.floor(time.time()) + 5.0
    clean = Installation("clean", folder / "clean", info, copies, t0)
    faulted = Installation("faulted", folder / "faulted", info, copies, t0)
    # Kills begin once the recording's commands (its assignments, before the first reading) are out:
    # a command published while the rep-detector is down is lost, as no journal keeps it (its sender
    # gets no answer; docs/programs/rep-detector.md), and the comparison is of what readings make.
    # A loaded machine stretches that preamble: 4 s of commands put a kill on the press stations'
    # assignment once. The bridge starts at most 5 s before t0, so this is after the preamble.
    end_s = max(12.0, info.duration_s - 4.0)
    start_s = max(8.0, min(8.0 + info.first_reading_line_t, end_s - 4.0 * max(1, kills)))
    plan = kill_plan(rng, kills, targets or TARGETS, start_s=start_s, end_s=end_s)
    stop = threading.Event()
    settled: dict[str, bool] = {}
    try:
        phases = [[clean, faulted]] if parallel else [[clean], [faulted]]
        for phase in phases:
            for inst in phase:
                inst.start_all()
            for inst in phase:
                inst.start_replay()
                log(f"{inst.name}: replaying {copies} copies of {len(info.stations)} stations at speed 1, --t0 {t0:.0f}")
            fault_thread = None
            if faulted in phase and plan:
                fault_thread = threading.Thread(target=run_faults, args=(faulted, plan, restart, stop), daemon=True)
                fault_thread.start()
            wait_until(lambda: all(inst.replay_done() for inst in phase), "the replay to end",
                       timeout=info.duration_s + 120, interval=0.5,
                       detail=lambda: "\n".join(inst.node.describe() for inst in phase))
            if fault_thread:
                fault_thread.join(timeout=60)
            for inst in phase:
                log(f"{inst.name}: replay over after {inst.replay_ended - inst.bridge_started:.0f} s; waiting for the store to settle")
            settled.update(wait_settled(phase, quiet_s, settle_timeout))
        statuses = {inst.name: inst.status() for inst in (clean, faulted)}
        logs = {inst.name: inst.log_lines() for inst in (clean, faulted)}
    finally:
        stop.set()
        for inst in (clean, faulted):
            inst.stop()
    result = compare(clean.db, faulted.db)
    time_recovery(plan, faulted.caught_up_times())
    result["recovery"] = recovery_summary(plan)
    result["diagnosis"] = attribute(result, plan, t0)
    for entry in result["categories"].values():
        entry.pop("_lost_all", None)
        entry.pop("_doubled_all", None)
    result["kills"] = [{"target": k.target, "at_s": round(k.killed_wall - faulted.bridge_started, 1) if k.killed_wall else k.at_s,
                        "down_s": k.down_s, "reading_t": round(k.reading_t - t0, 1) if k.killed_wall else None,
                        "ready_s": k.ready_s, "caught_up_s": k.caught_up_s, "error": k.error} for k in plan]
    kills_done = [k for k in plan if k.killed_wall]
    result["kills_done"] = len(kills_done)
    result["kills_by_target"] = dict(Counter(k.target for k in kills_done))
    if len(kills_done) < kills:
        result["problems"].append(f"only {len(kills_done)} of {kills} kills were done")
    for k in plan:
        if k.error and k.killed_wall:
            result["problems"].append(f"{k.target} killed at {k.at_s} s: {k.error}")
    for name, ok in settled.items():
        if not ok:
            result["problems"].append(f"{name} run: the store kept changing for {settle_timeout:.0f} s after the replay")
    result["ok"] = not result["problems"]
    result["settled"] = settled
    result["recorder_status"] = {name: (s or {}).get("counters") for name, s in statuses.items()}
    result["log_lines"] = logs
    result["run"] = {"seed": seed, "stations": copies * len(info.stations), "copies": copies, "kills_planned": kills,
                     "t0": t0, "recording": str(recording), "recording_s": round(info.duration_s, 1),
                     "recording_readings": info.readings, "folder": str(folder), "parallel": parallel,
                     "restart": restart, "targets": targets or TARGETS,
                     "seconds": {"recording": round(recorded_s, 1), "total": round(time.monotonic() - started, 1),
                                 **{f"{inst.name}_replay": round((inst.replay_ended or 0) - inst.bridge_started, 1)
                                    for inst in (clean, faulted)}}}
    return result


# --------------------------------------------------------------------------
# The report


def format_report(result: dict) -> str:
    out = []
    run_info = result.get("run", {})
    if run_info:
        out.append(f"fault run: seed {run_info['seed']}, {run_info['stations']} stations "
                   f"({run_info['copies']} copies of the recording's stations), recording {run_info['recording_s']} s "
                   f"({run_info['recording_readings']} readings a copy), {'clean and faulted at once' if run_info['parallel'] else 'clean, then faulted'}")
        out.append(f"time: {run_info['seconds']}; folder {run_info['folder']}")
    out.append("")
    out.append(f"{'category':<10} {'clean':>8} {'faulted':>8} {'lost':>6} {'doubled':>8} {'differ':>7}")
    for category, entry in result["categories"].items():
        out.append(f"{category:<10} {entry['clean']:>8} {entry['faulted']:>8} {entry['lost']:>6} {entry['doubled']:>8} {entry['differ']:>7}")
    out.append(f"open sets: clean {result['open_sets']['clean']}, faulted {result['open_sets']['faulted']}")
    out.append(f"rep stream (ids in t_end order per station): "
               f"{'equal' if not result['rep_streams_differ'] else 'differs at ' + ', '.join(result['rep_streams_differ'][:10])}")
    out.append(f"alerts not compared (caused by faults, or wall-clock repeats): {result['alerts_not_compared']}")
    for category, entry in result["categories"].items():
        shown = {k: v for k, v in entry["examples"].items() if v}
        if shown:
            out.append(f"  {category} examples: {json.dumps(shown, default=str)[:600]}")
    if "kills" in result:
        out.append("")
        out.append(f"kills done: {result['kills_done']} {result['kills_by_target']}")
        for index, kill in enumerate(result["kills"], 1):
            out.append(f"  {index:>2}. {kill['target']:<18} at {kill['at_s']:>6} s (reading time +{kill['reading_t']} s), "
                       f"down {kill['down_s']} s, working again {kill['ready_s']} s after restart, "
                       + (f"caught up {kill['caught_up_s']} s after restart" if kill["caught_up_s"] is not None
                          else "nothing to fetch")
                       + (f"  [{kill['error']}]" if kill["error"] else ""))
    if result.get("recovery"):
        out.append("")
        out.append("recovery time by kind of kill (restart until every consumer has fetched what it missed):")
        for target, row in result["recovery"].items():
            out.append(f"  {target:<18} {row['kills']} kills, median {row['median_s']} s, longest {row['max_s']} s"
                       + (f" ({row['nothing_to_fetch']} more with nothing to fetch)" if row.get("nothing_to_fetch") else ""))
    if result.get("diagnosis"):
        out.append("")
        out.append("what was lost/doubled from each kill to the next (by reading time):")
        for row in result["diagnosis"]:
            out.append(f"  kill {row['kill']:>2} {row['target']:<24} lost {row['lost'] or '-'} doubled {row['doubled'] or '-'}")
    if result.get("recorder_status"):
        out.append(f"recorder counters: {json.dumps(result['recorder_status'])}")
    out.append("")
    out.append("OK: nothing lost, doubled or left open" if result["ok"] else "FAILED: " + "; ".join(result["problems"]))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=LONG.kills, help="SIGKILLs in the faulted run (default 20)")
    parser.add_argument("--stations", type=int, default=20,
                        help=f"stations replayed: a multiple of the recording's {len(SIM_STATIONS)} (default 20)")
    parser.add_argument("--seed", type=int, default=1, help="seeds the kill moments, targets and down times")
    parser.add_argument("--short", action="store_true", help="the short recording (2 sets a station) instead of the long one")
    parser.add_argument("--targets", default=",".join(TARGETS), help="programs to kill, comma-separated (default all five)")
    parser.add_argument("--no-restart", action="store_true", help="kill without restarting (shows what a dead program loses)")
    parser.add_argument("--sequential", action="store_true", help="run the clean installation first, then the faulted one")
    parser.add_argument("--recording", type=Path, help="replay this recording instead of making one")
    parser.add_argument("--folder", type=Path, help="where the run keeps its databases and logs (default: a new temporary folder)")
    parser.add_argument("--quiet", type=float, default=15.0, help="seconds a store must stay unchanged to count as settled")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if args.stations % len(SIM_STATIONS):
        parser.error(f"--stations must be a multiple of {len(SIM_STATIONS)}")
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = set(targets) - set(TARGETS)
    if unknown:
        parser.error(f"--targets: unknown {sorted(unknown)}; choose from {TARGETS}")
    profile = SHORT if args.short else LONG
    folder = args.folder or Path(tempfile.mkdtemp(prefix="vbt-fault-run-"))
    result = run(args.kills, args.stations // len(SIM_STATIONS), args.seed, folder, profile, targets,
                 restart=not args.no_restart, parallel=not args.sequential, quiet_s=args.quiet,
                 recording=args.recording)
    (folder / "report.json").write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(format_report(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
