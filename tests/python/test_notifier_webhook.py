"""The notifier's webhook sink against real HTTP servers on 127.0.0.1 (http.server in
threads): one that answers, one that fails before it answers, one that is slow (the
bus must not stall; a full queue drops and counts), and one that is down."""

from __future__ import annotations

import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import zmq

from test_notifier import of, pub, set_end, start, validate_all, STATION
from test_wire import Bus, bus, free_port, wait_until  # noqa: F401 (fixture)


class Hook:
    """A webhook: records each POST and answers per `behaviour` (`ok`, `fail-twice`, `slow`)."""

    def __init__(self, behaviour: str, slow_s: float = 3.0):
        self.bodies: list[dict] = []
        self.attempts = 0
        self.lock = threading.Lock()
        self.release = threading.Event()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with hook.lock:
                    hook.attempts += 1
                    attempt = hook.attempts
                if behaviour == "slow":
                    hook.release.wait(slow_s)
                    code = 200
                elif behaviour == "fail-twice" and attempt <= 2:
                    code = 500
                else:
                    code = 200
                if code == 200:
                    with hook.lock:
                        hook.bodies.append(json.loads(body))
                try:
                    self.send_response(code)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the notifier gave up on this attempt already

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


class Publisher:
    """Publishes messages with a proper envelope, once the notifier's subscription has arrived."""

    def __init__(self, bus: Bus, prefix: bytes):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.XPUB)
        self.sock.setsockopt(zmq.LINGER, 1000)
        self.sock.connect(bus.pub_endpoint)
        self.instance = f"py-test-{secrets.token_hex(4)}"
        self.seq: dict[str, int] = {}
        seen: list[bytes] = []

        def subscribed() -> bool:
            if self.sock.poll(100, zmq.POLLIN):
                seen.append(self.sock.recv())
            return any(prefix.startswith(t[1:]) for t in seen if t[:1] == b"\x01")
        wait_until(subscribed, f"a subscription to {prefix!r}", detail=bus.describe)

    def send(self, kind: str, station: str, fields: dict) -> None:
        topic = f"{kind}.{station}"
        self.seq[topic] = self.seq.get(topic, 0) + 1
        msg = {"v": 1, "type": kind, "station": station, "src": f"{self.instance}/{topic}", "seq": self.seq[topic],
               "ts": time.time(), **fields}
        self.sock.send_multipart([topic.encode(), json.dumps(msg).encode()])

    def close(self) -> None:
        self.sock.close()
        self.ctx.term()


def webhook_counters(rec: Path) -> dict:
    beats = of(rec, "heartbeat", "notifier")
    return beats[-1].get("webhook", {}) if beats else {}


DISCONNECTED = {"state": "disconnected", "sensor": "imu", "device": "sim", "reason": "link lost; retrying"}


def test_webhook_receives_each_alert_and_retries_a_failing_one(bus: Bus, tmp_path: Path):
    good, failing = Hook("ok"), Hook("fail-twice")
    try:
        notifier, rec = start(bus, tmp_path, extra=["--webhook", good.url])
        pub(bus, "status.rack-01", DISCONNECTED)
        wait_until(lambda: good.bodies, "the webhook to receive the alert", detail=bus.describe)
        on_bus = wait_until(lambda: of(rec, "alert", "rack-01"), "the alert on the bus")[0]
        body = good.bodies[0]
        assert body["type"] == "alert" and body["station"] == "rack-01"
        for key in ("alert_id", "kind", "severity", "state", "message", "since"):
            assert body[key] == on_bus[key], (key, body, on_bus)
        wait_until(lambda: webhook_counters(rec).get("delivered") == 1, "delivered=1 in heartbeat.notifier")
        assert notifier.terminate() == 0, notifier.describe()

        # A webhook answering 500 twice: the third attempt delivers.
        state2 = tmp_path / "second"
        state2.mkdir()
        retrying = bus.spawn("notifier-retry", ["notifier", "--state", str(state2 / "n.json"), "--webhook", failing.url,
                                                "--webhook-retries", "3"])
        retrying.wait_for_log("bus connected")
        pub(bus, "status.rack-02", DISCONNECTED)
        wait_until(lambda: failing.bodies, "the third attempt to be delivered", detail=bus.describe)
        assert failing.attempts == 3 and len(failing.bodies) == 1
        assert failing.bodies[0]["alert_id"] == "rack-02/sensor-disconnected/imu"
        wait_until(lambda: any(b.get("webhook", {}).get("retries") == 2 and b["webhook"]["delivered"] == 1
                               for b in of(rec, "heartbeat", "notifier")), "retries=2, delivered=1")
        assert retrying.terminate() == 0
    finally:
        good.close()
        failing.close()
    validate_all(rec)


