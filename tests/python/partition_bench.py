"""The gym's network benchmark (`make bench`): how long after a station computer's link comes
back every consumer on the server has caught up, for partitions of several lengths, and how
fast the consumers fetch what they missed over a link throttled to a slow Wi-Fi's rate.

Two network namespaces joined by a bridge, as tests/python/test_network_partition.py builds
them (its Network, on 10.80.0.0/24): `srv`, the gym server (vbt-bus, session-recorder,
rep-detector, posture-evaluator, notifier, and a watcher with a viewer key writing down what
the bus forwards), and `sa`, a station computer: a simulated sensor-bridge at speed 1,
journalling into a tmpfs of its own mount namespace and offering its journal on
`tcp://<station>:7801` (CURVE, service keys only). Everything is CURVE.

For each partition length (`--partitions`, seconds): every packet of the station's link is
dropped (nftables on its interface), for that long, then none. Timed from the moment the link
is back:
- the session-recorder: until the store holds every `seq` of the station's readings up to the
  bridge's last one as its first heartbeat after the partition says (no hole below it);
- the rep-detector, the posture-evaluator, the notifier: until their last `caught up` log line
  (VBTBus CatchUpReport), confirmed by a heartbeat of theirs, sent after they heard the bridge's,
  with `inputs.outstanding` 0. One that logs none missed nothing it follows (`-`).
"All" is the longest of them. Then the same partition twice more (`--fetch-partition`): on the
link as it is (the baseline) and with both directions throttled by `tc tbf` to
`--throttle-kbit` (a deep queue: latency 2 s). The fetch rate is the readings (and their
messages' bytes, topic and JSON, one copy) the watcher never saw live, over the time until
all consumers have caught up; `link KB/s` is what the station's interface sent meanwhile (each
consumer's fetch, the live readings, CURVE and TCP).

At the end the simulation stops (SIGUSR1; the bridge lingers, answering from its journal),
the whole journal is fetched over the replay endpoint and its readings compared with the
store's (fault_run.load_store): none may be missing, and no consumer may count one lost.

Needs root (ip netns), nft and tc. Run from the repository root (about 6 minutes):
    VBT_BIN_DIR=$(swift build -c release --show-bin-path) python3 tests/python/partition_bench.py \\
        [--partitions 10 30 120] [--throttle-kbit 1000] [--fetch-partition 30] [--repeats 1] \\
        [--json FILE] [--folder DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fault_run  # noqa: E402
import test_multihost as multihost  # noqa: E402
import test_network_partition as partition  # noqa: E402
from test_multihost import Host, Watched, namespaces_available, sh  # noqa: E402
from test_wire import binary, wait_until  # noqa: E402

SUBNET = "10.80.0"
HOSTS = {"srv": 1, "sa": 11}
SERVER = f"{SUBNET}.{HOSTS['srv']}"
STATION_ADDRESS = f"{SUBNET}.{HOSTS['sa']}"
STATION = "rack-01"
REPLAY = f"tcp://{STATION_ADDRESS}:7801"
CONSUMERS = ["session-recorder", "rep-detector", "posture-evaluator", "notifier"]
IN_ORDER = CONSUMERS[1:]
# How long every consumer may take to catch up after a partition before the run fails.
CATCH_UP_TIMEOUT_S = 300.0
CAUGHT_UP = fault_run.Installation.CAUGHT_UP


class BenchNetwork(partition.Network):
    """The partition test's namespaces on this benchmark's own subnet, with the station's link
    cut whole (its interface, both ways: its `drop` matches that test's server address) and
    throttled."""

    def __init__(self) -> None:
        multihost.Network.__init__(self, HOSTS, SUBNET, prefix="b")

    def cut(self, host: str, cut: bool) -> None:
        nft = ["ip", "netns", "exec", self.ns[host], "nft"]
        if not cut:
            sh(*nft, "delete", "table", "inet", "vbtcut")
            return
        sh(*nft, "add", "table", "inet", "vbtcut")
        for chain, hook, match in [("in", "input", "iifname"), ("out", "output", "oifname")]:
            sh(*nft, "add", "chain", "inet", "vbtcut", chain, f"{{ type filter hook {hook} priority 0; }}")
            sh(*nft, "add", "rule", "inet", "vbtcut", chain, match, self.veth[host], "drop")

    def shape(self, host: str, kbit: int | None) -> None:
        """Both directions of `host`'s link at `kbit` kbit/s (a token bucket with a 2 s queue), or as built."""
        for ns, dev in [(self.ns[host], self.veth[host]), (self.ns["lan"], self.veth[host] + "p")]:
            if kbit is None:
                sh("tc", "-n", ns, "qdisc", "del", "dev", dev, "root")
            else:
                sh("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{kbit}kbit", "burst", "32kbit",
                   "latency", "2s")


def sent_bytes(pid: int, dev: str) -> int:
    """Bytes interface `dev` has sent, read in the network namespace of process `pid`."""
    for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == dev:
            return int(counters.split()[8])
    raise RuntimeError(f"no interface {dev} in process {pid}'s namespace")


class Tail(Watched):
    """The watcher's file read incrementally: the last body per topic (with the time it was read)
    and the `seq`s of the station's readings seen live."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.offset = 0
        self.latest: dict[str, tuple[float, dict]] = {}
        self.counts: dict[str, int] = {}
        self.live_seqs: set[int] = set()

    def poll(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1  # a line being written waits for the next poll
        self.offset += end
        now = time.time()
        for line in chunk[:end].splitlines():
            message = json.loads(line)
            topic = message["topic"]
            self.counts[topic] = self.counts.get(topic, 0) + 1
            if topic == f"sample.{STATION}":
                self.live_seqs.add(json.loads(message["body"])["seq"])
            elif topic.startswith("heartbeat."):
                self.latest[topic] = (now, json.loads(message["body"]))

    def topics(self) -> set[str]:
        self.poll()
        return set(self.counts)

    def last(self, topic: str) -> dict:
        self.poll()
        return self.latest.get(topic, (0.0, {}))[1]

    def count(self, topic: str) -> int:
        self.poll()
        return self.counts.get(topic, 0)


def caught_up_lines(host: Host, since: float) -> list[dict]:
    """The `caught up` lines `host` logged at or after wall time `since`: at, recovered, lost."""
    found = []
    for line in host.stderr_path.read_text(encoding="utf-8", errors="replace").splitlines():
        match = CAUGHT_UP.search(line) if "caught up" in line else None
        if match and float(match.group(1) or match.group(2)) >= since:
            fields = {k: int(v) for k, v in re.findall(r"\b(recovered|lost)=\"?(\d+)", line)}
            found.append({"at": float(match.group(1) or match.group(2)), **fields})
    return found


def fetch_journal(endpoint: str, server_key: str, cert: str, src: str, last: int, out: Path) -> None:
    """In the server's namespace (`--fetch-journal`): every message of `src` up to `last` from its
    producer's replay endpoint (proto/replay.md), one JSON line each: seq, ts, readings, bytes."""
    import zmq
    import zmq.auth

    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.curve_publickey, sock.curve_secretkey = zmq.auth.load_certificate(cert)
    sock.curve_serverkey = server_key.encode()
    sock.connect(endpoint)
    wanted = 1
    with open(out, "w", encoding="utf-8") as f:
        while wanted <= last:
            sock.send_multipart([b"", json.dumps({"id": str(wanted), "src": src, "from": wanted, "to": last}).encode()])
            if not sock.poll(30_000):
                raise RuntimeError(f"no answer from {endpoint} for {src} from {wanted}")
            frames = sock.recv_multipart()[1:]
            header = json.loads(frames[0])
            if header.get("error") or header.get("kept_from", 1) > wanted:
                raise RuntimeError(f"the journal cannot answer from {wanted}: {header}")
            seq = wanted - 1
            for topic, body in zip(frames[1::2], frames[2::2]):
                message = json.loads(body)
                seq = message["seq"]
                readings = [[message["sensor"], r["t"]] for r in message["samples"]]
                f.write(json.dumps({"seq": seq, "ts": message["ts"], "readings": readings,
                                    "bytes": len(topic) + len(body)}) + "\n")
            if seq < wanted:
                raise RuntimeError(f"an empty answer from {wanted}: {header}")
            wanted = seq + 1
    ctx.destroy(linger=0)


class Gym:
    """The server and the station computer, started; what the benchmark asks of them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.keys = folder / "keys"
        self.net = BenchNetwork()
        self.hosts: dict[str, Host] = {}
        self.watched = Tail(folder / "watched.jsonl")
        self.database = folder / "vbt.sqlite"
        self.base = {k: v for k, v in os.environ.items() if not k.startswith("VBT_")}
        self.base.update(VBT_LOG_LEVEL="info", VBT_PUB_ENDPOINT=f"tcp://{SERVER}:7701",
                         VBT_SUB_ENDPOINT=f"tcp://{SERVER}:7702", VBT_QUERY_ENDPOINT=f"tcp://{SERVER}:7703",
                         VBT_BUS_CERT=str(self.keys / "server.key"))

    def describe(self) -> str:
        return "\n".join(h.describe() for h in self.hosts.values())

    def client(self, name: str) -> dict[str, str]:
        return dict(self.base, VBT_CERT=str(self.keys / "clients" / f"{name}.key_secret"))

    def start(self, name: str, host: str, argv: list[str], env: dict[str, str]) -> Host:
        self.hosts[name] = Host(name, self.net.ns[host], argv, env, self.folder)
        return self.hosts[name]

    def up(self) -> None:
        vbt = binary("vbt")

        def keys(*args: str) -> None:
            subprocess.run([vbt, "keys", *args], env=self.base, check=True, capture_output=True, timeout=30)

        keys("init", str(self.keys))
        keys("add", str(self.keys), STATION, "--role", "bridge", "--station", STATION)
        for service in CONSUMERS:
            keys("add", str(self.keys), service, "--role", "service")
        # The benchmark's own reader of the station's journal: a service key, as the endpoint admits no other.
        keys("add", str(self.keys), "journal-reader", "--role", "service", "--program", "session-recorder")
        keys("add", str(self.keys), "viewer", "--role", "viewer")
        server = {"VBT_SERVER_CERT": str(self.keys / "server.key_secret"), "VBT_AUTHORIZED": str(self.keys / "authorized")}
        self.net.build()
        self.start("vbt-bus", "srv", [binary("vbt-bus"), "--heartbeat-interval", "0.5"], dict(self.base, **server))
        self.start("watcher", "srv", [sys.executable, str(HERE / "bus_watch.py"), "--endpoint", f"tcp://{SERVER}:7702",
                                      "--cert", str(self.keys / "clients" / "viewer.key_secret"),
                                      "--server-cert", str(self.keys / "server.key"), "--out", str(self.watched.path)],
                   self.base)
        wait_until(lambda: "heartbeat.bus" in self.watched.topics(), "the watcher to get heartbeat.bus over CURVE",
                   detail=self.describe)
        self.start("session-recorder", "srv", [binary("session-recorder"), "--db", str(self.database)],
                   dict(self.client("session-recorder"), **server))
        self.start("rep-detector", "srv", [binary("rep-detector"), "--journal", str(self.folder / "detector-journal")],
                   self.client("rep-detector"))
        self.start("posture-evaluator", "srv", [binary("posture-evaluator")], self.client("posture-evaluator"))
        self.start("notifier", "srv", [binary("notifier"), "--state", str(self.folder / "notifier.json")],
                   self.client("notifier"))
        # The station's own disk: a tmpfs in a mount namespace of its own, seen by no other "computer".
        disk = self.folder / "station"
        disk.mkdir()
        bridge = [binary("sensor-bridge"), "--simulate", "--loop", "--station", STATION, "--seed", "4", "--rest", "5",
                  "--journal", str(disk / "journal"), "--replay-endpoint", REPLAY, "--linger", "600"]
        self.start("bridge", "sa", ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                    'mount -t tmpfs vbt-station "$0" && exec "$@"', str(disk), *bridge],
                   dict(self.client(STATION), VBT_AUTHORIZED=str(self.keys / "authorized")))
        wait_until(lambda: self.offer().get("endpoint") == REPLAY and self.offer().get("server_key"),
                   "the bridge to offer its journal on TCP with its key", timeout=60, detail=self.describe)
        want = {f"heartbeat.{name}" for name in CONSUMERS}
        wait_until(lambda: want <= self.watched.topics() and self.watched.count(f"sample.{STATION}") > 100,
                   "the station's readings and every consumer's heartbeat", timeout=60, detail=self.describe)

    def down(self) -> None:
        for host in reversed(list(self.hosts.values())):
            host.stop()
        self.net.tear_down()

    def offer(self) -> dict:
        return self.watched.last(f"heartbeat.bridge-{STATION}").get("replay", {})

    def journal_end(self) -> tuple[str, int]:
        ends = [(src, last) for src, last in self.offer().get("last_seq", {}).items() if src.endswith(f"/sample.{STATION}")]
        assert len(ends) == 1, self.offer()
        return ends[0]

    def store_progress(self, src: str) -> tuple[int, int, int | None]:
        """The recorder's stream `src`: last seq stored, lost, and the lowest seq of a hole (None: none)."""
        with sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=10) as db:
            last, lost = db.execute("SELECT last_seq, lost FROM sources WHERE src = ?", (src,)).fetchone() or (0, 0)
            hole = db.execute("SELECT min(from_seq) FROM source_holes WHERE src = ?", (src,)).fetchone()[0]
        return last, lost, hole

    def lost(self) -> dict[str, int]:
        return self.inputs("lost")

    def inputs(self, counter: str) -> dict[str, int]:
        """Each consumer's running count `counter` from its latest heartbeat's `inputs`."""
        return {name: self.watched.last(f"heartbeat.{name}").get("inputs", {}).get(counter, 0) for name in CONSUMERS}

    def beat(self, name: str) -> tuple[float, dict]:
        self.watched.poll()
        return self.watched.latest.get(f"heartbeat.{name}", (0.0, {}))

    def steady(self) -> None:
        """Readings flowing and no consumer waiting for anything."""
        readings = self.watched.count(f"sample.{STATION}")
        wait_until(lambda: self.watched.count(f"sample.{STATION}") > readings + 50
                   and all(self.beat(n)[1].get("inputs", {}).get("outstanding", 0) == 0 for n in CONSUMERS),
                   "the station's readings to flow with nothing outstanding", timeout=60, detail=self.describe)

    def partition(self, seconds: float, kbit: int | None) -> dict:
        """One partition of `seconds`, the link throttled to `kbit` (None: as built) throughout."""
        if kbit is not None:
            self.net.shape("sa", kbit)
        try:
            self.steady()
            lost_before, recovered_before = self.lost(), self.inputs("recovered")
            self.net.cut("sa", True)
            cut = time.time()
            time.sleep(seconds)  # the partition's length is what is measured against: a duration, not a condition
            self.net.cut("sa", False)
            restored = time.time()
            return self.catch_up(seconds, kbit, cut, restored, lost_before, recovered_before)
        finally:
            if kbit is not None:
                self.net.shape("sa", None)

    def catch_up(self, seconds: float, kbit: int | None, cut: float, restored: float, lost_before: dict,
                 recovered_before: dict) -> dict:
        pid, dev = self.hosts["bridge"].proc.pid, self.net.veth["sa"]
        link = [(restored, sent_bytes(pid, dev))]
        seq_before = self.journal_end()[1]

        def bridge_beat() -> tuple[float, dict] | None:
            beat = self.watched.latest.get(f"heartbeat.bridge-{STATION}", (0.0, {}))
            return beat if beat[1].get("ts", 0) >= restored else None
        # The bridge's first heartbeat sent after the partition: how far its readings went (the target), and
        # when the consumers heard it (after which one that lacks any of them has it outstanding).
        heard = wait_until(lambda: self.watched.poll() or bridge_beat(), "the bridge's heartbeat after the partition",
                           timeout=CATCH_UP_TIMEOUT_S, interval=0.05, detail=self.describe)[0]
        src, target = self.journal_end()
        done: dict[str, float | None] = {}

        def check() -> bool:
            link.append((time.time(), sent_bytes(pid, dev)))
            if "session-recorder" not in done:
                last, _, hole = self.store_progress(src)
                if last >= target and (hole is None or hole > target):
                    done["session-recorder"] = time.time()
            for name in IN_ORDER:
                sent, body = self.beat(name)
                if name not in done and sent >= heard + 1.0 and body.get("inputs", {}).get("outstanding", 0) == 0:
                    lines = [line for line in caught_up_lines(self.hosts[name], restored) if line["at"] <= sent]
                    done[name] = lines[-1]["at"] if lines else None
            return len(done) == len(CONSUMERS)

        wait_until(check, f"every consumer to catch up after a {seconds:g} s partition", timeout=CATCH_UP_TIMEOUT_S,
                   interval=0.05, detail=lambda: f"{done} target {target}\n{self.describe()}")
        link.append((time.time(), sent_bytes(pid, dev)))  # at or after the last consumer caught up
        times = {name: (None if at is None else round(at - restored, 3)) for name, at in done.items()}
        all_s = max(t for t in times.values() if t is not None)
        # The last to catch up, unrounded: the link's last sample was taken at or after it.
        at_all = max(at for at in done.values() if at is not None)
        sent = next(b for t, b in link if t >= at_all) - link[0][1]
        # What each consumer fetched, from the heartbeats each sent after it caught up (a running count: a
        # slow link's recorder may still be fetching later holes, so its `caught up` line can come late).
        for name, at in done.items():
            if at is not None:
                wait_until(lambda name=name, at=at: self.beat(name)[0] > at, f"{name}'s heartbeat after it caught up",
                           timeout=CATCH_UP_TIMEOUT_S, interval=0.1, detail=self.describe)
        lost = {name: count - lost_before[name] for name, count in self.lost().items()}
        recovered = {name: count - recovered_before[name] for name, count in self.inputs("recovered").items()}
        return {"partition_s": seconds, "throttle_kbit": kbit, "cut": cut, "restored": restored, "src": src,
                "seq_at_cut": seq_before, "target_seq": target, "caught_up_s": times, "all_s": all_s,
                "link_bytes": sent, "recovered": recovered, "lost": lost}

    def finish(self) -> dict:
        """Ends the simulation, fetches the whole journal and compares its readings with the store's."""
        bridge = self.hosts["bridge"]
        bridge.proc.send_signal(signal.SIGUSR1)
        wait_until(lambda: "answering replay requests a while longer" in bridge.stderr_path.read_text(errors="replace"),
                   "the simulation to end", timeout=30, detail=self.describe)
        def reached() -> bool:
            # A stream that stopped short moves `last_seq` to what its producer said it sent at
            # once, its missing seqs a hole until they are fetched: the end is reached with no
            # hole left (or one given up, which the comparison then reports as lost).
            src, end = self.journal_end()
            last, lost, hole = self.store_progress(src)
            return end > 0 and last >= end and (hole is None or lost > 0)

        wait_until(reached, "the store to reach the journal's end with no hole", timeout=CATCH_UP_TIMEOUT_S, detail=self.describe)
        src, last = self.journal_end()
        out = self.folder / "journal.jsonl"
        subprocess.run(["ip", "netns", "exec", self.net.ns["srv"], sys.executable, __file__, "--fetch-journal", str(out),
                        "--endpoint", REPLAY, "--server-key", self.offer()["server_key"],
                        "--cert", str(self.keys / "clients" / "journal-reader.key_secret"), "--src", src, "--last", str(last)],
                       check=True, timeout=300)
        journal = [json.loads(line) for line in out.read_text().splitlines()]
        stored = fault_run.load_store(self.database)["readings"]
        wanted: dict = {}
        for message in journal:
            for sensor, t in message["readings"]:
                wanted[(STATION, sensor, t)] = wanted.get((STATION, sensor, t), 0) + 1
        missing = sum(max(0, n - stored.get(key, 0)) for key, n in wanted.items())
        _, lost, hole = self.store_progress(src)
        return {"journal": journal, "last_seq": last, "readings": sum(wanted.values()), "missing_from_store": missing,
                "store_lost": lost, "store_hole": hole, "consumers_lost": self.lost(),
                "exited": [h.name for h in self.hosts.values() if h.proc.poll() is not None]}


