"""session-recorder end to end over real processes: the bus, a simulated
station, the rep detector and the recorder on a real SQLite file; `vbt`
commands against its query endpoint; the export holds every published rep
exactly once with the same metrics. Then bad input: malformed messages, a
locked database, a read-only and a full disk (a small tmpfs mount), each with
a clear error, nothing already stored lost, and recovery once the cause goes.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import re
import secrets
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest
import zmq

from bus_tap import BusTap
from test_wire import (Bus, binary, bus, free_port, validate_message,  # noqa: F401 (fixture)
                       wait_until)

REP_METRICS = ["mean_velocity_mps", "peak_velocity_mps", "mean_propulsive_velocity_mps", "rom_mm",
               "concentric_s", "time_to_peak_s", "velocity_loss_pct", "t_end", "detector"]


class Recorder:
    """A running session-recorder on its own query port and database, with a query client."""

    def __init__(self, bus: Bus, db: Path, name: str = "session-recorder", extra: list[str] | None = None):
        self.bus = bus
        self.db = db
        self.endpoint = f"tcp://127.0.0.1:{free_port()}"
        bus.env["VBT_QUERY_ENDPOINT"] = self.endpoint
        bus.env["VBT_DB"] = str(db)
        self.program = bus.spawn(name, ["session-recorder", *(extra or [])])
        self.program.wait_for_log("bus connected")
        self.ctx = zmq.Context()

    def ask(self, query: str, args: dict | None = None, timeout: float = 5.0) -> dict:
        """One request on a DEALER socket, as `vbt` sends it; the reply as a dict."""
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(self.endpoint)
        try:
            request = {"id": secrets.token_hex(4), "query": query, "args": args or {}}
            sock.send_multipart([b"", json.dumps(request).encode()])
            assert sock.poll(int(timeout * 1000), zmq.POLLIN), f"no reply to {query} within {timeout} s\n{self.program.describe()}"
            reply = json.loads(sock.recv_multipart()[-1])
            assert reply.get("id") == request["id"], reply
            return reply
        finally:
            sock.close()

    def result(self, query: str, args: dict | None = None):
        reply = self.ask(query, args)
        assert reply["ok"], f"{query} failed: {reply}"
        return reply["result"]

    def rows(self, table: str) -> int:
        return self.result("status")["rows"][table]

    def close(self) -> None:
        self.ctx.term()


class RawPublisher:
    """A pyzmq publisher with its own src and seq, for messages the Swift programs would never send."""

    def __init__(self, bus: Bus, topic_prefix: str):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.XPUB)
        self.sock.setsockopt(zmq.LINGER, 2000)
        self.sock.connect(bus.pub_endpoint)
        self.instance = f"py-test-{secrets.token_hex(4)}"
        self.seqs: dict[str, int] = {}
        seen: list[bytes] = []

        def subscribed() -> bool:
            if self.sock.poll(100, zmq.POLLIN):
                seen.append(self.sock.recv())
            return any(topic_prefix.encode().startswith(s[1:]) for s in seen if s[:1] == b"\x01")
        wait_until(subscribed, f"a subscription covering {topic_prefix} to reach the test's publisher", detail=bus.describe)

    def message(self, kind: str, station: str, fields: dict, athlete: str | None = "ana") -> dict:
        topic = f"{kind}.{station}"
        self.seqs[topic] = self.seqs.get(topic, 0) + 1
        msg = {"v": 1, "type": kind, "station": station, "src": f"{self.instance}/{topic}",
               "seq": self.seqs[topic], "ts": time.time(), **fields}
        if athlete:
            msg["athlete"] = athlete
        return msg

    def send(self, msg: dict) -> None:
        self.sock.send_multipart([f"{msg['type']}.{msg['station']}".encode(), json.dumps(msg).encode()])

    def send_raw(self, frames: list[bytes]) -> None:
        self.sock.send_multipart(frames)

    def close(self) -> None:
        self.sock.close()
        self.ctx.term()


def rep_fields(set_id: str, index: int, t: float) -> dict:
    v = 0.8 - 0.03 * index
    return {"set_id": set_id, "rep_id": f"{set_id}-r{index}", "index": index, "mean_velocity_mps": v,
            "peak_velocity_mps": v * 1.5, "mean_propulsive_velocity_mps": v * 1.04, "rom_mm": 600.0,
            "concentric_s": 0.75, "time_to_peak_s": 0.3, "velocity_loss_pct": 3.0 * (index - 1), "t_end": t,
            "detector": "rep-detector-0000abcd", "exercise": "squat", "load_kg": 100.0}


def vbt(bus: Bus, *args: str, expect_ok: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([binary("vbt"), *args], env=bus.env, cwd=bus.tmp_path, capture_output=True,
                            text=True, timeout=30, stdin=subprocess.DEVNULL)
    if expect_ok:
        assert result.returncode == 0, f"vbt {' '.join(args)} exited {result.returncode}:\n{result.stderr}\n{bus.describe()}"
    return result


# --------------------------------------------------------------------------


def test_simulated_session_exported_exactly_once(bus: Bus, tmp_path: Path):
    recorder = Recorder(bus, tmp_path / "data" / "vbt.sqlite")
    try:
        # The gym's data: an athlete, a plan, the station assignment (published as cmd, stored by the recorder).
        out = vbt(bus, "athlete", "add", "ana", "--name", "Ana Rossi", "--sex", "f", "--born", "1995",
                  "--height-cm", "168", "--weight-kg", "62", "--json")
        assert json.loads(out.stdout)["bmi"] == pytest.approx(62 / 1.68 ** 2)
        bad = vbt(bus, "athlete", "add", "ana", "--name", "Again", expect_ok=False)
        assert bad.returncode == 1 and "exists already" in bad.stderr, bad.stderr
        vbt(bus, "plan", "create", "ana-strength", "--athlete", "ana", "--item", "squat:2x5@100kg/120s", "--item", "bench:3x8")
        bad = vbt(bus, "plan", "create", "broken", "--item", "squat:2x", expect_ok=False)
        assert bad.returncode == 1 and "SETSxREPS" in bad.stderr, bad.stderr
        bad = vbt(bus, "station", "assign", "rack-01", "--athlete", "nobody", "--exercise", "squat", "--load", "100",
                  expect_ok=False)
        assert bad.returncode == 1 and "no athlete 'nobody'" in bad.stderr, bad.stderr

        detector = bus.spawn("rep-detector", ["rep-detector"])
        detector.wait_for_log("bus connected")
        record_path = tmp_path / "reps.jsonl"
        record = bus.spawn("record", ["vbt", "record", "--out", str(record_path), "rep.", "set.", "cmd."])
        record.wait_for_log("bus connected")
        # A station its bridge has not spoken for yet is unknown until registered; then the
        # assignment is kept for when it speaks (and says so).
        unknown = vbt(bus, "station", "assign", "rack-01", "--athlete", "ana", "--exercise", "squat", "--load", "100",
                      expect_ok=False)
        assert unknown.returncode == 1 and "no station 'rack-01' is known" in unknown.stderr, unknown.stderr
        vbt(bus, "station", "add", "rack-01", "--label", "Squat rack 1")
        result = vbt(bus, "station", "assign", "rack-01", "--athlete", "ana", "--exercise", "squat", "--load", "100", "--json")
        assigned = json.loads(result.stdout)
        assert assigned["athlete"] == "ana" and assigned["load_kg"] == 100, assigned
        assert "rack-01 has never been heard from" in result.stderr, result.stderr

        bus.run(["sensor-bridge", "--simulate", "--station", "rack-01", "--exercise", "squat", "--load-kg", "100",
                 "--seed", "5", "--sets", "2", "--reps", "5", "--rest", "4", "--speed", "0", "--athlete", "ana"],
                timeout=60)
        # The second set ends by the idle timeout of reading time; the bridge's last readings
        # carry it past 10 s only if it ran long enough, so end it explicitly too.
        vbt(bus, "pub", "cmd.rack-01", json.dumps({"id": "t-end", "command": "set.end", "target": "*"}))

        def published_reps() -> list[dict]:
            if not record_path.exists():
                return []
            text = record_path.read_text()
            complete = text[: text.rfind("\n") + 1]  # the recorder may be mid-line
            return [m for m in (json.loads(line)["msg"] for line in complete.splitlines()) if m["type"] == "rep"]
        wait_until(lambda: len(published_reps()) >= 10, "the detector to publish 10 reps", timeout=30,
                   detail=bus.describe)
        wait_until(lambda: recorder.rows("reps") >= len(published_reps()), "the recorder to store every rep",
                   detail=bus.describe)
        assert record.terminate() == 0

        export_dir = tmp_path / "export"
        vbt(bus, "export", "--format", "json", "--out", str(export_dir))
        exported = json.loads((export_dir / "vbt-export.json").read_text())
        reps = published_reps()
        by_id = {}
        for row in exported["reps"]:  # columns named as on the wire: rep_id, index, set_id
            assert row["rep_id"] not in by_id, f"rep {row['rep_id']} exported twice"
            by_id[row["rep_id"]] = row
        assert set(by_id) == {r["rep_id"] for r in reps}, "the export holds exactly the published reps"
        for rep in reps:
            validate_message(rep)
            row = by_id[rep["rep_id"]]
            assert row["set_id"] == rep["set_id"] and row["index"] == rep["index"] and row["athlete"] == "ana"
            for key in REP_METRICS:
                assert row[key] == rep[key], f"{rep['rep_id']}.{key}: exported {row[key]!r}, published {rep[key]!r}"
        sets = {s["set_id"]: s for s in exported["sets"]}
        assert set(sets) == {r["set_id"] for r in reps}
        assert len(sets) == 2 and all(s["reps"] == 5 and s["ended_ts"] for s in sets.values()), sets
        assert len(exported["sessions"]) == 1

        # CSV export: the same reps, one line each.
        vbt(bus, "export", "--format", "csv", "--out", str(tmp_path / "csv"), "--athlete", "ana")
        with open(tmp_path / "csv" / "reps.csv", newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert sorted(r["rep_id"] for r in rows) == sorted(by_id)
        # Each time beside its ISO 8601 twin; with --bom a spreadsheet's UTF-8 marker first.
        for row in rows:
            iso = datetime.datetime.fromisoformat(row["ts_iso"].replace("Z", "+00:00"))
            assert abs(iso.timestamp() - float(row["ts"])) < 0.001, row
        vbt(bus, "export", "--format", "csv", "--bom", "--out", str(tmp_path / "bom"), "--tables", "reps")
        assert (tmp_path / "bom" / "reps.csv").read_bytes().startswith(b"\xef\xbb\xbfrep_id,")

        # The assignment came through the bus and was stored; history, stats and progress see the session.
        assignment = recorder.result("assignment.get", {"station": "rack-01"})
        assert assignment["athlete"] == "ana" and assignment["exercise"] == "squat"
        history = json.loads(vbt(bus, "history", "--athlete", "ana", "--json").stdout)
        assert [s["reps"] for s in history] == [5, 5]
        week = json.loads(vbt(bus, "stats", "week", "--athlete", "ana", "--json", "--chart", "week.svg").stdout)
        assert week["totals"]["reps"] == 10 and week["totals"]["volume_kg"] == pytest.approx(1000)
        assert week["most_trained_exercise"] == "squat"
        assert (tmp_path / "week.svg").read_text().startswith("<svg")
        progress = json.loads(vbt(bus, "progress", "--athlete", "ana", "--json", "--chart", "p.svg").stdout)
        assert progress["exercises"][0]["best_by_load"][0]["load_kg"] == 100
        # The chart draws the squat's load-velocity points (one load: no line, no e1RM yet, so no MVT to read it at).
        svg = (tmp_path / "p.svg").read_text()
        assert "squat: load-velocity profile (best rep at each load)" in svg and "e1RM" not in svg.replace("Estimated 1RM", "")
        table = vbt(bus, "history").stdout
        assert "rack-01" in table and "squat" in table

        # The detector shared the patterns it learned (a set of 3+ reps each); a detector that has
        # none (a new machine) starts from them.
        patterns = recorder.result("pattern.list", {"exercise": "squat"})
        assert len(patterns) == 2 and all(json.loads(p["json"])["reps"] == 5 for p in patterns), patterns
        fresh = bus.spawn("rep-detector-fresh", ["rep-detector", "--patterns", str(tmp_path / "fresh.json"), "--stations", "none-*"])
        fresh.wait_for_log("patterns fetched from the session-recorder")
        assert fresh.terminate() == 0

        # Plan assignment publishes plan.assign and athlete.assign; the recorder stores it. The
        # notifier answers plan.assign with its own athlete.assign a moment later: vbt still
        # finds the one it sent, by its command id (it used to exit 1 over the notifier's).
        notifier = bus.spawn("notifier", ["notifier", "--state", str(tmp_path / "notifier.json")])
        notifier.wait_for_log("bus connected")
        vbt(bus, "station", "add", "rack-02")
        # One station per athlete: ana is at rack-01 (the simulated bridge has spoken for it since).
        taken = vbt(bus, "plan", "assign", "ana-strength", "--station", "rack-02", expect_ok=False)
        assert taken.returncode == 1 and "ana is at rack-01" in taken.stderr and "--move" in taken.stderr, taken.stderr
        vbt(bus, "plan", "assign", "ana-strength", "--station", "rack-02", "--move")
        stations = {s["name"]: s for s in json.loads(vbt(bus, "station", "list", "--json").stdout)}
        assert stations["rack-01"].get("athlete") is None and stations["rack-01"]["label"] == "Squat rack 1", stations
        assert stations["rack-02"]["athlete"] == "ana", stations
        # Which of the two athlete.assigns is the latest depends on scheduling (the notifier may
        # answer between vbt's two commands): both are stored, and both say squat.
        notifier.wait_for_log("plan moves on; assigning the next exercise")
        own = re.search(r"correlation_id=(notifier-\S+)", notifier.stderr()).group(1)
        stored = wait_until(lambda: recorder.result("assignment.get", {"station": "rack-02", "cmd_id": own}),
                            "the notifier's own athlete.assign stored", detail=bus.describe)
        assert stored["exercise"] == "squat" and recorder.result("assignment.get", {"station": "rack-02"})["exercise"] == "squat"

        # A restart of the recorder keeps everything and stores nothing twice.
        before = recorder.result("status")["rows"]
        assert recorder.program.terminate() == 0, recorder.program.describe()
        recorder.program = bus.spawn("session-recorder-2", ["session-recorder"])
        recorder.program.wait_for_log("bus connected")
        assert recorder.result("status")["rows"]["reps"] == before["reps"]
        assert recorder.program.terminate() == 0, recorder.program.describe()
    finally:
        recorder.close()


def test_replayed_messages_leave_the_database_unchanged(bus: Bus, tmp_path: Path):
    recorder = Recorder(bus, tmp_path / "vbt.sqlite")
    publisher = RawPublisher(bus, "rep.rack-09")
    try:
        messages = [publisher.message("set", "rack-09", {"set_id": "s9", "event": "start", "exercise": "squat", "load_kg": 100})]
        messages += [publisher.message("rep", "rack-09", rep_fields("s9", i, 1_700_000_000 + i)) for i in range(1, 6)]
        messages.append(publisher.message("set", "rack-09", {"set_id": "s9", "event": "end", "reps": 5, "reason": "idle",
                                                              "best_mean_velocity_mps": 0.77, "velocity_loss_pct": 12.0}))
        for msg in messages:
            publisher.send(msg)
        wait_until(lambda: recorder.rows("reps") == 5, "5 reps stored", detail=bus.describe)
        wait_until(lambda: recorder.result("status")["pending"] == 0, "nothing pending")

        def snapshot() -> dict:
            with sqlite3.connect(recorder.db) as db:
                return {table: db.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
                        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        first = snapshot()
        for msg in messages:  # the same src and seq again: the subscriber drops them as duplicates
            publisher.send(msg)
        wait_until(lambda: recorder.result("status")["inputs"]["duplicates"] >= len(messages),
                   "the recorder to see the repeats", detail=bus.describe)
        assert snapshot() == first
        # A restarted recorder has no memory of the streams but its database: the stored progress rejects them.
        assert recorder.program.terminate() == 0, recorder.program.describe()
        recorder.program = bus.spawn("session-recorder-2", ["session-recorder"])
        recorder.program.wait_for_log("bus connected")
        seen: set[bytes] = set()

        def resubscribed() -> bool:
            while publisher.sock.poll(50, zmq.POLLIN):
                seen.add(publisher.sock.recv())
            return {b"\x01rep.", b"\x01set."} <= seen
        wait_until(resubscribed, "the restarted recorder's subscriptions to reps and sets to reach the publisher")
        for msg in messages:
            publisher.send(msg)
        wait_until(lambda: recorder.result("status")["counters"]["duplicates"] >= len(messages),
                   "the restarted recorder to see the repeats", detail=bus.describe)
        assert recorder.result("status")["pending"] == 0
        assert snapshot() == first
    finally:
        publisher.close()
        recorder.close()


def test_a_hole_is_outstanding_until_filled(bus: Bus, tmp_path: Path):
    """Messages a stream skipped that no producer offers to fetch stay outstanding for a while (in the status
    and the heartbeat), not yet counted lost: one may yet offer them (filling a hole brings the count back
    down: `HoleTests` and `InOrderTests` in the Swift suites). After a bounded wait (proto/replay.md) they
    are counted lost; that is `HolePatience`'s unit tests'."""
    recorder = Recorder(bus, tmp_path / "vbt.sqlite")
    publisher = RawPublisher(bus, "rep.rack-06")
    tap = None
    try:
        beats: list[dict] = []
        tap = BusTap(bus.sub_endpoint, beats.append, b"heartbeat.session-recorder")
        reps = [publisher.message("rep", "rack-06", rep_fields("s6", i, 1_700_000_300 + i)) for i in range(1, 9)]
        for msg in reps[:2] + reps[5:]:  # 3, 4 and 5 never sent
            publisher.send(msg)
        wait_until(lambda: recorder.rows("reps") == 5, "5 reps stored", detail=bus.describe)
        wait_until(lambda: recorder.result("status")["inputs"].get("outstanding") == 3, "3 outstanding in the status",
                   detail=lambda: f"{recorder.result('status')}\n{bus.describe()}")
        wait_until(lambda: beats and beats[-1]["inputs"].get("outstanding") == 3, "3 outstanding in the heartbeat",
                   detail=lambda: f"{beats[-1:]}")
        # Kept open, not given up: the heartbeats after go on saying so, and nothing is counted lost.
        seen = len(beats)
        wait_until(lambda: len(beats) >= seen + 2, "two more heartbeats")
        assert all(beat["inputs"].get("outstanding") == 3 and beat["inputs"].get("lost", 0) == 0 for beat in beats[seen:]), beats[seen:]
        assert recorder.result("status")["inputs"].get("lost", 0) == 0
    finally:
        if tap:
            tap.close()
        publisher.close()
        recorder.close()


def test_malformed_and_refused_input_is_counted_never_fatal(bus: Bus, tmp_path: Path):
    recorder = Recorder(bus, tmp_path / "vbt.sqlite")
    publisher = RawPublisher(bus, "rep.rack-07")
    try:
        publisher.send_raw([b"rep.rack-07", b"{not json"])
        publisher.send_raw([b"rep.rack-07"])
        wrong = publisher.message("rep", "rack-07", {"set_id": "s7", "rep_id": "s7-x"})  # envelope fine, fields missing
        publisher.send(wrong)
        bad_index = publisher.message("rep", "rack-07", {**rep_fields("s7", 1, 1_700_000_100), "index": 0})
        publisher.send(bad_index)  # breaks CHECK (idx >= 1)
        good = publisher.message("rep", "rack-07", rep_fields("s7", 2, 1_700_000_200))
        publisher.send(good)
        wait_until(lambda: recorder.rows("reps") == 1, "the good rep stored", detail=bus.describe)
        status = recorder.result("status")
        assert status["counters"]["refused"] == 2, status
        recorder.program.wait_for_log("refused by the schema")
        recorder.program.wait_for_log("malformed message dropped")
        assert recorder.program.proc.poll() is None
    finally:
        publisher.close()
        recorder.close()


def test_locked_database_keeps_messages_and_recovers(bus: Bus, tmp_path: Path):
    recorder = Recorder(bus, tmp_path / "vbt.sqlite")
    publisher = RawPublisher(bus, "rep.rack-05")
    try:
        publisher.send(publisher.message("rep", "rack-05", rep_fields("s5", 1, 1_700_000_001)))
        wait_until(lambda: recorder.rows("reps") == 1, "the first rep stored", detail=bus.describe)
        locker = sqlite3.connect(recorder.db, timeout=0, isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            for i in range(2, 6):
                publisher.send(publisher.message("rep", "rack-05", rep_fields("s5", i, 1_700_000_000 + i)))
            recorder.program.wait_for_log("database is locked by another process")
            assert recorder.program.proc.poll() is None
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        wait_until(lambda: recorder.rows("reps") == 5, "every rep stored once the lock is gone", detail=bus.describe)
        recorder.program.wait_for_log("database writable again")
    finally:
        publisher.close()
        recorder.close()


def can_mount() -> bool:
    return os.geteuid() == 0 and subprocess.run(["mount", "--version"], capture_output=True).returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 16 MiB tmpfs: a disk that can really fill up, and be made read-only (16, not less: the
    recorder's write-ahead log alone may grow to 4 MiB before a checkpoint)."""
    if not can_mount():
        pytest.skip("needs root to mount a small tmpfs (CI runs as root)")
    mount = tmp_path / "small"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"tmpfs mount not permitted here: {result.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_full_disk_keeps_messages_and_recovers(bus: Bus, tmp_path: Path, small_disk: Path):
    recorder = Recorder(bus, small_disk / "vbt.sqlite")
    publisher = RawPublisher(bus, "sample.rack-04")
    try:
        publisher.send(publisher.message("rep", "rack-04", rep_fields("s4", 1, 1_700_000_001)))
        wait_until(lambda: recorder.rows("reps") == 1, "the first rep stored", detail=bus.describe)
        # Fill the disk.
        filler = small_disk / "filler"
        with open(filler, "wb", buffering=0) as handle:  # unbuffered: nothing left to flush (and fail) at close
            try:
                while True:
                    handle.write(b"\0" * 65536)
                    handle.flush()
            except OSError:
                pass
        # Raw readings keep coming while the disk is full, until a write fails: the write-ahead log's file
        # already holds some room (it is reused after a checkpoint), and what fits in it is written.
        t0 = 1_700_000_100.0
        sent_readings = 0

        def publish_until_a_write_fails() -> bool:
            nonlocal sent_readings
            for _ in range(50):
                batch = sent_readings // 16
                samples = [{"t": t0 + (batch * 16 + i) * 0.02, "distance_mm": 500.0 + i} for i in range(16)]
                publisher.send(publisher.message("sample", "rack-04", {"sensor": "distance", "samples": samples}))
                sent_readings += 16
            return bool(recorder.result("status").get("last_error"))
        wait_until(publish_until_a_write_fails, "the recorder to report the failed write", detail=bus.describe)
        # And reps.
        for i in range(2, 6):
            publisher.send(publisher.message("rep", "rack-04", rep_fields("s4", i, 1_700_000_000 + i)))
        status = recorder.result("status")
        assert status.get("last_error") and "disk" in status.get("last_error"), status
        assert status["pending"] > 0, status
        assert status["rows"]["reps"] == 1, "what was stored before stays"
        assert recorder.program.proc.poll() is None
        filler.unlink()

        def written() -> bool:
            status = recorder.result("status")
            return status["pending"] == 0 and status["rows"]["reps"] == 5 and status["rows"]["samples"] == sent_readings
        wait_until(written, "the queued messages to be written", timeout=30, detail=bus.describe)
        status = recorder.result("status")
        assert status.get("last_error") is None
        recorder.program.wait_for_log("database writable again")
        assert recorder.program.terminate() == 0
        with sqlite3.connect(recorder.db) as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        publisher.close()
        recorder.close()


