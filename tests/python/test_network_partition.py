"""A station computer's link partitioned during a session, and nothing lost.

Two network namespaces joined by a bridge: `srv` (the gym server: vbt-bus,
session-recorder, rep-detector, and a watcher with a viewer key writing down
what the bus forwards) and `sa` (a station computer: a simulated
sensor-bridge journalling into a tmpfs of its own mount namespace, so no
`ipc://` socket or file of it can be reached from the server). The bridge
offers its journal on `tcp://<station>:7801`, CURVE with its own key, service
keys only (proto/replay.md, proto/security.md).

The station's link drops 10 % of its packets (nftables `numgen random`: this
kernel has no netem), then every packet until the bus has dropped the silent
connection and the bridge's readings have stopped for 3 bus heartbeats, then
10 % again, then none. Afterwards the store holds every reading the station's
journal holds (the recorder's progress reaches the bridge's last `seq` with
no hole and nothing lost), although the watcher shows that some never came
live; the rep-detector lost nothing either. The simulation is ended with
SIGUSR1 and the bridge lingers, answering from its journal, so the end is
fixed when the store is compared with it.

Needs root (ip netns) and nft; it is skipped, saying why, where either is missing.
"""
from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import test_multihost as multihost
from test_multihost import Host, Watched, namespaces_available, sh
from test_wire import binary, wait_until

HERE = Path(__file__).resolve().parent
SUBNET = "10.78.0"
HOSTS = {"srv": 1, "sa": 11}
SERVER = f"{SUBNET}.{HOSTS['srv']}"
STATION_ADDRESS = f"{SUBNET}.{HOSTS['sa']}"
STATION = "rack-01"


class Network(multihost.Network):
    """The multi-host test's namespaces with a station's packets dropped at will, its link
    throttled or flapping (tests/python/chaos_run.py uses it with its own hosts and subnet)."""

    def __init__(self, hosts: dict[str, int] = HOSTS, subnet: str = SUBNET, prefix: str = "p") -> None:
        super().__init__(hosts, subnet, prefix=prefix)
        self.server = f"{subnet}.{hosts['srv']}"

    def drop(self, host: str, percent: int, from_server_only: bool = False) -> None:
        """Drops `percent` % of `host`'s packets to and from the server, in and out (0: none, 100: every one);
        with `from_server_only`, only the server's packets to `host`."""
        nft = ["ip", "netns", "exec", self.ns[host], "nft"]
        subprocess.run([*nft, "delete", "table", "inet", "vbtdrop"], capture_output=True, timeout=30)
        if percent == 0:
            return
        sh(*nft, "add", "table", "inet", "vbtdrop")
        for chain, hook in [("in", "input")] + ([] if from_server_only else [("out", "output")]):
            sh(*nft, "add", "chain", "inet", "vbtdrop", chain, f"{{ type filter hook {hook} priority 0; }}")
            rule = ["drop"] if percent >= 100 else ["numgen", "random", "mod", "100", "<", str(percent), "drop"]
            sh(*nft, "add", "rule", "inet", "vbtdrop", chain, "ip", "saddr" if chain == "in" else "daddr", self.server, *rule)

    def throttle(self, host: str, rate: str | None, latency_ms: int = 2000) -> None:
        """Throttles `host`'s link both ways to `rate` (tc's units, e.g. "1mbit") with a token bucket
        whose queue holds `latency_ms` of traffic before it drops (a deep queue, as a congested
        access point's); None removes it. This kernel has tbf, not netem."""
        for ns, dev in [(self.ns[host], self.veth[host]), (self.ns["lan"], self.veth[host] + "p")]:
            subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], capture_output=True, timeout=30)
            if rate is not None:
                sh("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst", "32kbit",
                   "latency", f"{latency_ms}ms")

    def flap(self, host: str, periods: list[tuple[float, float]], stop: threading.Event) -> list[tuple[float, float]]:
        """Takes `host`'s link down and up again for each (down_s, up_s) of `periods`, until `stop`;
        returns the (down, up) wall times. The link is up when it returns."""
        done: list[tuple[float, float]] = []
        try:
            for down_s, up_s in periods:
                if stop.is_set():
                    break
                self.link(host, "down")
                went_down = time.time()
                stop.wait(down_s)  # the fault itself: how long the link stays down
                self.link(host, "up")
                done.append((went_down, time.time()))
                stop.wait(up_s)
        finally:
            self.link(host, "up")
        return done



