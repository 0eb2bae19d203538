"""The secured bus and query endpoint (proto/security.md), on loopback.

A gym with keys: vbt-bus, session-recorder and rep-detector with their
certificates, three simulated stations each with its own bridge key, and a
watcher (a pyzmq subscriber with a viewer key) that sees everything the bus
forwards. An attacker then tries, as it would on the gym's Wi-Fi: no key, an
unknown key, a revoked key (also one revoked while connected), station A's key
publishing as station B, sending `cmd`, forging `rep` and `heartbeat.bus`;
reading the bus and the query endpoint without a key; a viewer and a bridge
writing to the query endpoint. Every attacker message carries the athlete
name "intruder", and the watcher must never see it. The bus's heartbeat
counters (`refused`, `refused_connections`) show each attempt arrived and was
refused, so "0 injected" cannot pass by the attacker's messages simply not
having been sent yet.
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
import zmq
import zmq.auth

from attacker import FORGED, envelope
from test_wire import Program, binary, free_port, wait_until

STATIONS = ["rack-01", "rack-02", "rack-03"]
MARK = b'"athlete":"intruder"'


def vbt(args: list[str], env: dict[str, str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    result = subprocess.run([binary("vbt"), *args], env=env, capture_output=True, text=True, timeout=timeout,
                            stdin=subprocess.DEVNULL)
    if check:
        assert result.returncode == 0, f"vbt {' '.join(args)} exited {result.returncode}:\n{result.stderr}"
    return result


def secure(sock: zmq.Socket, cert: Path, server_key: bytes) -> None:
    public, secret = zmq.auth.load_certificate(str(cert))
    sock.curve_publickey, sock.curve_secretkey, sock.curve_serverkey = public, secret, server_key


class Watcher(threading.Thread):
    """Subscribes to everything with a viewer key and keeps what arrives."""

    def __init__(self, ctx: zmq.Context, endpoint: str, cert: Path, server_key: bytes):
        super().__init__(daemon=True)
        self.sock = ctx.socket(zmq.SUB)
        secure(self.sock, cert, server_key)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"")
        self.sock.connect(endpoint)
        self.lock = threading.Lock()
        self.messages: list[tuple[bytes, bytes]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            if self.sock.poll(100):
                frames = self.sock.recv_multipart()
                if len(frames) == 2:
                    with self.lock:
                        self.messages.append((frames[0], frames[1]))
        self.sock.close(0)

    def topics(self) -> set[bytes]:
        with self.lock:
            return {topic for topic, _ in self.messages}

    def intruders(self) -> list[bytes]:
        with self.lock:
            return [body for _, body in self.messages if MARK in body]

    def count_marked(self, needle: bytes) -> int:
        with self.lock:
            return sum(1 for _, body in self.messages if needle in body)

    def bus_counters(self) -> dict:
        with self.lock:
            beats = [body for topic, body in self.messages if topic == b"heartbeat.bus"]
        return json.loads(beats[-1])["bus"] if beats else {}


class SecureGym:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.keys = tmp / "keys"
        self.programs: list[Program] = []
        base = {k: v for k, v in os.environ.items() if not k.startswith("VBT_")}
        base.update(VBT_LOG_LEVEL="info")
        self.pub = f"tcp://127.0.0.1:{free_port()}"
        self.sub = f"tcp://127.0.0.1:{free_port()}"
        self.query = f"tcp://127.0.0.1:{free_port()}"
        self.base = dict(base, VBT_PUB_ENDPOINT=self.pub, VBT_SUB_ENDPOINT=self.sub, VBT_QUERY_ENDPOINT=self.query)
        vbt(["keys", "init", str(self.keys)], self.base)
        for station in STATIONS:
            vbt(["keys", "add", str(self.keys), station, "--role", "bridge", "--station", station], self.base)
        for service in ["rep-detector", "session-recorder"]:
            vbt(["keys", "add", str(self.keys), service, "--role", "service"], self.base)
        vbt(["keys", "add", str(self.keys), "coach", "--role", "coach"], self.base)
        vbt(["keys", "add", str(self.keys), "viewer", "--role", "viewer"], self.base)
        vbt(["keys", "add", str(self.keys), "stolen", "--role", "bridge", "--station", "rack-03"], self.base)
        self.server_key = zmq.auth.load_certificate(str(self.keys / "server.key"))[0]

    def client_env(self, name: str) -> dict[str, str]:
        return dict(self.base, VBT_CERT=str(self.keys / "clients" / f"{name}.key_secret"),
                    VBT_BUS_CERT=str(self.keys / "server.key"))

    def server_env(self, name: str) -> dict[str, str]:
        return dict(self.client_env(name), VBT_SERVER_CERT=str(self.keys / "server.key_secret"),
                    VBT_AUTHORIZED=str(self.keys / "authorized"))

    def spawn(self, name: str, args: list[str], env: dict[str, str]) -> Program:
        program = Program(name, args, env, self.tmp)
        self.programs.append(program)
        return program

    def cert(self, name: str) -> Path:
        return self.keys / "clients" / f"{name}.key_secret"

    def describe(self) -> str:
        return "\n".join(p.describe() for p in self.programs)


@pytest.fixture(scope="module")
def gym(tmp_path_factory):
    g = SecureGym(tmp_path_factory.mktemp("secure"))
    ctx = zmq.Context()
    ctx.setsockopt(zmq.LINGER, 0)  # a failed test's unsent messages never hold the teardown
    try:
        bus_env = dict(g.base, VBT_SERVER_CERT=str(g.keys / "server.key_secret"), VBT_AUTHORIZED=str(g.keys / "authorized"))
        # (A budget never reached here: with one, the bus keeps what subscribers say of their priority.)
        g.spawn("vbt-bus", ["vbt-bus", "--heartbeat-interval", "0.2", "--memory-budget-mb", "256"], bus_env).wait_for_log("bus forwarding")
        g.watcher = Watcher(ctx, g.sub, g.cert("viewer"), g.server_key)
        g.watcher.start()
        wait_until(lambda: b"heartbeat.bus" in g.watcher.topics(), "the viewer to receive heartbeat.bus", detail=g.describe)
        g.spawn("session-recorder", ["session-recorder", "--db", str(g.tmp / "vbt.sqlite")], g.server_env("session-recorder"))
        g.spawn("rep-detector", ["rep-detector"], g.client_env("rep-detector"))
        for seed, station in enumerate(STATIONS, 1):
            g.spawn(f"bridge-{station}", ["sensor-bridge", "--simulate", "--loop", "--station", station, "--seed", str(seed),
                                          "--rest", "5", "--athlete", f"athlete-{seed}"], g.client_env(station))
        g.ctx = ctx
        yield g
    finally:
        if hasattr(g, "watcher"):
            g.watcher.stop.set()
            g.watcher.join(5)
        for program in reversed(g.programs):
            program.kill()
        ctx.destroy(linger=0)


def test_everything_flows_with_keys(gym):
    want = {f"rep.{s}".encode() for s in STATIONS} | {f"sample.{s}".encode() for s in STATIONS}
    wait_until(lambda: want <= gym.watcher.topics(), "reps and readings of every station through the secured bus",
               timeout=90, detail=lambda: f"{sorted(gym.watcher.topics())}\n{gym.describe()}")
    # The recorder (a CURVE server of its own) stored them, read back with the viewer's key.
    def stored() -> bool:
        result = vbt(["history", "--json"], gym.client_env("viewer"), check=False)
        return result.returncode == 0 and all(f'"{station}"' in result.stdout for station in STATIONS)
    wait_until(stored, "vbt history (viewer key) to show every station's sets", timeout=90, detail=gym.describe)


def publish_for(sock: zmq.Socket, messages: list[list[bytes]], seconds: float = 1.0) -> None:
    """Sends `messages` again and again for `seconds` (a PUB drops what it sends before connecting)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for frames in messages:
            sock.send_multipart(frames)
        time.sleep(0.05)