def test_read_only_database_keeps_messages_and_recovers(bus: Bus, tmp_path: Path):
    """The database's disk is mounted read-only (as after a filesystem error): the recorder
    reads, says why it cannot write, keeps what arrives, and writes it once the disk is writable."""
    if not can_mount():
        pytest.skip("needs root to make a read-only bind mount (CI runs as root)")
    disk, view = tmp_path / "disk", tmp_path / "view"
    disk.mkdir()
    view.mkdir()
    first = Recorder(bus, disk / "vbt.sqlite", name="recorder-rw")
    publisher = RawPublisher(bus, "rep.rack-03")
    try:
        publisher.send(publisher.message("rep", "rack-03", rep_fields("s3", 1, 1_700_000_001)))
        wait_until(lambda: first.rows("reps") == 1, "the first rep stored", detail=bus.describe)
        assert first.program.terminate() == 0
    finally:
        first.close()
    subprocess.run(["mount", "--bind", str(disk), str(view)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], check=True)
        recorder = Recorder(bus, view / "vbt.sqlite", name="recorder-ro")
        try:
            for i in range(2, 5):
                publisher.send(publisher.message("rep", "rack-03", rep_fields("s3", i, 1_700_000_000 + i)))
            wait_until(lambda: recorder.result("status")["pending"] == 3 and recorder.result("status").get("last_error"),
                       "the recorder to keep the 3 reps and report why it cannot write them", detail=bus.describe)
            status = recorder.result("status")
            # SQLite opens the file read-only if its WAL index is there, else not at all: both say what to do.
            assert "writable" in status["last_error"], status
            assert status["pending"] == 3, status
            refused = recorder.ask("athlete.add", {"id": "bob", "name": "Bob"})
            assert not refused["ok"] and refused["error"]["kind"] in ("read-only", "cannot-open"), refused
            subprocess.run(["mount", "-o", "remount,rw,bind", str(view)], check=True)
            wait_until(lambda: recorder.rows("reps") == 4, "the queued reps written once writable", timeout=30,
                       detail=bus.describe)
            assert recorder.result("athlete.add", {"id": "bob", "name": "Bob"})["id"] == "bob"
            recorder.program.wait_for_log("database writable again")
            assert recorder.program.terminate() == 0
        finally:
            recorder.close()
    finally:
        publisher.close()
        subprocess.run(["umount", "-l", str(view)], capture_output=True)