def fetched(run: dict, journal: dict[int, dict], live: set[int], floor: int) -> dict:
    """What the consumers fetched after one partition: the station's readings of `seq`s in
    (floor, target] the bus never delivered live, and the rates over the time until all caught up."""
    missed = [journal[s] for s in range(floor + 1, run["target_seq"] + 1) if s in journal and s not in live]
    readings = sum(len(m["readings"]) for m in missed)
    payload = sum(m["bytes"] for m in missed)
    seconds = run["all_s"]
    return {"missed_messages": len(missed), "missed_readings": readings, "missed_kb": round(payload / 1000, 1),
            "readings_per_s": round(readings / seconds, 1) if seconds > 0 else None,
            "payload_kb_per_s": round(payload / 1000 / seconds, 1) if seconds > 0 else None,
            "link_kb_per_s": round(run["link_bytes"] / 1000 / seconds, 1) if seconds > 0 else None}


def median(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 3) if known else None


def summarise(runs: list[dict]) -> dict:
    """Medians over the repeats of one kind of run."""
    keys = ["all_s", "missed_readings", "missed_kb", "readings_per_s", "payload_kb_per_s", "link_kb_per_s"]
    out = {k: median([r[k] for r in runs]) for k in keys}
    out["caught_up_s"] = {n: median([r["caught_up_s"].get(n) for r in runs]) for n in CONSUMERS}
    out["lost"] = {n: sum(r["lost"][n] for r in runs) for n in CONSUMERS}
    out["runs"] = len(runs)
    return out