def test_attacker_injects_nothing(gym):
    ctx = gym.ctx
    before = gym.watcher.bus_counters()
    assert "refused" in before and "refused_connections" in before, before

    # No key at all, and a key nobody authorized.
    plain = ctx.socket(zmq.PUB)
    plain.connect(gym.pub)
    unknown = ctx.socket(zmq.PUB)
    public, secret = zmq.curve_keypair()
    unknown.curve_publickey, unknown.curve_secretkey, unknown.curve_serverkey = public, secret, gym.server_key
    unknown.connect(gym.pub)
    forged = [envelope("sample", "rack-01", 10**6), envelope("cmd", "rack-01", 1, {"id": "x", "command": "set.end", "args": {}})]
    publish_for(plain, forged)
    publish_for(unknown, forged)
    wait_until(lambda: gym.watcher.bus_counters().get("refused_connections", 0) >= before["refused_connections"] + 2,
               "heartbeat.bus to count both refused connections", detail=lambda: f"{gym.watcher.bus_counters()}\n{gym.describe()}")

    # Station rack-01's own key, publishing outside its role.
    station_a = ctx.socket(zmq.PUB)
    secure(station_a, gym.cert("rack-01"), gym.server_key)
    station_a.connect(gym.pub)
    outside = FORGED  # as station rack-02, cmd, rep, heartbeat.bus, alert
    sent = 0
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        for frames in outside:
            station_a.send_multipart(frames)
            sent += 1
        time.sleep(0.05)
    # Each of them reached the bus (the sender is connected: its allowed heartbeat-less socket is up),
    # and each was refused: counted, not forwarded.
    wait_until(lambda: gym.watcher.bus_counters().get("refused_by", {}).get("rack-01", 0) >= len(outside),
               "heartbeat.bus to count the refused messages, naming their sender",
               detail=lambda: f"{gym.watcher.bus_counters()}\n{gym.describe()}")

    # A key that works until it is revoked, while connected.
    stolen = ctx.socket(zmq.PUB)
    secure(stolen, gym.cert("stolen"), gym.server_key)
    stolen.connect(gym.pub)
    allowed = envelope("status", "rack-03", 1, {"sensors": [], "note": "before-revoke"})
    allowed[1] = allowed[1].replace(b'"athlete":"intruder"', b'"athlete":"control"')
    wait_until(lambda: (stolen.send_multipart(allowed), gym.watcher.count_marked(b"before-revoke") > 0)[1],
               "a message of an authorized key to arrive (the control)", interval=0.1, detail=gym.describe)
    vbt(["keys", "revoke", str(gym.keys), "stolen"], gym.base)
    # Sent while the bus reads authorized/ again (within 0.5 s) these may pass; so they are not
    # marked "intruder", and what counts is that none passes once the refusals have begun.
    revoked = envelope("status", "rack-03", 2, {"sensors": [], "note": "after-revoke"})
    revoked[1] = revoked[1].replace(b'"athlete":"intruder"', b'"athlete":"control"')
    target = gym.watcher.bus_counters().get("refused", 0) + 5
    wait_until(lambda: (stolen.send_multipart(revoked), gym.watcher.bus_counters().get("refused", 0) >= target)[1],
               "the bus to refuse the revoked key's messages on its open connection", interval=0.1, detail=gym.describe)
    revoked_seen_before = gym.watcher.count_marked(b"after-revoke")
    publish_for(stolen, [revoked], 0.5)
    wait_until(lambda: gym.watcher.bus_counters().get("refused", 0) >= target + 5, "more refusals of the revoked key")
    # Messages sent while the revocation was being read may pass; none after it.
    assert gym.watcher.count_marked(b"after-revoke") == revoked_seen_before

    assert gym.watcher.intruders() == [], gym.watcher.intruders()[:3]
    for sock in (plain, unknown, station_a, stolen):
        sock.close(0)


