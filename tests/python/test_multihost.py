"""A gym across hosts: network namespaces joined by veth pairs and a
bridge, one namespace per host.

- `srv`: the gym server: vbt-bus, session-recorder, rep-detector,
  posture-evaluator, notifier, and a watcher (a pyzmq subscriber with a
  viewer key, tests/python/bus_watch.py) that writes down everything the bus
  forwards.
- `sa`, `sb`, `sc`: three station computers, each a simulated sensor-bridge
  with its own station's key.
- `atk`: an attacker (tests/python/attacker.py) with no key, an unknown key,
  a revoked key, and station rack-01's stolen key.

With keys everything flows end to end over 10.77.0.0/24 (no loopback, so every
connection is CURVE). The attacker injects 0 messages (the watcher never sees
its marker, and the bus's `refused` and `refused_connections` counters show
each attempt arrived and was refused), reads nothing from the bus and gets no
data from the query endpoint. Station sb's link is taken down and up again:
the bus drops the silent connection (ZMTP liveness), the bridge connects
again, rack-02's readings resume, and the counters show it (the bus's
`disconnections` and `connections`, the detector's input gaps).

Needs root (ip netns); it is skipped, saying why, where namespaces cannot be made.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_wire import binary, wait_until

HERE = Path(__file__).resolve().parent
SUBNET = "10.77.0"
HOSTS = {"srv": 1, "sa": 11, "sb": 12, "sc": 13, "atk": 66}
STATIONS = {"sa": "rack-01", "sb": "rack-02", "sc": "rack-03"}
SERVER = f"{SUBNET}.{HOSTS['srv']}"


def sh(*args: str) -> None:
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {result.stderr.strip()}")


class Network:
    """The namespaces of `hosts` (name: last address byte on `subnet`) joined by a bridge in a
    `lan` namespace, named after this process (and `prefix`) so parallel runs do not meet."""

    def __init__(self, hosts: dict[str, int] = HOSTS, subnet: str = SUBNET, prefix: str = "t") -> None:
        tag = os.getpid() % 100000
        self.hosts, self.subnet = hosts, subnet
        self.ns = {host: f"vb{prefix}{tag}{host}" for host in [*hosts, "lan"]}
        self.veth = {host: f"{prefix}{tag}{host}" for host in hosts}
        self.made: list[str] = []

    def build(self) -> None:
        lan = self.ns["lan"]
        sh("ip", "netns", "add", lan)
        self.made.append(lan)
        sh("ip", "-n", lan, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", lan, "link", "set", "br0", "up")
        for host, number in self.hosts.items():
            ns, veth = self.ns[host], self.veth[host]
            sh("ip", "netns", "add", ns)
            self.made.append(ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "link", "add", veth, "type", "veth", "peer", "name", veth + "p")
            sh("ip", "link", "set", veth, "netns", ns)
            sh("ip", "link", "set", veth + "p", "netns", lan)
            sh("ip", "-n", ns, "addr", "add", f"{self.subnet}.{number}/24", "dev", veth)
            sh("ip", "-n", ns, "link", "set", veth, "up")
            sh("ip", "-n", lan, "link", "set", veth + "p", "master", "br0")
            sh("ip", "-n", lan, "link", "set", veth + "p", "up")

    def link(self, host: str, state: str) -> None:
        sh("ip", "-n", self.ns[host], "link", "set", self.veth[host], state)

    def tear_down(self) -> None:
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


class Host:
    """A process in a namespace, its output in files."""

    def __init__(self, name: str, ns: str, argv: list[str], env: dict[str, str], logs: Path):
        self.name = name
        self.stderr_path = logs / f"{name}.stderr"
        with open(logs / f"{name}.stdout", "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, env=env, cwd=logs)

    def describe(self) -> str:
        state = "running" if self.proc.poll() is None else f"exited {self.proc.returncode}"
        text = self.stderr_path.read_text(encoding="utf-8", errors="replace")
        return f"--- {self.name} ({state}):\n{text[-2500:]}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def namespaces_available() -> str | None:
    if os.geteuid() != 0:
        return "needs root for ip netns"
    probe = f"vbtprobe{os.getpid() % 100000}"
    result = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if result.returncode != 0:
        return f"ip netns add failed: {result.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


class Watched:
    def __init__(self, path: Path):
        self.path = path

    def messages(self) -> list[dict]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # the line being written
        return out

    def topics(self) -> set[str]:
        return {m["topic"] for m in self.messages()}

    def last(self, topic: str) -> dict:
        found = [m for m in self.messages() if m["topic"] == topic]
        return json.loads(found[-1]["body"]) if found else {}

    def count(self, topic: str) -> int:
        return sum(1 for m in self.messages() if m["topic"] == topic)


def test_a_gym_across_hosts(tmp_path):
    reason = namespaces_available()
    if reason:
        pytest.skip(reason)
    keys = tmp_path / "keys"
    base = {k: v for k, v in os.environ.items() if not k.startswith("VBT_")}
    base.update(VBT_LOG_LEVEL="info", VBT_PUB_ENDPOINT=f"tcp://{SERVER}:7701", VBT_SUB_ENDPOINT=f"tcp://{SERVER}:7702",
                VBT_QUERY_ENDPOINT=f"tcp://{SERVER}:7703", VBT_BUS_CERT=str(keys / "server.key"))
    vbt = binary("vbt")

    def keys_cmd(*args: str) -> None:
        subprocess.run([vbt, "keys", *args], env=base, check=True, capture_output=True, timeout=30)

    keys_cmd("init", str(keys))
    for station in STATIONS.values():
        keys_cmd("add", str(keys), station, "--role", "bridge", "--station", station)
    for service in ["rep-detector", "posture-evaluator", "notifier", "session-recorder"]:
        keys_cmd("add", str(keys), service, "--role", "service")
    keys_cmd("add", str(keys), "viewer", "--role", "viewer")
    keys_cmd("add", str(keys), "old-tablet", "--role", "coach")
    keys_cmd("revoke", str(keys), "old-tablet")

    def client(name: str) -> dict[str, str]:
        return dict(base, VBT_CERT=str(keys / "clients" / f"{name}.key_secret"))

    server_env = {"VBT_SERVER_CERT": str(keys / "server.key_secret"), "VBT_AUTHORIZED": str(keys / "authorized")}
    net = Network()
    hosts: list[Host] = []

    def start(name: str, host: str, argv: list[str], env: dict[str, str]) -> Host:
        started = Host(name, net.ns[host], argv, env, tmp_path)
        hosts.append(started)
        return started

    def describe() -> str:
        return "\n".join(h.describe() for h in hosts)

    watched = Watched(tmp_path / "watched.jsonl")
    try:
        net.build()
        bus_env = dict(base, **server_env, VBT_PUB_ENDPOINT=f"tcp://{SERVER}:7701", VBT_SUB_ENDPOINT=f"tcp://{SERVER}:7702")
        start("vbt-bus", "srv", [binary("vbt-bus"), "--heartbeat-interval", "0.5"], bus_env)
        start("watcher", "srv", [sys.executable, str(HERE / "bus_watch.py"), "--endpoint", f"tcp://{SERVER}:7702",
                                 "--cert", str(keys / "clients" / "viewer.key_secret"), "--server-cert", str(keys / "server.key"),
                                 "--out", str(watched.path)], base)
        wait_until(lambda: "heartbeat.bus" in watched.topics(), "the watcher to get heartbeat.bus over CURVE", detail=describe)
        start("session-recorder", "srv", [binary("session-recorder"), "--db", str(tmp_path / "vbt.sqlite")],
              dict(client("session-recorder"), **server_env))
        start("rep-detector", "srv", [binary("rep-detector")], client("rep-detector"))
        start("posture-evaluator", "srv", [binary("posture-evaluator")], client("posture-evaluator"))
        start("notifier", "srv", [binary("notifier"), "--state", str(tmp_path / "notifier.json")], client("notifier"))
        for seed, (host, station) in enumerate(STATIONS.items(), 1):
            start(f"bridge-{station}", host, [binary("sensor-bridge"), "--simulate", "--loop", "--station", station,
                                              "--seed", str(seed), "--rest", "5"], client(station))

        # End to end: every station's readings, reps and the services' heartbeats.
        want = {f"rep.{s}" for s in STATIONS.values()} | {f"sample.{s}" for s in STATIONS.values()} | {
            f"heartbeat.{p}" for p in ["rep-detector", "posture-evaluator", "notifier", "session-recorder"]} | {
            f"heartbeat.bridge-{s}" for s in STATIONS.values()}
        wait_until(lambda: want <= watched.topics(), "every station's reps and every program's heartbeat", timeout=120,
                   detail=lambda: f"missing {sorted(want - watched.topics())}\n{describe()}")

        def stored() -> bool:
            result = subprocess.run(["ip", "netns", "exec", net.ns["srv"], vbt, "history", "--json"], env=client("viewer"),
                                    capture_output=True, text=True, timeout=30)
            return result.returncode == 0 and all(f'"{s}"' in result.stdout for s in STATIONS.values())
        wait_until(stored, "the recorder to store every station's sets (read with the viewer's key)", timeout=120,
                   detail=describe)

        # The attacker.
        before = watched.last("heartbeat.bus")["bus"]
        attack = subprocess.run(["ip", "netns", "exec", net.ns["atk"], sys.executable, str(HERE / "attacker.py"),
                                 "--host", SERVER, "--server-cert", str(keys / "server.key"),
                                 "--station-cert", str(keys / "clients" / "rack-01.key_secret"),
                                 "--revoked-cert", str(keys / "clients" / "old-tablet.key_secret")],
                                env=base, capture_output=True, text=True, timeout=60)
        assert attack.returncode == 0, attack.stderr
        report = json.loads(attack.stdout)
        assert all(count > 0 for count in report["sent"].values()), report
        # Each refusal reached the bus: the station key's messages one by one, the others at the handshake.
        wait_until(lambda: watched.last("heartbeat.bus")["bus"]["refused"] >= before["refused"] + 5
                   and watched.last("heartbeat.bus")["bus"]["refused_connections"] >= before["refused_connections"] + 3,
                   "heartbeat.bus to count the refused messages and connections",
                   detail=lambda: f"{watched.last('heartbeat.bus')}\n{describe()}")
        assert watched.last("heartbeat.bus")["bus"]["refused_by"].get("rack-01", 0) >= 5, watched.last("heartbeat.bus")
        intruders = [m for m in watched.messages() if '"athlete":"intruder"' in m["body"]]
        assert intruders == [], intruders[:3]
        assert report["received_from_bus"] == {"no-key": 0, "unknown-key": 0, "revoked-key": 0}, report
        for name, replies in report["query_replies"].items():
            assert not any(reply.get("ok") for reply in replies), (name, replies)
        assert report["query_replies"]["no-key"] == [] and report["query_replies"]["revoked-key"] == [], report
        forbidden = report["query_replies"]["station-a-key"]
        assert forbidden and all(r["error"]["kind"] == "forbidden" for r in forbidden), forbidden

        # A station's link down, then up.
        gaps_before = watched.last("heartbeat.rep-detector")["inputs"]["gaps"]
        net.link("sb", "down")

        def quiet(topic: str, beats: int = 3):
            # True once `topic` has not grown over the last `beats` bus heartbeats.
            history: list[tuple[int, int]] = []

            def check() -> bool:
                seq, count = watched.last("heartbeat.bus")["seq"], watched.count(topic)
                if not history or history[-1][0] != seq:
                    history.append((seq, count))
                return len(history) > beats and history[-1][1] == history[-1 - beats][1]
            return check
        wait_until(quiet("sample.rack-02"), "rack-02's readings to stop", timeout=30, detail=describe)
        # The attacker's connections have all closed by now: the next disconnection is rack-02's.
        bus_down = watched.last("heartbeat.bus")["bus"]
        wait_until(lambda: watched.last("heartbeat.bus")["bus"]["disconnections"] > bus_down["disconnections"],
                   "the bus to drop rack-02's silent connection (liveness, 5 s)", timeout=30,
                   detail=lambda: f"{watched.last('heartbeat.bus')}\n{describe()}")
        bus_dropped = watched.last("heartbeat.bus")["bus"]
        samples_down = watched.count("sample.rack-02")
        net.link("sb", "up")
        wait_until(lambda: watched.count("sample.rack-02") > samples_down + 10
                   and watched.last("heartbeat.bus")["bus"]["connections"] > bus_dropped["connections"],
                   "rack-02 to connect again and its readings to resume", timeout=60,
                   detail=lambda: f"{watched.last('heartbeat.bus')}\n{describe()}")
        wait_until(lambda: watched.last("heartbeat.rep-detector")["inputs"]["gaps"] > gaps_before,
                   "the detector's heartbeat to count the gap of the outage", timeout=30, detail=describe)
        for host in hosts:
            assert host.proc.poll() is None, f"{host.name} exited\n{describe()}"
    finally:
        for host in reversed(hosts):
            host.stop()
        net.tear_down()
