"""Nothing lost when the recorder dies: real processes on a real bus.

A simulated station publishes through a bridge that journals what it sends
(`--journal`, or by default); the session-recorder is killed with SIGKILL mid-stream and
started again on the same database. The restarted recorder learns from the
bridge's heartbeat how far the stream went, fetches what it missed from the
bridge's journal (proto/replay.md) and stores every reading exactly once: the
database then holds each reading a test subscriber saw, no more and no fewer,
and no reading is counted lost.

Run from the repository root:  python3 -m pytest -q tests/python
"""

from __future__ import annotations

import json
import random
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
import zmq

from test_recorder import Recorder, small_disk  # noqa: F401 (fixture)
from test_wire import Bus, binary, bus, wait_until  # noqa: F401 (fixture)


@pytest.mark.parametrize("journal", ["given", "by-default"])
def test_a_recorder_killed_mid_stream_fetches_what_it_missed_from_the_bridges_journal(bus: Bus, tmp_path: Path, journal: str):
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"sample.rec-1")
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(bus.sub_endpoint)
    seen: list[tuple[str, float]] = []

    def pump(seconds: float) -> None:
        """Counts every reading published, as a subscriber that never stops sees it."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if sub.poll(int(left * 1000) + 1, zmq.POLLIN):
                message = json.loads(sub.recv_multipart()[1])
                seen.extend((message["sensor"], reading["t"]) for reading in message["samples"])

    db = tmp_path / "vbt.sqlite"
    first = Recorder(bus, db)
    # Given, or by default (a bridge started by hand): data/journal/bridge-<station> in its working folder.
    given = ["--journal", str(tmp_path / "journal-rec-1")] if journal == "given" else []
    bridge = bus.spawn("bridge", ["sensor-bridge", "--simulate", "--station", "rec-1", "--loop", "--imu-rate", "0", *given])
    try:
        bridge.wait_for_log("journal-rec-1" if given else "data/journal/bridge-rec-1")
        pump(3)
        first.program.kill()  # SIGKILL: no flush, no goodbye
        first.close()
        pump(2)  # published while no recorder runs
        second = Recorder(bus, db, name="session-recorder-2")
        try:
            pump(3)
            assert seen, "the bridge published nothing"
            last_t = max(t for _, t in seen)
            expected = sum(1 for _, t in seen if t <= last_t)

            def stored() -> int:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                    return conn.execute("SELECT count(*) FROM samples WHERE station = 'rec-1' AND t <= ?", (last_t,)).fetchone()[0]

            wait_until(lambda: stored() >= expected, f"{expected} readings stored", timeout=30,
                       detail=lambda: f"stored {stored()}\n{bus.describe()}")
            assert stored() == expected, "every reading exactly once"
            counters = second.result("status")["counters"]
            assert counters["lost"] == 0, counters
            assert counters["recovered"] > 0, f"the readings published while the recorder was down came from the journal: {counters}"
        finally:
            second.close()
    finally:
        bridge.kill()
        ctx.destroy(linger=0)


def test_a_bridge_with_no_journal_offers_none_and_its_help_says_what_that_costs(bus: Bus):
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"heartbeat.bridge-rec-")
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(bus.sub_endpoint)
    offers: dict[str, list[bool]] = {"rec-2": [], "rec-3": []}
    bridges = [bus.spawn("bridge-2", ["sensor-bridge", "--simulate", "--station", "rec-2", "--loop", "--no-journal"]),
               bus.spawn("bridge-3", ["sensor-bridge", "--simulate", "--station", "rec-3", "--loop"])]
    try:
        def heard() -> bool:
            while sub.poll(50, zmq.POLLIN):
                body = json.loads(sub.recv_multipart()[1])
                offers[body["station"].removeprefix("bridge-")].append("replay" in body)
            return all(len(seen) >= 2 for seen in offers.values())
        wait_until(heard, "two heartbeats of each bridge", detail=bus.describe)
        assert not any(offers["rec-2"]) and all(offers["rec-3"]), offers
        help_text = bus.run(["sensor-bridge", "--help"]).stdout
        assert "--no-journal" in help_text and "lost for good" in " ".join(help_text.split()), help_text
    finally:
        for bridge in bridges:
            bridge.kill()
        ctx.destroy(linger=0)


def test_detectors_splitting_a_gym_in_one_folder_keep_a_journal_each(bus: Bus, tmp_path: Path):
    """By default a detector journals in data/journal/rep-detector, or with --stations GLOB in
    data/journal/rep-detector-GLOB, so two started by hand in one folder both run; where the
    default folder cannot be made, the program stops with one line naming what to do."""
    racks = bus.spawn("racks", ["rep-detector", "--stations", "rack-*", "--patterns", str(tmp_path / "p1.json")])
    benches = bus.spawn("benches", ["rep-detector", "--stations", "bench-*", "--patterns", str(tmp_path / "p2.json")])
    racks.wait_for_log("bus connected")
    benches.wait_for_log("bus connected")
    journals = bus.tmp_path / "data" / "journal"
    assert (journals / "rep-detector-rack-_" / "journal.lock").exists(), sorted(journals.iterdir())
    assert (journals / "rep-detector-bench-_" / "journal.lock").exists(), sorted(journals.iterdir())
    assert racks.proc.poll() is None and benches.proc.poll() is None, bus.describe()

    # A working folder where data/ cannot be made (a file stands in its way).
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "data").write_text("not a folder")
    result = subprocess.run([binary("rep-detector"), "--patterns", str(tmp_path / "p3.json")], env=bus.env, cwd=blocked,
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode != 0, result
    assert "--journal DIR" in result.stderr and "--no-journal" in result.stderr, result.stderr


def test_reps_published_while_the_recorder_was_down_come_from_the_detectors_journal(bus: Bus, tmp_path: Path):
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"rep.rec-2")
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(bus.sub_endpoint)
    reps: dict[str, dict] = {}

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if sub.poll(int(left * 1000) + 1, zmq.POLLIN):
                rep = json.loads(sub.recv_multipart()[1])
                reps[rep["rep_id"]] = rep

    db = tmp_path / "vbt.sqlite"
    first = Recorder(bus, db)
    detector = bus.spawn("rep-detector", ["rep-detector", "--patterns", str(tmp_path / "patterns.json"),
                                          "--journal", str(tmp_path / "journal-detector")])
    bridge = bus.spawn("bridge", ["sensor-bridge", "--simulate", "--station", "rec-2", "--speed", "4", "--sets", "2",
                                  "--reps", "4", "--rest", "4", "--imu-rate", "0"])
    try:
        detector.wait_for_log("journalling")
        wait_until(lambda: (pump(0.2), len(reps) >= 1)[1], "the first rep", timeout=60, detail=bus.describe)
        first.program.kill()  # SIGKILL, mid-session
        first.close()
        wait_until(lambda: (pump(0.2), bridge.proc.poll() is not None)[1], "the session to end", timeout=60, detail=bus.describe)
        pump(1)
        assert len(reps) == 8, f"the detector published every rep: {sorted(reps)}"
        second = Recorder(bus, db, name="session-recorder-2")
        try:
            def stored() -> set[str]:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                    return {row[0] for row in conn.execute("SELECT id FROM reps WHERE station = 'rec-2'")}

            wait_until(lambda: stored() == set(reps), "every rep stored", timeout=30,
                       detail=lambda: f"stored {sorted(stored())}\nseen {sorted(reps)}\n{bus.describe()}")
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                rows = {row[0]: row[1] for row in conn.execute("SELECT id, mean_velocity_mps FROM reps WHERE station = 'rec-2'")}
            assert rows == {rep_id: rep["mean_velocity_mps"] for rep_id, rep in reps.items()}, "the same metrics"
            counters = second.result("status")["counters"]
            assert counters["lost"] == 0 and counters["recovered"] > 0, counters
        finally:
            second.close()
    finally:
        bridge.kill()
        detector.kill()
        ctx.destroy(linger=0)


def test_a_detector_taking_over_journals_into_the_same_folder_once_the_old_one_exits(bus: Bus, tmp_path: Path):
    folder = str(tmp_path / "journal-detector")
    old = bus.spawn("rep-detector-old", ["rep-detector", "--patterns", str(tmp_path / "patterns.json"), "--journal", folder])
    bridge = bus.spawn("bridge", ["sensor-bridge", "--simulate", "--station", "rec-3", "--loop", "--imu-rate", "0"])
    try:
        old.wait_for_log("journalling")
        new = bus.spawn("rep-detector-new", ["rep-detector", "--takeover", "--patterns", str(tmp_path / "patterns.json"),
                                             "--journal", folder])
        new.wait_for_log("took over")
        assert old.proc.wait(timeout=20) == 0, old.describe()
        new.wait_for_log("journalling")
        assert "no journal" not in new.stderr(), new.describe()
        assert new.terminate() == 0, new.describe()
    finally:
        bridge.kill()


def test_five_recorder_kills_at_random_moments_lose_nothing(bus: Bus, tmp_path: Path):
    """The short version of the fault run: 4 stations and a detector journalling, the recorder
    killed with SIGKILL 5 times at seeded random moments and started again 0.5-2 s later;
    at the end every reading and every rep the bus carried is stored exactly once."""
    rng = random.Random(20261125)
    stations = [f"kill-{n}" for n in range(1, 5)]
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    for prefix in (b"sample.kill-", b"rep.kill-"):
        sub.setsockopt(zmq.SUBSCRIBE, prefix)
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(bus.sub_endpoint)
    readings: list[tuple[str, float]] = []
    reps: dict[str, float] = {}

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if sub.poll(int(left * 1000) + 1, zmq.POLLIN):
                topic, body = sub.recv_multipart()
                message = json.loads(body)
                if topic.startswith(b"sample."):
                    readings.extend((message["station"], reading["t"]) for reading in message["samples"])
                else:
                    reps[message["rep_id"]] = message["mean_velocity_mps"]

    db = tmp_path / "vbt.sqlite"
    recorder = Recorder(bus, db)
    detector = bus.spawn("rep-detector", ["rep-detector", "--patterns", str(tmp_path / "patterns.json"),
                                          "--journal", str(tmp_path / "journal-detector")])
    bridges = [bus.spawn(f"bridge-{station}", ["sensor-bridge", "--simulate", "--station", station, "--loop", "--speed", "2",
                                               "--imu-rate", "0", "--seed", str(index + 1), "--rest", "3",
                                               "--journal", str(tmp_path / f"journal-{station}")])
               for index, station in enumerate(stations)]
    recorders = [recorder]
    try:
        detector.wait_for_log("journalling")
        for bridge in bridges:
            bridge.wait_for_log("journalling")
        for kill in range(5):
            pump(rng.uniform(1.0, 3.0))
            recorders[-1].program.kill()
            recorders[-1].close()
            pump(rng.uniform(0.5, 2.0))
            recorders.append(Recorder(bus, db, name=f"session-recorder-{kill + 2}"))
        pump(3)
        last_t = {station: max(t for s, t in readings if s == station) for station in stations}
        expected = {station: sum(1 for s, t in readings if s == station and t <= last_t[station]) for station in stations}
        assert all(expected.values()) and reps, "the stations published readings and reps"

        def stored() -> dict[str, int]:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                return {station: conn.execute("SELECT count(*) FROM samples WHERE station = ? AND t <= ?",
                                              (station, last_t[station])).fetchone()[0] for station in stations}

        def stored_reps() -> dict[str, float]:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                return {row[0]: row[1] for row in conn.execute("SELECT id, mean_velocity_mps FROM reps WHERE station LIKE 'kill-%'")}

        wait_until(lambda: stored() == expected and set(reps) <= set(stored_reps()), "every reading and rep stored", timeout=60,
                   detail=lambda: f"stored {stored()} expected {expected}; reps {len(stored_reps())} of {len(reps)}\n{bus.describe()}")
        assert {rep_id: value for rep_id, value in stored_reps().items() if rep_id in reps} == reps, "the same metrics"
        counters = recorders[-1].result("status")["counters"]
        assert counters["lost"] == 0, counters
    finally:
        for program in [*bridges, detector]:
            program.kill()
        recorders[-1].close()
        ctx.destroy(linger=0)


def test_a_recorder_killed_while_its_disk_is_full_loses_nothing_once_space_returns(bus: Bus, tmp_path: Path, small_disk: Path):
    """The database's disk fills up (a 4 MiB tmpfs); the recorder holds what it cannot write, is
    killed with SIGKILL (its backlog gone with it), started again on the still-full disk, and the
    space then returns: every reading and rep the bus carried is stored exactly once, none lost."""
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    for prefix in (b"sample.full-1", b"rep.full-1"):
        sub.setsockopt(zmq.SUBSCRIBE, prefix)
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(bus.sub_endpoint)
    readings: list[float] = []
    reps: dict[str, float] = {}

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if sub.poll(int(left * 1000) + 1, zmq.POLLIN):
                topic, body = sub.recv_multipart()
                message = json.loads(body)
                if topic.startswith(b"sample."):
                    readings.extend(reading["t"] for reading in message["samples"])
                else:
                    reps[message["rep_id"]] = message["mean_velocity_mps"]

    db = small_disk / "vbt.sqlite"
    recorder = Recorder(bus, db)
    detector = bus.spawn("rep-detector", ["rep-detector", "--patterns", str(tmp_path / "patterns.json"),
                                          "--journal", str(tmp_path / "journal-detector")])
    bridge = bus.spawn("bridge", ["sensor-bridge", "--simulate", "--station", "full-1", "--loop", "--speed", "2",
                                  "--imu-rate", "0", "--rest", "3", "--journal", str(tmp_path / "journal-full-1")])
    second = None
    try:
        bridge.wait_for_log("journalling")
        pump(2)
        filler = small_disk / "filler"
        with open(filler, "wb", buffering=0) as handle:  # unbuffered: nothing left to flush (and fail) at close
            try:
                while True:
                    handle.write(b"\0" * 65536)
                    handle.flush()
            except OSError:
                pass
        wait_until(lambda: (pump(0.2), recorder.result("status").get("last_error"))[1], "the recorder to report the full disk",
                   timeout=30, detail=bus.describe)
        pump(2)
        assert recorder.result("status")["pending"] > 0, "readings wait in memory"
        recorder.program.kill()  # SIGKILL: the backlog in memory is gone
        recorder.close()
        pump(1)
        second = Recorder(bus, db, name="session-recorder-2")  # on the disk that is still full
        pump(2)
        filler.unlink()
        pump(4)
        last_t = max(readings)
        expected = sum(1 for t in readings if t <= last_t)
        assert reps, "the detector published reps"

        def stored() -> tuple[int, dict[str, float]]:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                count = conn.execute("SELECT count(*) FROM samples WHERE station = 'full-1' AND t <= ?", (last_t,)).fetchone()[0]
                rows = {row[0]: row[1] for row in conn.execute("SELECT id, mean_velocity_mps FROM reps WHERE station = 'full-1'")}
            return count, rows

        wait_until(lambda: stored()[0] == expected and set(reps) <= set(stored()[1]), "every reading and rep stored", timeout=60,
                   detail=lambda: f"stored {stored()[0]} of {expected} readings, {len(stored()[1])} of {len(reps)} reps\n{bus.describe()}")
        assert {rep_id: value for rep_id, value in stored()[1].items() if rep_id in reps} == reps, "the same metrics"
        counters = second.result("status")["counters"]
        assert counters["lost"] == 0 and counters["recovered"] > 0, counters
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        for program in (bridge, detector):
            program.kill()
        if second:
            second.close()
        ctx.destroy(linger=0)


def test_a_consumer_past_its_high_water_mark_recovers_what_the_bus_dropped(tmp_path: Path):
    """A bus with a small high-water mark (50 messages a peer) and a recorder that stops reading
    (SIGSTOP) while a journalling bridge publishes a whole session as fast as it can: the bus
    drops what the recorder cannot take; when it reads again (SIGCONT) it counts the jumps as gaps,
    sees from the heartbeat of the station's bridge (started again on the same folder) how far the
    stream went, and fetches the rest from the journal: every message of the stream stored once,
    none lost."""
    bus = Bus(tmp_path)
    bus.start(extra=["--high-water-mark", "50"])
    db = tmp_path / "vbt.sqlite"
    recorder = Recorder(bus, db)
    try:
        wait_until(lambda: recorder.result("status"), "the recorder to answer")
        recorder.program.proc.send_signal(signal.SIGSTOP)  # falls behind: reads nothing
        bridge = bus.spawn("bridge", ["sensor-bridge", "--simulate", "--station", "hwm-1", "--speed", "0", "--sets", "6",
                                      "--reps", "6", "--rest", "20", "--imu-rate", "200", "--wait-subscribers", "5",
                                      "--journal", str(tmp_path / "journal-hwm-1")])
        assert bridge.proc.wait(timeout=120) == 0, bridge.describe()
        published = int(re.search(r"published=sample=(\d+)", bridge.stderr()).group(1))
        assert published > 3_000, f"a flood: {published} messages"
        # The flood's bridge has ended; the station's bridge started again on its folder answers
        # for the stream before it, and its heartbeat says how far that stream went.
        again = bus.spawn("bridge-again", ["sensor-bridge", "--simulate", "--station", "hwm-2", "--loop", "--imu-rate", "0",
                                            "--journal", str(tmp_path / "journal-hwm-1")])
        again.wait_for_log("journalling")
        recorder.program.proc.send_signal(signal.SIGCONT)

        def stream() -> tuple[int, int, int]:
            """The flood stream's last seq, messages stored, and holes left, as the database says."""
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                row = conn.execute("SELECT src, last_seq, stored FROM sources WHERE topic = 'sample.hwm-1'").fetchone()
                if not row:
                    return 0, 0, -1
                holes = conn.execute("SELECT count(*) FROM source_holes WHERE src = ?", (row[0],)).fetchone()[0]
                return row[1], row[2], holes

        wait_until(lambda: stream() == (published, published, 0), f"all {published} messages stored", timeout=120,
                   detail=lambda: f"last seq, stored, holes: {stream()}\n{recorder.result('status')}\n{bus.describe()}")
        status = recorder.result("status")
        # What the bus dropped was counted (a jump is a gap, a stream that stopped short a tail),
        # and every one of those messages came from the journal.
        assert status["inputs"]["gaps"] > 0 or "stream stopped short of what its producer sent" in recorder.program.stderr(), status
        assert status["counters"]["recovered"] > 0 and status["counters"]["lost"] == 0, status
    finally:
        recorder.program.proc.send_signal(signal.SIGCONT)
        recorder.close()
        bus.stop_all()