def test_no_key_reads_nothing(gym):
    ctx = gym.ctx
    spy = ctx.socket(zmq.SUB)
    spy.setsockopt(zmq.SUBSCRIBE, b"")
    spy.connect(gym.sub)
    before = gym.watcher.bus_counters()["refused_connections"]
    # libzmq retries the handshake; wait until the bus has refused it, then some more heartbeats.
    wait_until(lambda: gym.watcher.bus_counters()["refused_connections"] > before, "the bus to refuse the key-less subscriber")
    beats = gym.watcher.count_marked(b'"role":"vbt-bus"')
    wait_until(lambda: gym.watcher.count_marked(b'"role":"vbt-bus"') >= beats + 3, "three more heartbeats to the viewer")
    assert spy.poll(0) == 0, "a subscriber without a key received a message"
    spy.close(0)

    # The query endpoint: no key gets no answer at all.
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(gym.query)
    dealer.send_multipart([b"", b'{"id":"x","query":"athlete.list"}'])
    assert dealer.poll(3000) == 0, "the query endpoint answered a client without a key"
    dealer.close(0)


def test_only_a_service_may_say_it_is_on_the_real_time_path(gym):
    """The rep-detector (a service's key) says `realtime` and the bus takes it; a viewer's key
    saying it is logged, named, and taken as saying nothing (proto/README.md, "The bus at its
    memory budget")."""
    bus = gym.programs[0]
    bus.wait_for_log("priority=realtime")
    spy = gym.ctx.socket(zmq.SUB)
    secure(spy, gym.cert("viewer"), gym.server_key)
    for prefix in (b"heartbeat.bus", b"\x7fvbt.priority=realtime"):
        spy.setsockopt(zmq.SUBSCRIBE, prefix)
    spy.connect(gym.sub)
    try:
        bus.wait_for_log("only a service's key may say")
        refused = [line for line in bus.stderr().splitlines() if "only a service's key may say" in line]
        assert len(refused) == 1 and "peer=viewer" in refused[0], refused
        said = [line for line in bus.stderr().splitlines() if "said its priority" in line]
        assert any("priority=normal" in line for line in said), said
        assert spy.poll(10_000), "the viewer still receives what it subscribed to"
    finally:
        spy.close(0)


