"""Wire-contract tests: the programs and a third-party Python client against proto/.

Run from the repository root:  python3 -m pytest -q tests/python

The Swift binaries are taken from $VBT_BIN_DIR, else <repo>/.build/debug.
Every wait polls a condition against a deadline; every child process is
stopped in a fixture's teardown, whatever the test's outcome.
"""

from __future__ import annotations

import copy
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

try:
    import zmq
except ImportError:  # pragma: no cover - the Makefile installs pyzmq for CI
    zmq = None

REPO = Path(__file__).resolve().parents[2]
PROTO = REPO / "proto"
BIN_DIR = Path(os.environ.get("VBT_BIN_DIR") or REPO / ".build" / "debug")

# How long a binary may be missing (being rebuilt) before a test gives up.
BINARY_WAIT_S = 60.0
# Bound for any one wait on the programs (start-up, delivery, shutdown).
WAIT_S = 15.0

TYPE_SCHEMAS = ["sample", "rep", "set", "status", "heartbeat", "cmd"]


# --------------------------------------------------------------------------
# Schemas


def load_schemas() -> dict[str, dict]:
    """Every proto/*.schema.json by its base name (`envelope`, `sample`, ...)."""
    schemas = {}
    for path in sorted(PROTO.glob("*.schema.json")):
        schemas[path.name[: -len(".schema.json")]] = json.loads(path.read_text(encoding="utf-8"))
    return schemas


SCHEMAS = load_schemas()
REGISTRY = Registry().with_resources(
    (schema["$id"], Resource.from_contents(schema, default_specification=DRAFT202012))
    for schema in SCHEMAS.values()
)
VALIDATORS = {
    name: Draft202012Validator(schema, registry=REGISTRY) for name, schema in SCHEMAS.items()
}


def validate_message(msg: dict) -> None:
    """Validates one JSON frame against proto/<msg.type>.schema.json (and so the envelope)."""
    assert isinstance(msg, dict), f"message is not an object: {msg!r}"
    kind = msg.get("type")
    assert kind in VALIDATORS and kind != "envelope", f"no schema in proto/ for type {kind!r}: {msg!r}"
    errors = sorted(VALIDATORS[kind].iter_errors(msg), key=lambda e: list(e.absolute_path))
    assert not errors, f"{kind} message does not match its schema: " + "; ".join(
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors
    ) + f"\nmessage: {json.dumps(msg)}"


def schema_errors(msg: dict, kind: str | None = None) -> list[str]:
    validator = VALIDATORS[kind or msg.get("type")]
    return [e.message for e in validator.iter_errors(msg)]


# --------------------------------------------------------------------------
# Waiting and processes


def wait_until(condition: Callable[[], Any], what: str, timeout: float = WAIT_S,
               interval: float = 0.02, detail: Callable[[], str] | None = None) -> Any:
    """Polls `condition` until it returns something truthy (returned) or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            extra = f"\n{detail()}" if detail else ""
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{extra}")
        time.sleep(interval)


def binary(name: str) -> str:
    """Path of a Swift binary; waits a bounded time if it is being rebuilt."""
    path = BIN_DIR / name
    wait_until(lambda: path.is_file() and os.access(path, os.X_OK),
               f"{path} to exist (build it with `swift build`, or set VBT_BIN_DIR)",
               timeout=BINARY_WAIT_S, interval=0.25)
    return str(path)


def _listener_ports() -> range | None:
    """Ports below (or above) the kernel's ephemeral range, which connect() never takes; None when
    neither leaves 4,096."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    if low - 10000 >= 4096:
        return range(10000, low)
    if 65535 - high >= 4096:
        return range(high + 1, 65536)
    return None


_LISTENER_PORTS = _listener_ports()
# The pid scattered (Knuth's multiplicative hash): a test and the script it starts begin far apart.
_next_port = (os.getpid() * 2654435761) % 1000003


