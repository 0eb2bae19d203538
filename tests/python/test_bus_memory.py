"""vbt-bus holds its resident memory to `--memory-budget-mb` however many of its
subscribers fall behind: memory bounded by design at any number of stations.

A real vbt-bus, two raw pyzmq subscribers on loopback (one reading, one that stops
reading after its first message) and a raw publisher sending 1 KiB messages: without the
budget the stalled subscriber's queue would take the bus up to its high-water mark (65,536
messages, about 70 MB); with a 48 MiB budget the bus disconnects the stalled subscriber at
the budget, and its peak resident memory (the kernel's VmHWM) stays within a check's
overshoot of it. The subscriber that keeps up loses nothing and is never disconnected; the
bus says what it did (`shed_subscribers` in heartbeat.bus, a warning naming the peer); the
stalled subscriber, connected again by libzmq, receives what is published next."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import zmq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_wire import Bus, wait_until  # noqa: E402

BUDGET_MB = 48
# One check (50 ms) of the publisher below, a forwarding pass (4,096 messages) and the
# allocator's rounding: the most the bus may pass the budget by.
OVERSHOOT_MB = 12
MESSAGES = 120_000
BODY = b"x" * 1_000


def vm_kb(pid: int, field: str) -> int:
    """A `VmRSS`/`VmHWM` line of /proc/PID/status, KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def test_the_bus_keeps_to_its_memory_budget_when_a_subscriber_stalls(tmp_path: Path):
    bus = Bus(tmp_path)
    bus.start(extra=["--memory-budget-mb", str(BUDGET_MB)])
    pid = bus.process.proc.pid
    ctx = zmq.Context()
    try:
        reader = ctx.socket(zmq.SUB)
        reader.setsockopt(zmq.RCVHWM, 0)
        reader.setsockopt(zmq.LINGER, 0)
        reader.setsockopt(zmq.SUBSCRIBE, b"")
        reader.connect(bus.sub_endpoint)
        stalled = ctx.socket(zmq.SUB)
        stalled.setsockopt(zmq.RCVHWM, 10)
        stalled.setsockopt(zmq.RCVBUF, 65_536)
        stalled.setsockopt(zmq.LINGER, 0)
        stalled.setsockopt(zmq.SUBSCRIBE, b"")
        stalled.connect(bus.sub_endpoint)
        publisher = ctx.socket(zmq.PUB)
        publisher.setsockopt(zmq.SNDHWM, 0)
        publisher.setsockopt(zmq.LINGER, 0)
        publisher.connect(bus.pub_endpoint)

        # Both subscriptions are in place once each subscriber has a message (the bus sends a
        # heartbeat after each new subscription); the publisher's once the reader gets a probe.
        assert stalled.poll(10_000), f"no message on the stalled subscriber\n{bus.describe()}"
        stalled.recv_multipart()
        heartbeats: list[dict] = []
        received = 0

        def drain(until: int, timeout: float = 30) -> None:
            nonlocal received

            def more() -> bool:
                nonlocal received
                while reader.poll(10):
                    topic, body = reader.recv_multipart()
                    if topic == b"load":
                        received += 1
                    elif topic == b"heartbeat.bus":
                        heartbeats.append(json.loads(body))
                return received >= until

            wait_until(more, f"{until} messages at the reader", timeout=timeout,
                       detail=lambda: f"received {received}\n{bus.describe()}")

        wait_until(lambda: publisher.send_multipart([b"probe", b"{}"]) or reader.poll(100) and reader.recv_multipart()[0] == b"probe",
                   "the publisher's messages through the bus", detail=bus.describe)
        before_kb = vm_kb(pid, "VmRSS")
        assert before_kb < BUDGET_MB * 1024 * 3 // 4 - 4096, f"the bus starts at {before_kb} KiB, too near the budget for this test"

        # The reader keeps up (at most 2,000 behind, far under a cut queue's 8,192);
        # the stalled subscriber reads nothing more.
        for start in range(0, MESSAGES, 500):
            for _ in range(500):
                publisher.send_multipart([b"load", BODY])
            drain(start + 500 - 2_000)
        drain(MESSAGES)

        peak_mb = vm_kb(pid, "VmHWM") / 1024
        assert peak_mb <= BUDGET_MB + OVERSHOOT_MB, f"the bus's peak {peak_mb:.1f} MB, its budget {BUDGET_MB} MiB\n{bus.describe()}"
        # 120 MB went through; the stalled subscriber's queue would have held 65,536 of them.
        assert received == MESSAGES
        shed = [h["bus"].get("shed_subscribers", 0) for h in heartbeats if "bus" in h]
        assert shed and shed[0] == 0, f"heartbeat.bus counts from 0: {shed[:3]}"
        wait_until(lambda: drain(received) or (heartbeats[-1].get("bus", {}).get("shed_subscribers", 0) >= 1),
                   "heartbeat.bus counting the subscriber disconnected", detail=lambda: f"{heartbeats[-1:]}\n{bus.describe()}")
        log = bus.process.stderr()
        assert "disconnected the subscriber furthest behind" in log and "peer=127.0.0.1:" in log, log
        # (The reader, never disconnected, received every message: one disconnection loses some.)

        # The stalled subscriber reads again: what it held before, then (connected again) what is published now.
        def fresh() -> bool:
            publisher.send_multipart([b"after", b"{}"])
            while stalled.poll(50):
                if stalled.recv_multipart()[0] == b"after":
                    return True
            return False

        wait_until(fresh, "the disconnected subscriber connected again and receiving", timeout=30, detail=bus.describe)
    finally:
        ctx.destroy(linger=0)
        bus.stop_all()