def test_recorder_refuses_an_unusable_database_in_one_line(tmp_path: Path):
    not_a_db = tmp_path / "junk.sqlite"
    not_a_db.write_bytes(b"this is not a database" * 100)
    result = subprocess.run([binary("session-recorder"), "--db", str(not_a_db)], capture_output=True, text=True,
                            timeout=30, env=dict(os.environ, VBT_QUERY_ENDPOINT=f"tcp://127.0.0.1:{free_port()}"))
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "not a vbt database" in lines[0], result.stderr
    assert not_a_db.read_bytes() == b"this is not a database" * 100, "the file is left as it was"


def test_posture_calibration_travels_through_the_recorder(bus: Bus, tmp_path: Path):
    """Calibrated by one evaluator, judged by another that never saw it: on athlete.assign
    the second asks the recorder (calibration.get) and uses the stored calibration."""
    from test_posture_e2e import STATION, Wearable, messages

    recorder = Recorder(bus, tmp_path / "vbt.sqlite")
    rec = tmp_path / "posture.jsonl"
    record = bus.spawn("record", ["vbt", "record", "--out", str(rec), "posture.", "calibration."])
    record.wait_for_log("bus connected")
    first = bus.spawn("posture-evaluator-1", ["posture-evaluator", "--calibrations", str(tmp_path / "one.json")])
    first.wait_for_log("bus connected")
    wearable = Wearable(bus)
    try:
        bus.run(["vbt", "posture", "calibrate", "--station", STATION, "--athlete", "ana", "--seconds", "2", "--no-check"])
        first.wait_for_log("posture calibration started")
        wearable.hold(0, 2.5)
        wait_until(lambda: recorder.result("calibration.get", {"athlete": "ana"}), "the recorder to store the calibration",
                   detail=bus.describe)
        assert first.terminate() == 0

        second = bus.spawn("posture-evaluator-2", ["posture-evaluator", "--calibrations", str(tmp_path / "two.json")])
        second.wait_for_log("bus connected")
        wearable.announce()  # its status, as a bridge sends one every 5 s: the new evaluator follows the station
        before = len(messages(rec, "posture"))
        bus.run(["vbt", "pub", f"cmd.{STATION}", json.dumps({"id": "a2", "command": "athlete.assign", "target": "*",
                                                            "args": {"athlete": "ana"}}), "--rate", "0"])
        second.wait_for_log("posture calibration fetched from the session-recorder")
        wearable.hold(30, 2)
        wait_until(lambda: any(not m["correct"] for m in messages(rec, "posture")[before:]),
                   "the second evaluator to judge a slouch with the fetched calibration", detail=bus.describe)
        assert json.loads((tmp_path / "two.json").read_text())["byAthlete"]["ana"]["acc"]["fromData"] is True
        assert second.terminate() == 0
    finally:
        wearable.close()
        recorder.close()