def loadavg() -> list[float]:
    return [round(float(x), 2) for x in Path("/proc/loadavg").read_text().split()[:3]]


def run(partitions: list[float], throttle_kbit: int, fetch_partition: float, repeats: int, folder: Path) -> dict:
    gym = Gym(folder)
    load_before = loadavg()
    runs: list[dict] = []
    try:
        gym.up()
        for _ in range(repeats):
            for seconds in partitions:
                runs.append(dict(gym.partition(seconds, None), kind="recovery"))
                print(f"partition {seconds:g} s: all caught up {runs[-1]['all_s']} s after", file=sys.stderr, flush=True)
            for kind, kbit in [("baseline", None), ("throttled", throttle_kbit)]:
                runs.append(dict(gym.partition(fetch_partition, kbit), kind=kind))
                print(f"{kind} {fetch_partition:g} s: all caught up {runs[-1]['all_s']} s after", file=sys.stderr, flush=True)
        end = gym.finish()
    finally:
        gym.down()
    journal = {m["seq"]: m for m in end.pop("journal")}
    live = gym.watched.live_seqs
    floor = 0
    for r in runs:
        r.update(fetched(r, journal, live, floor))
        floor = r["target_seq"]
    groups: dict[str, list[dict]] = {}
    for r in runs:
        groups.setdefault(f"{r['kind']} {r['partition_s']:g}", []).append(r)
    return {"partitions": partitions, "throttle_kbit": throttle_kbit, "fetch_partition_s": fetch_partition,
            "repeats": repeats, "load_before": load_before, "load_after": loadavg(), "cpus": os.cpu_count(),
            "summary": {k: summarise(v) for k, v in groups.items()}, "runs": runs, "end": end, "folder": str(folder)}