def test_a_partitioned_station_loses_nothing(tmp_path):
    reason = namespaces_available() or (None if shutil.which("nft") else "needs nft (apt-get install nftables)")
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
    keys_cmd("add", str(keys), STATION, "--role", "bridge", "--station", STATION)
    for service in ["rep-detector", "session-recorder"]:
        keys_cmd("add", str(keys), service, "--role", "service")
    keys_cmd("add", str(keys), "viewer", "--role", "viewer")

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
    database = tmp_path / "vbt.sqlite"
    # The station's own disk: a tmpfs mounted in a mount namespace of its own, seen by no other "computer".
    station_disk = tmp_path / "station"
    station_disk.mkdir()
    try:
        net.build()
        start("vbt-bus", "srv", [binary("vbt-bus"), "--heartbeat-interval", "0.5"], dict(base, **server_env))
        start("watcher", "srv", [sys.executable, str(HERE / "bus_watch.py"), "--endpoint", f"tcp://{SERVER}:7702",
                                 "--cert", str(keys / "clients" / "viewer.key_secret"), "--server-cert", str(keys / "server.key"),
                                 "--out", str(watched.path)], base)
        wait_until(lambda: "heartbeat.bus" in watched.topics(), "the watcher to get heartbeat.bus over CURVE", detail=describe)
        start("session-recorder", "srv", [binary("session-recorder"), "--db", str(database)], dict(client("session-recorder"), **server_env))
        start("rep-detector", "srv", [binary("rep-detector"), "--journal", str(tmp_path / "detector-journal")], client("rep-detector"))
        bridge = [binary("sensor-bridge"), "--simulate", "--loop", "--station", STATION, "--seed", "4", "--rest", "5",
                  "--journal", str(station_disk / "journal"), "--replay-endpoint", f"tcp://{STATION_ADDRESS}:7801",
                  "--linger", "120"]
        station_host = start(f"bridge-{STATION}", "sa", ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                          'mount -t tmpfs vbt-station "$0" && exec "$@"', str(station_disk), *bridge],
              dict(client(STATION), VBT_AUTHORIZED=str(keys / "authorized")))

        def offer() -> dict:
            return watched.last(f"heartbeat.bridge-{STATION}").get("replay", {})
        wait_until(lambda: offer().get("endpoint") == f"tcp://{STATION_ADDRESS}:7801" and offer().get("server_key"),
                   "the bridge to offer its journal on TCP with its key", timeout=60, detail=describe)
        assert not any(station_disk.iterdir()), "the station's journal is on its own disk, not the server's"
        wait_until(lambda: watched.count(f"rep.{STATION}") >= 1, "a first rep through the detector", timeout=90, detail=describe)

        def bus_beats() -> int:
            return watched.last("heartbeat.bus").get("seq", 0)

        def after_beats(count: int):
            until = bus_beats() + count
            return lambda: bus_beats() >= until

        # 10 % lost, then the link cut until the bus has dropped the silent station, then 10 % again.
        net.drop("sa", 10)
        wait_until(after_beats(6), "3 s of a lossy link", detail=describe)
        connections = watched.last("heartbeat.bus")["bus"]
        # The server's packets lost first, so the bus holds data the station never acknowledged
        # (its answers to the bridge's pings) when the link goes: keepalive alone would then wait
        # out the kernel's retransmissions, for minutes.
        net.drop("sa", 100, from_server_only=True)
        wait_until(after_beats(3), "1.5 s of the server's packets lost", detail=describe)
        net.drop("sa", 100)
        wait_until(lambda: watched.last("heartbeat.bus")["bus"]["disconnections"] > connections["disconnections"],
                   "the bus to drop the partitioned station (liveness, 5 s)", timeout=30, detail=describe)
        samples = watched.count(f"sample.{STATION}")
        wait_until(after_beats(6), "3 s more of the partition", detail=describe)
        assert watched.count(f"sample.{STATION}") == samples, "nothing came through the partition"
        net.drop("sa", 10)
        wait_until(lambda: watched.count(f"sample.{STATION}") > samples + 20, "the station's readings to resume", timeout=60,
                   detail=describe)
        wait_until(after_beats(6), "3 s more of a lossy link", detail=describe)
        net.drop("sa", 0)

        # The simulation ends (SIGUSR1) and the bridge lingers, answering from its journal; its
        # heartbeats say how far each stream went.
        station_host.proc.send_signal(signal.SIGUSR1)
        wait_until(lambda: "answering replay requests a while longer" in station_host.stderr_path.read_text(errors="replace"),
                   "the simulation to end", timeout=30, detail=describe)
        # A heartbeat sent after that says where each stream ended (one sent before may not have
        # counted the last readings yet).
        ended = time.time()
        wait_until(lambda: watched.last(f"heartbeat.bridge-{STATION}").get("ts", 0) > ended + 0.1,
                   "a heartbeat of the bridge after its simulation ended", timeout=30, detail=describe)

        def journal_end() -> tuple[str, int]:
            ends = [(src, last) for src, last in offer()["last_seq"].items() if src.endswith(f"/sample.{STATION}")]
            assert len(ends) == 1, offer()
            return ends[0]

        def progress() -> tuple[int, int, int]:
            src = journal_end()[0]
            with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=10) as db:
                row = db.execute("SELECT last_seq, lost FROM sources WHERE src = ?", (src,)).fetchone() or (0, 0)
                holes = db.execute("SELECT count(*) FROM source_holes WHERE src = ?", (src,)).fetchone()[0]
            return (*row, holes)
        wait_until(lambda: progress() == (journal_end()[1], 0, 0), "the store to hold every reading of the station's journal",
                   timeout=60, detail=lambda: f"{progress()} of {journal_end()}\n{describe()}")
        last = journal_end()[1]
        seen_live = {m["body"] for m in watched.messages() if m["topic"] == f"sample.{STATION}"}
        assert len(seen_live) < last, "the partition made the bus miss some readings live"
        assert progress() == (last, 0, 0), progress()
        recorder = watched.last("heartbeat.session-recorder")["inputs"]
        assert recorder.get("lost", 0) == 0 and recorder.get("outstanding", 0) == 0, recorder
        wait_until(lambda: watched.last("heartbeat.rep-detector")["inputs"].get("outstanding", 0) == 0,
                   "the detector to have every reading too", timeout=30, detail=describe)
        assert watched.last("heartbeat.rep-detector")["inputs"].get("lost", 0) == 0, watched.last("heartbeat.rep-detector")
        for host in hosts:
            assert host.proc.poll() is None, f"{host.name} exited\n{describe()}"
    finally:
        for host in reversed(hosts):
            host.stop()
        net.tear_down()