def test_backup_under_write_load_restores_everything_stored_before(bus: Bus, tmp_path: Path):
    """`vbt backup` copies the live database while two simulated stations (readings, reps,
    sets) are being written; the copy passes PRAGMA integrity_check, holds every row stored
    before the backup began, and a recorder started on it (the documented restore) serves it."""
    recorder = Recorder(bus, tmp_path / "live" / "vbt.sqlite")
    bus.spawn("rep-detector", ["rep-detector"]).wait_for_log("bus connected")
    for station, seed in (("rack-01", "1"), ("rack-02", "2")):
        bus.spawn(f"bridge-{station}", ["sensor-bridge", "--simulate", "--loop", "--station", station, "--athlete", "ana",
                                        "--speed", "4", "--seed", seed, "--rest", "2", "--reps", "3"])
    wait_until(lambda: recorder.rows("samples") > 2_000 and recorder.rows("reps") >= 3, "readings and reps being stored",
               timeout=60, detail=bus.describe)
    before = recorder.result("status")["rows"]
    result = json.loads(vbt(bus, "backup", "gym-1", "--json", "--timeout", "30").stdout)
    assert result["integrity"] == "ok" and result["path"] == str(tmp_path / "live" / "backups" / "gym-1.sqlite")
    assert all(result["rows"][table] >= before[table] for table in before), (before, result["rows"])
    wait_until(lambda: recorder.rows("samples") > result["rows"]["samples"], "the recorder to go on writing after the backup",
               detail=bus.describe)
    # The file as an independent reader sees it.
    with sqlite3.connect(result["path"]) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT count(*) FROM reps").fetchone()[0] == result["rows"]["reps"]
        backed_up_sets = {row[0] for row in db.execute("SELECT id FROM sets")}
    # Never replaced; a name that is a path is refused.
    again = vbt(bus, "backup", "gym-1", expect_ok=False)
    assert again.returncode == 1 and "exists already" in again.stderr
    sneaky = vbt(bus, "backup", "../../etc/x", expect_ok=False)
    assert sneaky.returncode == 1 and "a backup's name is" in sneaky.stderr

    # Restore: the recorder stopped, the backup copied over its database, the recorder started again.
    assert recorder.program.terminate() == 0
    restored = tmp_path / "restored" / "vbt.sqlite"
    restored.parent.mkdir()
    restored.write_bytes(Path(result["path"]).read_bytes())
    again = Recorder(bus, restored, name="session-recorder-restored")
    rows = again.result("status")["rows"]
    assert all(rows[table] >= result["rows"][table] for table in result["rows"]), (result["rows"], rows)
    history = {s["id"] for s in again.result("history", {"limit": 10_000})}
    assert backed_up_sets <= history
    again.close()
    recorder.close()