def report(result: dict) -> str:
    def show(value) -> str:
        return "-" if value is None else f"{value:g}"

    def lost(counts: dict[str, int]) -> str:
        return ", ".join(f"{n} {c}" for n, c in counts.items() if c) or "0"

    lines = [f"The gym's network: recovery after a partition (medians of {result['repeats']}; load "
             f"{' '.join(map(str, result['load_before']))} before, {' '.join(map(str, result['load_after']))} after)",
             "", "| run | link | " + " | ".join(CONSUMERS) + " | all caught up s | missed readings | readings/s | "
             "payload KB/s | link KB/s | lost |", "|---" * (9 + len(CONSUMERS)) + "|"]
    for name, s in result["summary"].items():
        kind = name.split()[0]
        link = f"{result['throttle_kbit']} kbit/s" if kind == "throttled" else "as built"
        lines.append(f"| {name} s | {link} | " + " | ".join(show(s["caught_up_s"][n]) for n in CONSUMERS)
                     + f" | {show(s['all_s'])} | {show(s['missed_readings'])} | {show(s['readings_per_s'])} | "
                     f"{show(s['payload_kb_per_s'])} | {show(s['link_kb_per_s'])} | {lost(s['lost'])} |")
    end = result["end"]
    lines += ["", f"journal: {end['last_seq']} messages, {end['readings']} readings; missing from the store "
              f"{end['missing_from_store']}, store lost {end['store_lost']}, consumers lost {end['consumers_lost']}"
              + (f"; exited: {end['exited']}" if end["exited"] else "")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=float, nargs="+", default=[10, 30, 120], metavar="S",
                        help="partition lengths, seconds (default: 10 30 120)")
    parser.add_argument("--throttle-kbit", type=int, default=1000, metavar="KBIT",
                        help="the throttled link's rate, kbit/s (default: 1000)")
    parser.add_argument("--fetch-partition", type=float, default=30, metavar="S",
                        help="the partition before each fetch-rate run, throttled and not (default: 30)")
    parser.add_argument("--repeats", type=int, default=1, metavar="N", help="runs of each (default: 1); medians reported")
    parser.add_argument("--json", metavar="FILE", help="also write the whole result as JSON to FILE")
    parser.add_argument("--folder", metavar="DIR", help="logs, keys and the store here (default: a new temporary folder)")
    for internal in ["--fetch-journal", "--endpoint", "--server-key", "--cert", "--src", "--last"]:
        parser.add_argument(internal, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fetch_journal:
        fetch_journal(args.endpoint, args.server_key, args.cert, args.src, int(args.last), Path(args.fetch_journal))
        return 0
    missing = namespaces_available() or next((f"needs {t}" for t in ["nft", "tc"] if not shutil.which(t)), None)
    if missing:
        print(f"partition_bench: {missing}", file=sys.stderr)
        return 2
    folder = Path(args.folder) if args.folder else Path(tempfile.mkdtemp(prefix="vbt-partition-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"logs in {folder}", file=sys.stderr, flush=True)
    result = run(args.partitions, args.throttle_kbit, args.fetch_partition, args.repeats, folder)
    print(report(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    end = result["end"]
    clean = end["missing_from_store"] == 0 and end["store_lost"] == 0 and not any(end["consumers_lost"].values())
    return 0 if clean and not end["exited"] else 1


if __name__ == "__main__":
    sys.exit(main())