def test_at_its_budget_the_bus_disconnects_a_subscriber_on_the_real_time_path_last(tmp_path: Path):
    """A subscriber that says it is on the real-time path (the rep-detector's subscription
    `\x7fvbt.priority=realtime`, proto/README.md) stops reading; another keeps up for 5,000
    messages, then stops too. By time alone the first is the one behind longest; at the budget
    the bus disconnects the other one first. (One on the real-time path behind for 0.5 s while
    the others are behind for less goes first from fifteen sixteenths of the budget, which is the
    ceiling: `MemoryBudgetPriorityTests`.)"""
    bus = Bus(tmp_path)
    bus.start(extra=["--memory-budget-mb", str(BUDGET_MB)])
    ctx = zmq.Context()
    try:
        def subscriber(*said: bytes) -> zmq.Socket:
            socket = ctx.socket(zmq.SUB)
            socket.setsockopt(zmq.RCVHWM, 10)
            socket.setsockopt(zmq.RCVBUF, 65_536)
            socket.setsockopt(zmq.LINGER, 0)
            for prefix in (b"", *said):
                socket.setsockopt(zmq.SUBSCRIBE, prefix)
            socket.connect(bus.sub_endpoint)
            assert socket.poll(10_000), f"no heartbeat on a subscriber\n{bus.describe()}"
            socket.recv_multipart()
            return socket

        realtime = subscriber(b"\x7fvbt.priority=realtime")
        bus.process.wait_for_log("priority=realtime")
        said = [line for line in bus.process.stderr().splitlines() if "said its priority" in line]
        assert len(said) == 1, said
        realtime_peer = said[0].split("peer=")[1].split()[0]
        normal = subscriber()
        publisher = ctx.socket(zmq.PUB)
        publisher.setsockopt(zmq.SNDHWM, 0)
        publisher.setsockopt(zmq.LINGER, 0)
        publisher.connect(bus.pub_endpoint)
        wait_until(lambda: publisher.send_multipart([b"probe", b"{}"]) or normal.poll(100) and normal.recv_multipart()[0] == b"probe",
                   "the publisher's messages through the bus", detail=bus.describe)

        # 5 MB the real-time one does not read (its queue is behind from here) and the other one does.
        received = 0

        def read() -> bool:
            nonlocal received
            while normal.poll(10):
                received += normal.recv_multipart()[0] == b"load"
            return received >= 5_000

        for _ in range(10):
            for _ in range(500):
                publisher.send_multipart([b"load", BODY])
            read()
        wait_until(read, "5,000 messages at the subscriber that keeps up", detail=bus.describe)
        assert "disconnected the subscriber" not in bus.process.stderr(), bus.describe()

        # Now neither reads: the real-time one has been behind longer. 3 MB more, far under the budget,
        # fill the other one's socket buffers too; then both stay behind for over the bus's `behindS`
        # (0.5 s: a time the bus measures, not an event it tells of; waiting longer changes nothing).
        for _ in range(3_000):
            publisher.send_multipart([b"load", BODY])
        time.sleep(1.0)
        assert "disconnected the subscriber" not in bus.process.stderr(), bus.describe()

        def shed() -> bool:
            for _ in range(500):
                publisher.send_multipart([b"load", BODY])
            return "disconnected the subscriber furthest behind" in bus.process.stderr()

        wait_until(shed, "the bus disconnecting a subscriber at its budget", timeout=60, detail=bus.describe)
        first = next(line for line in bus.process.stderr().splitlines() if "disconnected the subscriber furthest behind" in line)
        assert "priority=normal" in first and f"peer={realtime_peer}" not in first, f"{first}\nthe real-time one is {realtime_peer}"
        assert realtime is not None  # (it may go next: the budget is the ceiling)
    finally:
        ctx.destroy(linger=0)
        bus.stop_all()