def free_port() -> int:
    """A loopback port free now that no reconnecting socket can take before a program binds it.

    A port from bind(0) is ephemeral, and any outgoing connection may take it as its source
    port between this check and the program's bind. Ports below the ephemeral range are taken
    only by listeners; each test process walks its own sequence from its pid and skips ports in use.
    """
    global _next_port
    if _LISTENER_PORTS is None:  # a kernel whose ephemeral range leaves no room: its own choice
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]
    for _ in range(len(_LISTENER_PORTS)):
        port = _LISTENER_PORTS[_next_port % len(_LISTENER_PORTS)]
        _next_port += 1
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in {_LISTENER_PORTS}")


def scheduled(nice: int, rr: int) -> None:
    """In a child before it runs its program: the niceness and SCHED_RR priority it starts with."""
    if nice:
        os.nice(nice)
    if rr:
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(rr))


class Program:
    """A child process whose stdout and stderr go to files in the test's tmp_path; `nice` is its
    scheduling niceness from the start (every thread inherits it), as a systemd unit's `Nice=`, and
    `rr` a SCHED_RR priority (0: none), as `CPUSchedulingPolicy=rr` with `CPUSchedulingPriority=`."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], logs: Path, nice: int = 0, rr: int = 0):
        self.name = name
        self.stdout_path = logs / f"{name}.stdout"
        self.stderr_path = logs / f"{name}.stderr"
        exe = binary(args[0])
        deadline = time.monotonic() + BINARY_WAIT_S
        while True:
            try:
                with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
                    self.proc = subprocess.Popen([exe, *args[1:]], stdout=out, stderr=err,
                                                 stdin=subprocess.DEVNULL, env=env, cwd=logs,
                                                 preexec_fn=(lambda: scheduled(nice, rr)) if nice or rr else None)
                break
            except OSError:  # replaced under us by a rebuild (ENOENT, ETXTBSY): retry, bounded
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.25)
                exe = binary(args[0])

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stdout(self) -> str:
        return self.stdout_path.read_text(encoding="utf-8", errors="replace")

    def describe(self) -> str:
        state = "running" if self.proc.poll() is None else f"exited {self.proc.returncode}"
        return f"--- {self.name} ({state}) stderr:\n{self.stderr()[-4000:]}"

    def wait_for_log(self, needle: str, timeout: float = WAIT_S) -> None:
        def seen() -> bool:
            if needle in self.stderr():
                return True
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited before logging {needle!r}\n{self.describe()}")
            return False
        wait_until(seen, f"{self.name} to log {needle!r}", timeout, detail=self.describe)

    def terminate(self, timeout: float = WAIT_S) -> int:
        """SIGTERM, then the exit code (bounded wait)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} did not exit within {timeout} s of SIGTERM\n{self.describe()}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