def test_a_slow_webhook_never_stalls_the_bus(bus: Bus, tmp_path: Path):
    slow = Hook("slow", slow_s=5.0)
    try:
        notifier, rec = start(bus, tmp_path, extra=["--webhook", slow.url, "--webhook-timeout", "0.5", "--webhook-retries", "1",
                                                    "--webhook-queue", "2"])
        pub(bus, f"cmd.{STATION}", {"id": "a", "command": "athlete.assign", "target": "*",
                                    "args": {"athlete": "ana", "exercise": "squat", "rest_s": 8}})
        set_end(bus, "s1")
        wait_until(lambda: of(rec, "timer", STATION, state="running"), "the rest timer", detail=bus.describe)
        publisher = Publisher(bus, b"status.")
        try:
            sent_at = time.time()
            for n in range(10):
                publisher.send("status", f"st-{n:02d}", DISCONNECTED)
            # Every alert is on the bus at once, whatever the webhook does.
            wait_until(lambda: len([m for m in of(rec, "alert", None) if m["station"].startswith("st-")]) == 10,
                       "10 alerts on the bus", detail=bus.describe)
            alerts = [m for m in of(rec, "alert", None) if m["station"].startswith("st-")]
            # Each attempt takes 0.5 s and there are 10 alerts: had the bus waited, this would take 5 s or more.
            assert max(m["ts"] for m in alerts) - sent_at < 2.0, "the bus waited for the webhook"
        finally:
            publisher.close()
        wait_until(lambda: webhook_counters(rec).get("dropped", 0) >= 1, "drops counted in heartbeat.notifier", detail=bus.describe)
        notifier.wait_for_log("webhook queue full; alert dropped")
        # The timer kept ticking every second meanwhile.
        wait_until(lambda: of(rec, "timer", STATION, state="over"), "the rest to run out", detail=bus.describe)
        ticks = [m["ts"] for m in of(rec, "timer", STATION)]
        gaps = [b - a for a, b in zip(ticks, ticks[1:])]
        assert len(ticks) >= 8 and max(gaps) < 1.5, gaps
        counters = webhook_counters(rec)
        assert counters["queued"] + counters["dropped"] >= 10, counters
        started = time.monotonic()
        assert notifier.terminate() == 0, notifier.describe()
        assert time.monotonic() - started < 5, "a slow webhook must not hold the exit"
    finally:
        slow.close()
    validate_all(rec)


def test_a_webhook_that_is_down_is_retried_then_given_up(bus: Bus, tmp_path: Path):
    url = f"http://127.0.0.1:{free_port()}/alerts"  # nothing listens there
    notifier, rec = start(bus, tmp_path, extra=["--webhook", url, "--webhook-retries", "2", "--webhook-timeout", "1"])
    pub(bus, "status.rack-03", DISCONNECTED)
    wait_until(lambda: of(rec, "alert", "rack-03"), "the alert on the bus", detail=bus.describe)
    notifier.wait_for_log("webhook delivery failed")
    assert "attempts=3" in notifier.stderr(), notifier.stderr()
    wait_until(lambda: webhook_counters(rec).get("failed") == 1 and webhook_counters(rec).get("retries") == 2,
               "failed=1, retries=2", detail=bus.describe)
    # The notifier goes on: the clear is published too.
    pub(bus, "status.rack-03", {"state": "streaming", "sensor": "imu", "device": "sim", "rate_hz": 100})
    wait_until(lambda: of(rec, "alert", "rack-03", state="cleared"), "the clear", detail=bus.describe)
    assert notifier.terminate() == 0, notifier.describe()
    validate_all(rec)