def test_athletes_edited_archived_erased_and_a_set_reassigned(bus: Bus, tmp_path: Path):
    """A coach's data through vbt and a real recorder: a set lifted before anyone was assigned
    goes to its athlete; details change; an athlete who left is archived; one who asks is
    erased, and no row of the database names them afterwards."""
    recorder = Recorder(bus, tmp_path / "vbt.sqlite")
    vbt(bus, "athlete", "add", "ana", "--name", "Ana Rossi", "--sex", "f", "--born", "1990", "--weight-kg", "61")
    vbt(bus, "athlete", "add", "ben", "--name", "Ben")
    pub = RawPublisher(bus, "set.")
    t = time.time()
    pub.send(pub.message("set", "rack-01", {"set_id": "early", "event": "start"}, athlete=None))
    for index in (1, 2):
        pub.send(pub.message("rep", "rack-01", {**rep_fields("early", index, t + index), "exercise": "generic"}, athlete=None))
    pub.send(pub.message("set", "rack-01", {"set_id": "early", "event": "end", "reps": 2, "reason": "idle",
                                            "best_mean_velocity_mps": 0.77, "velocity_loss_pct": 3.0}, athlete=None))
    wait_until(lambda: recorder.rows("reps") == 2 and recorder.rows("sets") == 1, "the set stored", detail=bus.describe)
    moved = json.loads(vbt(bus, "set", "reassign", "early", "--athlete", "ana", "--exercise", "squat", "--load", "100", "--json").stdout)
    assert (moved["athlete"], moved["exercise"], moved["load_kg"], moved["reps"]) == ("ana", "squat", 100, 2)
    assert recorder.result("progress", {"athlete": "ana"})["exercises"][0]["best_by_load"][0]["load_kg"] == 100

    edited = json.loads(vbt(bus, "athlete", "edit", "ana", "--goal-kg", "60", "--clear", "born", "--json").stdout)
    assert edited["goal_weight_kg"] == 60 and edited.get("birth_year") is None and edited["name"] == "Ana Rossi"
    vbt(bus, "athlete", "archive", "ben")
    assert [a["id"] for a in json.loads(vbt(bus, "athlete", "list", "--json").stdout)] == ["ana"]
    assert [a["id"] for a in json.loads(vbt(bus, "athlete", "list", "--archived", "--json").stdout)] == ["ana", "ben"]

    wrong = vbt(bus, "athlete", "erase", "ana", "--confirm", "ben", expect_ok=False)
    assert wrong.returncode == 1 and "confirm with the same id" in wrong.stderr
    erased = json.loads(vbt(bus, "athlete", "erase", "ana", "--confirm", "ana", "--json").stdout)
    assert erased["pseudonym"].startswith("erased-") and erased["rows"]["reps"] == 2 and erased["rows"]["weigh_ins"] == 1
    with sqlite3.connect(tmp_path / "vbt.sqlite") as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in db.execute(f"SELECT * FROM {table}"):
                text = json.dumps(row, default=str)
                assert '"ana"' not in text and "Ana Rossi" not in text and "1990" not in text, (table, row)
    gone = vbt(bus, "athlete", "show", "ana", expect_ok=False)
    assert gone.returncode == 1 and "no athlete 'ana'" in gone.stderr
    assert [s["athlete"] for s in recorder.result("history", {"limit": 10})] == [erased["pseudonym"]]
    pub.close()
    recorder.close()