class Bus:
    """A running vbt-bus on free ports plus helpers to start programs against it."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.programs: list[Program] = []
        self.pub_endpoint = ""
        self.sub_endpoint = ""
        self.env: dict[str, str] = {}

    def start(self, heartbeat_interval: float = 0.2, extra: list[str] | None = None) -> None:
        last = None
        for attempt in range(3):  # another process may grab a port between pick and bind
            self.pub_endpoint = f"tcp://127.0.0.1:{free_port()}"
            self.sub_endpoint = f"tcp://127.0.0.1:{free_port()}"
            self.env = dict(os.environ, VBT_PUB_ENDPOINT=self.pub_endpoint,
                            VBT_SUB_ENDPOINT=self.sub_endpoint, VBT_LOG_LEVEL="info")
            bus = self.spawn(f"vbt-bus-{attempt}",
                             ["vbt-bus", "--heartbeat-interval", str(heartbeat_interval), *(extra or [])])
            try:
                bus.wait_for_log("bus forwarding")
                self.process = bus
                return
            except AssertionError as error:
                last = error
                bus.kill()
        raise AssertionError(f"vbt-bus did not start: {last}")

    def spawn(self, name: str, args: list[str], nice: int = 0) -> Program:
        program = Program(name, args, self.env, self.tmp_path, nice)
        self.programs.append(program)
        return program

    def run(self, args: list[str], timeout: float = WAIT_S) -> subprocess.CompletedProcess:
        """Runs a short-lived program to completion (bounded)."""
        exe = binary(args[0])
        result = subprocess.run([exe, *args[1:]], env=self.env, cwd=self.tmp_path,
                                capture_output=True, text=True, timeout=timeout,
                                stdin=subprocess.DEVNULL)
        assert result.returncode == 0, f"{' '.join(args)} exited {result.returncode}:\n{result.stderr}"
        return result

    def describe(self) -> str:
        return "\n".join(p.describe() for p in self.programs)

    def stop_all(self) -> None:
        for program in reversed(self.programs):
            program.kill()


@pytest.fixture
def bus(tmp_path: Path):
    running = Bus(tmp_path)
    try:
        running.start()
        yield running
        # The bus itself must also stop cleanly on SIGTERM.
        assert running.process.terminate() == 0, running.process.describe()
    finally:
        running.stop_all()


LOST_TAIL_HINT = (
    "hint: if a `vbt pub` run exited 0 but some or all of its messages never arrived, the "
    "process ended before libzmq flushed its queue: a publisher must finish zmq_ctx_term "
    "(which honours the socket's linger) before the process exits.")


def read_stats(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def received_by_topic(stats: dict | None) -> dict[str, int]:
    counts: dict[str, int] = {}
    for source in (stats or {}).get("sources", {}).values():
        counts[source["topic"]] = counts.get(source["topic"], 0) + source["received"]
    return counts


def read_recording(path: Path) -> list[dict]:
    lines = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        assert line.strip(), f"{path.name}:{number} is empty"
        record = json.loads(line)
        assert set(record) == {"t", "topic", "msg"}, f"{path.name}:{number} keys {sorted(record)}"
        lines.append(record)
    return lines


# proto/README.md: the instance is `<program>-<8 hex digits>`. Up to 8 are
# accepted here because the hex part is a random 32-bit number and the check
# is about the shape `<instance>/<topic>`, not the padding.
INSTANCE_SRC = re.compile(r"^(?P<instance>[a-z][a-z0-9-]*-[0-9a-f]{1,8})/(?P<topic>[^/\s]+)$")


def check_src(msg: dict, topic: str) -> None:
    """`src` is `<program>-<hex>/<topic>` for the programs' own streams."""
    match = INSTANCE_SRC.match(msg["src"])
    assert match, f"src {msg['src']!r} is not <program>-<hex>/<topic>"
    assert match["topic"] == topic, f"src {msg['src']!r} names another topic than {topic!r}"


# --------------------------------------------------------------------------
# Example messages (type fields only; the envelope is added by the publisher)

T0 = 1_700_000_000.0

IMU_FIELDS = {
    "sensor": "imu", "device": "sim",
    "samples": [
        {"t": T0 + i * 0.01, "acc_g": [0.01, -0.02, 1.0 + i * 0.001],
         "gyro_dps": [0.5, -1.25, 0.0], "angle_deg": [1.5, -0.25, 179.0]}
        for i in range(4)
    ],
}
DISTANCE_FIELDS = {
    "sensor": "distance", "device": "/dev/ttyACM0",
    "samples": [
        {"t": T0, "distance_mm": 812.5, "state": "IDLE"},
        {"t": T0 + 0.02, "distance_mm": 790, "state": "ECCENTRIC", "acc_g": [0.0, 0.1, 0.98]},
        {"t": T0 + 0.04, "distance_mm": 805.25, "state": "CONCENTRIC"},
        {"t": T0 + 0.06, "distance_mm": 0},
    ],
}
POSTURE_FIELDS = {
    "sensor": "posture", "device": "C4:7F:51:0A:12:9E",
    "samples": [{"t": T0 + i * 0.02, "acc": [120, -40, 16300], "mag": [-210, 55, 410]} for i in range(3)],
}
STATUS_FIELDS = {
    "state": "streaming", "sensor": "imu", "device": "sim",
    "rate_hz": 100.0, "battery_pct": 87,
}
CMD_FIELDS = {
    "id": "c-0001", "command": "athlete.assign", "target": "*", "args": {"athlete": "ana"},
}
REP_FIELDS = {
    "set_id": "rack-01-1700000000", "rep_id": "rack-01-1700000000-r1", "index": 1,
    "mean_velocity_mps": 0.62, "peak_velocity_mps": 1.05, "mean_propulsive_velocity_mps": 0.68,
    "rom_mm": 512.0, "concentric_s": 0.81, "time_to_peak_s": 0.42, "velocity_loss_pct": 0.0,
    "t_end": T0 + 3.2, "detector": "rep-detector-0a1b2c3d",
    "exercise": "squat", "load_kg": 100, "zone": "strength", "mean_power_w": 608.2,
}
SET_END_FIELDS = {
    "set_id": "rack-01-1700000000", "event": "end", "reps": 5, "reason": "velocity-loss",
    "best_mean_velocity_mps": 0.71, "velocity_loss_pct": 21.5, "exercise": "squat", "load_kg": 100,
}
HEARTBEAT_FIELDS = {
    "role": "rep-detector", "uptime_s": 12.5, "interval_s": 1.0,
    "inputs": {"received": 1200, "gaps": 0, "missing": 0, "duplicates": 0, "malformed": 1},
}