def test_query_roles(gym):
    viewer = gym.client_env("viewer")
    assert vbt(["athlete", "list", "--json"], viewer).returncode == 0
    refused = vbt(["athlete", "add", "mallory", "--name", "Mallory"], viewer, check=False)
    assert refused.returncode != 0 and "may only read" in refused.stderr, refused.stderr
    bridge = vbt(["athlete", "list"], gym.client_env("rack-01"), check=False)
    assert bridge.returncode != 0 and "may not use the query endpoint" in bridge.stderr, bridge.stderr
    assert vbt(["athlete", "add", "dana", "--name", "Dana"], gym.client_env("coach")).returncode == 0
    listed = vbt(["athlete", "list", "--json"], viewer).stdout
    assert "dana" in listed and "mallory" not in listed


def test_plaintext_only_on_loopback(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VBT_")}
    # No keys and no --insecure: refused, saying what to do.
    result = subprocess.run([binary("rep-detector")], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode != 0 and "no keys" in result.stderr and "vbt keys" in result.stderr, result.stderr
    # --insecure off loopback: refused.
    port = free_port()
    result = subprocess.run([binary("vbt-bus"), "--insecure", "--pub-endpoint", f"tcp://0.0.0.0:{port}",
                             "--sub-endpoint", f"tcp://127.0.0.1:{free_port()}"],
                            env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode != 0 and "not on this computer" in result.stderr, result.stderr