def envelope(kind: str, station: str, fields: dict, seq: int = 1,
             src: str | None = None, **extra: Any) -> dict:
    msg = {"v": 1, "type": kind, "station": station,
           "src": src or f"py-test-0123abcd/{kind}.{station}", "seq": seq, "ts": time.time()}
    msg.update(extra)
    msg.update(copy.deepcopy(fields))
    return msg


# --------------------------------------------------------------------------
# 1. The Swift programs emit messages that match proto/


def test_programs_emit_valid_messages(bus: Bus, tmp_path: Path):
    rec_path, stats_path = tmp_path / "rec.jsonl", tmp_path / "st.json"
    recorder = bus.spawn("record", ["vbt", "record", "--out", str(rec_path), "--stats", str(stats_path),
                                    "--stats-interval", "0.1"])
    recorder.wait_for_log("bus connected")

    published = [
        ("sample.rack-01", IMU_FIELDS, []),
        ("sample.rack-02", DISTANCE_FIELDS, []),
        ("sample.rack-03", POSTURE_FIELDS, ["--athlete", "ana"]),
        ("status.rack-01", STATUS_FIELDS, []),
        ("cmd.rack-01", CMD_FIELDS, []),
    ]
    count = 3
    for topic, fields, extra in published:
        bus.run(["vbt", "pub", topic, json.dumps(fields), "--count", str(count), "--rate", "0",
                 "--wait-subscribers", "5", *extra])

    expected = {topic: count for topic, _, _ in published}
    wait_until(
        lambda: all(received_by_topic(read_stats(stats_path)).get(t, 0) >= n for t, n in expected.items()),
        f"the recorder to count {expected}",
        detail=lambda: f"stats: {read_stats(stats_path)}\n{LOST_TAIL_HINT}\n{bus.describe()}")

    assert recorder.terminate() == 0, recorder.describe()
    assert "recording closed" in recorder.stderr(), recorder.describe()

    records = read_recording(rec_path)
    assert records, "the recording is empty"
    assert records[0]["t"] == 0, "a recording's t counts from its first line"
    assert all(a["t"] <= b["t"] for a, b in zip(records, records[1:])), "recording t goes backwards"

    per_topic: dict[str, list[dict]] = {}
    for record in records:
        msg = record["msg"]
        validate_message(msg)
        assert record["topic"] == f"{msg['type']}.{msg['station']}", record
        check_src(msg, record["topic"])
        per_topic.setdefault(record["topic"], []).append(msg)

    heartbeats = per_topic.get("heartbeat.bus", [])
    assert heartbeats, "no heartbeat.bus recorded"
    for beat in heartbeats:
        assert beat["role"] == "vbt-bus" and "bus" in beat, beat
        assert beat["interval_s"] == pytest.approx(0.2)
    bus_seqs = [beat["seq"] for beat in heartbeats]
    assert bus_seqs == list(range(bus_seqs[0], bus_seqs[0] + len(bus_seqs))), bus_seqs

    for topic, fields, extra in published:
        msgs = per_topic.get(topic, [])
        assert [m["seq"] for m in msgs] == list(range(1, count + 1)), (topic, msgs)
        assert len({m["src"] for m in msgs}) == 1, f"one vbt pub run is one stream: {msgs}"
        assert msgs[0]["src"].startswith("vbt-pub-"), msgs[0]["src"]
        for m in msgs:
            for key, value in fields.items():
                assert m[key] == value, f"{topic}: {key} changed on the way: {m[key]!r} != {value!r}"
            if extra:
                assert m["athlete"] == "ana"
            else:
                assert "athlete" not in m

    stats = read_stats(stats_path)
    assert stats is not None, "the stats file is missing or unreadable after shutdown"
    assert stats["malformed"] == {}, stats["malformed"]
    assert stats["bus_heartbeats"] >= 1 and stats["bus_restarts"] == 0, stats
    assert stats["bus_instance"] and heartbeats[0]["src"].startswith(stats["bus_instance"] + "/"), stats
    for src, source in stats["sources"].items():
        assert source["gaps"] == 0 and source["missing"] == 0 and source["duplicates"] == 0, (src, source)
        assert source["received"] == len([m for m in per_topic[source["topic"]] if m["src"] == src]), (src, source)
    assert received_by_topic(stats) == {
        **expected, "heartbeat.bus": len(heartbeats)}, stats


# --------------------------------------------------------------------------
# 2. A third-party Python client on the bus


@pytest.mark.skipif(zmq is None, reason="pyzmq is not installed (pip install pyzmq)")
def test_python_client_publishes_and_subscribes(bus: Bus, tmp_path: Path):
    rec_path, stats_path = tmp_path / "rec.jsonl", tmp_path / "st.json"
    recorder = bus.spawn("record", ["vbt", "record", "--out", str(rec_path), "--stats", str(stats_path),
                                    "--stats-interval", "0.1"])
    recorder.wait_for_log("bus connected")

    station = "rack-py"
    topic = f"sample.{station}"
    src = f"py-client-{secrets.token_hex(4)}/{topic}"
    n = 25

    ctx = zmq.Context()
    try:
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(bus.sub_endpoint)

        pub = ctx.socket(zmq.XPUB)
        pub.setsockopt(zmq.LINGER, 2000)
        pub.connect(bus.pub_endpoint)

        received: list[tuple[str, dict]] = []

        def receive_for(seconds: float) -> None:
            """Drains the SUB socket for up to `seconds`, checking each message's framing."""
            if sub.poll(int(seconds * 1000), zmq.POLLIN):
                while True:
                    try:
                        frames = sub.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        return
                    assert len(frames) == 2, f"expected 2 frames, got {len(frames)}: {frames!r}"
                    received.append((frames[0].decode("ascii"), json.loads(frames[1].decode("utf-8"))))

        # Our SUB's subscription is in place once the bus's heartbeat reaches it
        # (the bus sends one at once after each new subscription).
        wait_until(lambda: receive_for(0.1) or any(t == "heartbeat.bus" for t, _ in received),
                   "heartbeat.bus on the Python SUB socket", detail=bus.describe)

        # Wait until a subscription matching our topic has been forwarded to our
        # XPUB (frame \x01<prefix>); only then are published messages delivered.
        seen_prefixes: list[bytes] = []

        def subscribed() -> bool:
            if pub.poll(100, zmq.POLLIN):
                while True:
                    try:
                        frame = pub.recv(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    if frame[:1] == b"\x01":
                        seen_prefixes.append(frame[1:])
            return any(topic.encode().startswith(prefix) for prefix in seen_prefixes)

        wait_until(subscribed, f"a subscription matching {topic} to reach the Python publisher",
                   detail=lambda: f"prefixes seen: {seen_prefixes}\n{bus.describe()}")

        sent = []
        for seq in range(1, n + 1):
            msg = envelope("sample", station, IMU_FIELDS, seq=seq, src=src, athlete="ana")
            validate_message(msg)
            sent.append(msg)
            pub.send_multipart([topic.encode("ascii"), json.dumps(msg).encode("utf-8")])

        # A Swift publisher's message reaches the Python subscriber too.
        bus.run(["vbt", "pub", f"status.{station}", json.dumps(STATUS_FIELDS),
                 "--count", "1", "--wait-subscribers", "5"])

        def py_and_swift_seen() -> bool:
            receive_for(0.1)
            mine = [m for t, m in received if m.get("src") == src]
            swift = [m for t, m in received if t == f"status.{station}"]
            return len(mine) == n and len(swift) == 1

        wait_until(py_and_swift_seen, f"{n} Python samples and 1 vbt pub status on the Python SUB",
                   detail=lambda: f"received topics: {[t for t, _ in received]}\n{LOST_TAIL_HINT}\n{bus.describe()}")

        for got_topic, msg in received:
            validate_message(msg)
            assert got_topic == f"{msg['type']}.{msg['station']}", (got_topic, msg)
        assert [m for _, m in received if m.get("src") == src] == sent
        status = next(m for t, m in received if t == f"status.{station}")
        check_src(status, f"status.{station}")
        assert status["seq"] == 1 and status["src"].startswith("vbt-pub-")

        # The Swift recorder got every Python message, whole and well-formed.
        wait_until(lambda: (read_stats(stats_path) or {}).get("sources", {}).get(src, {}).get("received") == n,
                   f"the recorder to count {n} messages from {src}",
                   detail=lambda: f"stats: {read_stats(stats_path)}\n{bus.describe()}")
        sub.close()
        pub.close()
    finally:
        ctx.destroy(linger=0)

    assert recorder.terminate() == 0, recorder.describe()
    stats = read_stats(stats_path)
    mine = stats["sources"][src]
    assert mine == {"topic": topic, "received": n, "gaps": 0, "missing": 0, "duplicates": 0,
                    "first_seq": 1, "last_seq": n}, mine
    assert stats["malformed"] == {}, stats["malformed"]
    recorded = [r["msg"] for r in read_recording(rec_path) if r["msg"]["src"] == src]
    assert recorded == sent, "the recording must hold the JSON frames exactly as sent"


# --------------------------------------------------------------------------
# 3. The schemas themselves


def test_schemas_reject_bad_messages():
    expected_files = {"envelope", *TYPE_SCHEMAS}
    assert expected_files <= set(SCHEMAS), f"proto/ lacks {sorted(expected_files - set(SCHEMAS))}"

    for name, schema in SCHEMAS.items():
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema", name
        assert schema["$id"] == f"https://vbt.example/proto/{name}.schema.json", name
        if name != "envelope":
            assert {"$ref": "envelope.schema.json"} in schema.get("allOf", []), f"{name} does not extend the envelope"
            assert schema["properties"]["type"]["const"] == name, name
        undocumented = [path for path in property_paths(schema) if "description" not in path[1]]
        assert not undocumented, f"{name}: fields without description: {[p for p, _ in undocumented]}"

    valid = {
        "sample/imu": envelope("sample", "rack-01", IMU_FIELDS),
        "sample/distance": envelope("sample", "rack-01", DISTANCE_FIELDS, athlete="ana"),
        "sample/posture": envelope("sample", "rack-01", POSTURE_FIELDS),
        "rep": envelope("rep", "rack-01", REP_FIELDS),
        "set/start": envelope("set", "rack-01", {"set_id": "s1", "event": "start"}),
        "set/end": envelope("set", "rack-01", SET_END_FIELDS),
        "status": envelope("status", "rack-01", STATUS_FIELDS),
        "status/error": envelope("status", "rack-01", {
            "state": "error", "sensor": "distance", "device": "/dev/ttyACM0",
            "reason": "serial port busy: close the other program using /dev/ttyACM0"}),
        "heartbeat/bus": envelope("heartbeat", "bus", {
            "role": "vbt-bus", "uptime_s": 0.0, "interval_s": 0.2,
            "bus": {"msgs_in": 0, "bytes_in": 0, "msgs_out": 0, "bytes_out": 0,
                    "subscribe_events": 1, "unsubscribe_events": 0}}),
        "heartbeat/inputs": envelope("heartbeat", "rack-01", HEARTBEAT_FIELDS),
        "cmd": envelope("cmd", "rack-01", CMD_FIELDS),
        "cmd/no-args": envelope("cmd", "rack-01", {"id": "c2", "command": "set.end", "target": "rep-detector"}),
        "future-optional-field": envelope("rep", "rack-01", REP_FIELDS, some_new_field_s=1.5),
        "rep/late": envelope("rep", "rack-01", REP_FIELDS, late=True, late_s=312.116),
        "rep/not-late": envelope("rep", "rack-01", REP_FIELDS, late=False),
    }
    for label, msg in valid.items():
        assert not schema_errors(msg), f"valid example {label} rejected: {schema_errors(msg)}"
        assert not schema_errors(msg, "envelope"), label

    def without(msg: dict, key: str) -> dict:
        msg = copy.deepcopy(msg)
        del msg[key]
        return msg

    def changed(msg: dict, **fields: Any) -> dict:
        msg = copy.deepcopy(msg)
        msg.update(fields)
        return msg

    imu = valid["sample/imu"]
    bad_reading = copy.deepcopy(imu)
    bad_reading["samples"][1]["acc_g"] = [0.0, 1.0]
    distance_as_imu = changed(valid["sample/distance"], sensor="imu")
    posture_missing_mag = copy.deepcopy(valid["sample/posture"])
    del posture_missing_mag["samples"][0]["mag"]
    negative_distance = copy.deepcopy(valid["sample/distance"])
    negative_distance["samples"][0]["distance_mm"] = -1
    set_end_no_reason = without(valid["set/end"], "reason")
    heartbeat_bad_bus = copy.deepcopy(valid["heartbeat/bus"])
    del heartbeat_bad_bus["bus"]["bytes_out"]

    invalid = {
        "missing seq": without(imu, "seq"),
        "v=2": changed(imu, v=2),
        "seq 0": changed(imu, seq=0),
        "ts 0": changed(imu, ts=0),
        "seq as string": changed(imu, seq="1"),
        "empty src": changed(imu, src=""),
        "athlete not a string": changed(imu, athlete=7),
        "imu reading with 2-element acc_g": bad_reading,
        "distance readings under sensor=imu": distance_as_imu,
        "posture reading without mag": posture_missing_mag,
        "negative distance": negative_distance,
        "unknown sensor": changed(imu, sensor="lidar"),
        "no readings": changed(imu, samples=[]),
        "too many readings": changed(imu, samples=imu["samples"][:1] * 1001),
        "set end without reason": set_end_no_reason,
        "set with unknown event": changed(valid["set/start"], event="pause"),
        "status with unknown state": changed(valid["status"], state="sleeping"),
        "status battery over 100": changed(valid["status"], battery_pct=101),
        "rep index 0": changed(valid["rep"], index=0),
        "rep without rep_id": without(valid["rep"], "rep_id"),
        "late rep without late_s": without(valid["rep/late"], "late_s"),
        "late_s without late": without(valid["rep/late"], "late"),
        "late_s on a rep not late": changed(valid["rep/late"], late=False),
        "late as a string": changed(valid["rep/late"], late="yes"),
        "negative late_s": changed(valid["rep/late"], late_s=-0.5),
        "heartbeat bus counters incomplete": heartbeat_bad_bus,
        "heartbeat interval 0": changed(valid["heartbeat/inputs"], interval_s=0),
        "cmd without target": without(valid["cmd"], "target"),
        "cmd args not an object": changed(valid["cmd"], args=["athlete", "ana"]),
    }
    for label, msg in invalid.items():
        assert schema_errors(msg), f"invalid example accepted: {label}"

    # A type's fields do not pass under another type's schema, and `type` is pinned.
    assert schema_errors(valid["rep"], "sample")
    assert schema_errors(changed(valid["status"], type="rep"), "status")
    # Envelope rules alone: type without dots.
    assert schema_errors(changed(imu, type="sample.x"), "envelope")
    assert schema_errors(changed(imu, type=""), "envelope")


def property_paths(schema: Any, path: str = "") -> list[tuple[str, dict]]:
    """Every (path, subschema) that is a named property anywhere in `schema`."""
    found: list[tuple[str, dict]] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    if isinstance(sub, dict) and not is_if_condition(path):
                        found.append((f"{path}/{name}", sub))
                    found.extend(property_paths(sub, f"{path}/{name}"))
            else:
                found.extend(property_paths(value, f"{path}/{key}"))
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            found.extend(property_paths(item, f"{path}/{index}"))
    return found


def is_if_condition(path: str) -> bool:
    # `if`/`then` branches restate properties only to select or require them;
    # the fields are documented where they are defined.
    return any(part in ("if", "then", "else") for part in path.split("/"))
