#!/usr/bin/env python3
"""The Wi-Fi chaos run: is anything lost or doubled when the stations' links are bad?

A recording of three simulated stations (tests/python/fault_run.py's
make_recording, or --recording FILE) is replayed at speed 1 into two gyms
built in network namespaces as the multi-host test builds one
(tests/python/test_multihost.py), CURVE everywhere:

- a server: vbt-bus, session-recorder, rep-detector, posture-evaluator and
  notifier, each journalling where it can;
- three station computers, each in a mount namespace of its own with a tmpfs
  for a disk, each replaying its own station (`sensor-bridge --replay FILE
  --t0 T`) and journalling on that disk, its journal offered on
  `tcp://<station>:7801` (service keys only).

The CLEAN gym is left alone. In the CHAOS gym, from the replay's start on
(nftables and tc tbf: this kernel has no netem), every station drops 10 % of
its packets at random; the first station is partitioned (every packet
dropped) twice; the second's link is throttled to 1 Mbit/s with a 2 s queue;
the third's link goes down and up every few seconds. With --kill-bus the bus
is killed (SIGKILL) during the first partition and started again within it.

Both gyms replay at the same --t0 (the same reading times, so the same rep
ids). Once both stores have settled they are compared with fault_run's
compare: readings, reps (and every metric), sets (none left open), rejected
attempts, posture changes and alerts. The report says what was degraded
when, the counts compared, and how long after each partition's end every
server program had fetched what it missed (its `caught up` log line).

    python3 tests/python/chaos_run.py --short [--kill-bus] [--recording FILE] [--folder DIR] [--json]

exits 0 when nothing is lost, doubled, different or left open. Needs root
(ip netns, unshare, mount), nft and tc. tests/python/test_chaos.py runs the
short version; `make soak` the long one (a 5-minute recording, 30 s partitions).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fault_run  # noqa: E402
from test_multihost import Host, namespaces_available  # noqa: E402
from test_network_partition import Network  # noqa: E402
from test_wire import binary, wait_until  # noqa: E402

# The server and three station computers; the station computers in the order the
# degradations below are applied to them (the recording's stations, sorted, in turn).
HOSTS = {"srv": 1, "sa": 11, "sb": 12, "sc": 13}
STATION_HOSTS = ["sa", "sb", "sc"]
SERVICES = ["session-recorder", "rep-detector", "posture-evaluator", "notifier"]
REPLAY_PORT = 7801


@dataclass(frozen=True)
class Scale:
    """How long a run is: the recording, and the partitions' length."""
    profile: fault_run.Profile
    partition_s: float


SHORT = Scale(fault_run.SHORT, partition_s=8.0)
LONG = Scale(fault_run.LONG, partition_s=30.0)


def log(message: str) -> None:
    print(f"[chaos-run {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def missing_tools() -> str | None:
    """Why this run cannot be made here, or None."""
    reason = namespaces_available()
    if reason:
        return reason
    for tool in ["nft", "tc", "unshare"]:
        if not shutil.which(tool):
            return f"needs {tool} (apt-get install nftables iproute2 util-linux)"
    return None


def split_recording(path: Path, folder: Path) -> tuple[dict[str, Path], list[dict]]:
    """One file per station (its readings and statuses), and the recording's commands.
    The commands are given by a coach's key before the replay (a replay's service key may
    publish only readings and statuses)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines: dict[str, list[str]] = {}
    commands = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = json.loads(raw)
        kind, station = line["topic"].split(".", 1)
        if kind == "cmd":
            commands.append({"topic": line["topic"], "body": {k: line["msg"][k] for k in ("id", "command", "target", "args")}})
        elif kind in ("sample", "status"):
            lines.setdefault(station, []).append(raw)
    files = {}
    for station, station_lines in sorted(lines.items()):
        files[station] = folder / f"{station}.jsonl"
        files[station].write_text("\n".join(station_lines) + "\n", encoding="utf-8")
    return files, commands


class Gym:
    """One gym in its own namespaces and subnet: keys, the server's programs, the station computers."""

    def __init__(self, name: str, folder: Path, subnet: str, prefix: str, stations: dict[str, Path]):
        self.name, self.folder, self.subnet, self.t0 = name, folder, subnet, 0.0
        folder.mkdir(parents=True, exist_ok=True)
        self.net = Network(HOSTS, subnet, prefix)
        self.server = f"{subnet}.{HOSTS['srv']}"
        self.station_of = dict(zip(STATION_HOSTS, sorted(stations)))
        self.files = stations
        self.keys = folder / "keys"
        self.db = folder / "vbt.sqlite"
        # fault_run's commands for the server's programs, so both runs start them alike; their query
        # endpoint is on the server's loopback.
        self.recipe = fault_run.Installation(name, folder, fault_run.describe_recording(next(iter(stations.values()))), 1, 0.0)
        self.base = {k: v for k, v in os.environ.items() if not k.startswith("VBT_")}
        self.base.update(VBT_LOG_LEVEL="info", VBT_PUB_ENDPOINT=f"tcp://{self.server}:7701",
                         VBT_SUB_ENDPOINT=f"tcp://{self.server}:7702", VBT_QUERY_ENDPOINT=self.recipe.query_endpoint,
                         VBT_BUS_CERT=str(self.keys / "server.key"))
        self.server_env = {"VBT_SERVER_CERT": str(self.keys / "server.key_secret"), "VBT_AUTHORIZED": str(self.keys / "authorized")}
        self.current: dict[str, Host] = {}
        self.generations: list[Host] = []
        self.started_wall = 0.0

    def client(self, name: str) -> dict[str, str]:
        return dict(self.base, VBT_CERT=str(self.keys / "clients" / f"{name}.key_secret"))

    def make_keys(self) -> None:
        def keys(*args: str) -> None:
            subprocess.run([binary("vbt"), "keys", *args], env=self.base, check=True, capture_output=True, timeout=30)
        keys("init", str(self.keys))
        for service in [*SERVICES, "sensor-bridge"]:
            keys("add", str(self.keys), service, "--role", "service")
        keys("add", str(self.keys), "coach", "--role", "coach")

    def start(self, name: str, host: str, argv: list[str], env: dict[str, str]) -> Host:
        generation = sum(1 for h in self.generations if h.name.startswith(name + "."))
        started = Host(f"{name}.{generation}", self.net.ns[host], argv, env, self.folder)
        self.current[name] = started
        self.generations.append(started)
        return started

    def wait_log(self, name: str, needle: str, timeout: float = 60) -> None:
        host = self.current[name]
        wait_until(lambda: needle in host.stderr_path.read_text(errors="replace"), f"{self.name}: {name} to log {needle!r}",
                   timeout=timeout, interval=0.1, detail=self.describe)

    def start_server(self, name: str, wait: bool = True) -> None:
        argv = [binary(self.recipe.commands[name][0]), *self.recipe.commands[name][1:]]
        env = dict(self.base, **self.server_env) if name == "vbt-bus" else self.client(name)
        if name == "session-recorder":
            env.update(self.server_env)
        self.start(name, "srv", argv, env)
        if wait:
            self.wait_ready(name)

    def wait_ready(self, name: str) -> None:
        for needle in fault_run.Installation.READY[name]:
            self.wait_log(name, needle)

    def start_all(self) -> None:
        """The network, the keys, the server's programs, and the recording's commands given by a coach."""
        self.make_keys()
        self.net.build()
        for name in ["vbt-bus", *SERVICES]:
            self.start_server(name)

    def give_commands(self, commands: list[dict]) -> None:
        for command in commands:
            subprocess.run(["ip", "netns", "exec", self.net.ns["srv"], binary("vbt"), "pub", command["topic"],
                            json.dumps(command["body"])], env=self.client("coach"), check=True, capture_output=True,
                           timeout=30, stdin=subprocess.DEVNULL)

    def start_stations(self) -> None:
        """Each station computer replays its own station, journalling on its own disk: a tmpfs
        mounted in a mount namespace of its own, which no other "computer" sees."""
        for host, station in self.station_of.items():
            disk = self.folder / f"disk-{host}"
            disk.mkdir()
            address = f"{self.subnet}.{HOSTS[host]}"
            # --station: the computer's station, which a replay's heartbeat must name for the server's
            # programs to ask this computer, not another, for what they missed of its streams.
            bridge = [binary("sensor-bridge"), "--replay", str(self.files[station]), "--station", station,
                      "--speed", "1", "--t0", f"{self.t0:.6f}",
                      "--journal", str(disk / "journal"), "--replay-endpoint", f"tcp://{address}:{REPLAY_PORT}",
                      "--linger", "3600"]
            self.start(f"bridge-{station}", host, ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                                   'mount -t tmpfs vbt-station "$0" && exec "$@"', str(disk), *bridge],
                       dict(self.client("sensor-bridge"), VBT_AUTHORIZED=str(self.keys / "authorized")))
        self.started_wall = time.time()

    def reading_time(self, station: str, wall: float) -> float:
        """The reading time `station`'s replay had reached at wall time `wall` (speed 1)."""
        first = fault_run.describe_recording(self.files[station]).first_reading_line_t
        return self.t0 + (wall - self.started_wall) - first

    def replay_done(self) -> bool:
        """Every station has published its last reading (each lingers, answering from its journal)."""
        bridges = [self.current[f"bridge-{station}"] for station in self.station_of.values()]
        return all(b.proc.poll() is not None or "sources finished" in b.stderr_path.read_text(errors="replace") for b in bridges)

    def kill(self, name: str) -> None:
        self.current[name].proc.send_signal(signal.SIGKILL)
        self.current[name].proc.wait(timeout=10)

    def describe(self) -> str:
        return "\n".join(h.describe() for h in self.current.values())

    CAUGHT_UP = fault_run.Installation.CAUGHT_UP

    def caught_up_times(self) -> list[tuple[str, float]]:
        """Every server program's `caught up` line (it has fetched all it missed), as (program, wall time)."""
        found = []
        for host in self.generations:
            if host.name.split(".")[0] not in SERVICES:
                continue
            for line in host.stderr_path.read_text(errors="replace").splitlines():
                match = self.CAUGHT_UP.search(line) if "caught up" in line else None
                if match:
                    found.append((host.name, float(match.group(1) or match.group(2))))
        return sorted(found, key=lambda item: item[1])

    def log_lines(self, needles: tuple[str, ...] = ("error", "critical", "lost")) -> dict[str, list[str]]:
        found = {}
        for host in self.generations:
            lines = [line for line in host.stderr_path.read_text(errors="replace").splitlines()
                     if any(needle in line.lower() for needle in needles)]
            if lines:
                found[host.name] = lines[:20]
        return found

    def stop(self) -> None:
        for host in reversed(self.generations):
            host.stop()
        self.net.tear_down()


# --------------------------------------------------------------------------
# The degradations


@dataclass
class Event:
    """One degradation, in seconds after the chaos gym's replay started."""
    what: str
    host: str
    start_s: float
    end_s: float | None = None  # None: until the end of the run
    end_wall: float | None = None  # partitions: when the link was whole again (wall time)
    caught_up_s: float | None = None  # partitions: from their end until every program caught up
    stored_s: float | None = None  # partitions: from their end until the store held the station's readings up to it
    detail: list[tuple[float, float]] = field(default_factory=list)


class Chaos:
    """Applies the schedule to a gym's links in a thread of its own, and writes down when."""

    def __init__(self, gym: Gym, duration_s: float, partition_s: float, kill_bus: bool, seed: int):
        self.gym, self.rng = gym, random.Random(seed)
        self.stop = threading.Event()
        sa, sb, sc = STATION_HOSTS
        first, second = 0.2 * duration_s, 0.6 * duration_s
        self.partitions = [Event("partitioned (every packet dropped)", sa, first, first + partition_s),
                           Event("partitioned (every packet dropped)", sa, second, second + partition_s)]
        self.flap_from, self.flap_to = 0.1 * duration_s, 0.9 * duration_s
        self.events: list[Event] = [
            *(Event("10 % of packets dropped at random", host, 0.0) for host in STATION_HOSTS),
            Event("throttled to 1 Mbit/s, a 2 s queue (tc tbf)", sb, 0.0),
            *self.partitions,
        ]
        self.flaps = Event("link flapping (ip link down/up)", sc, self.flap_from, self.flap_to)
        self.events.append(self.flaps)
        self.bus_kill: Event | None = None
        if kill_bus:
            kill_at = first + partition_s / 3
            self.bus_kill = Event("vbt-bus killed (SIGKILL), restarted", "srv", kill_at, kill_at + partition_s / 3)
            self.events.append(self.bus_kill)
        self.errors: list[str] = []
        self.threads: list[threading.Thread] = []

    def at(self, offset_s: float) -> None:
        """Waits until `offset_s` after the replay's start (the schedule is the experiment)."""
        self.stop.wait(max(0.0, self.gym.started_wall + offset_s - time.time()))

    def run_links(self) -> None:
        net, (sa, sb, _) = self.gym.net, STATION_HOSTS
        for host in STATION_HOSTS:
            net.drop(host, 10)
        net.throttle(sb, "1mbit", latency_ms=2000)
        for partition in self.partitions:
            self.at(partition.start_s)
            if self.stop.is_set():
                return
            net.drop(sa, 100)
            log(f"chaos: {sa} partitioned for {partition.end_s - partition.start_s:.0f} s")
            self.at(partition.end_s)
            net.drop(sa, 10)
            partition.end_wall = time.time()
            threading.Thread(target=self.time_store, args=(partition,), daemon=True).start()

    def time_store(self, partition: Event, timeout_s: float = 60.0) -> None:
        """How long after `partition` the store holds every reading its station sent up to its end:
        no hole in the station's reading stream, and readings stored from the reading time the
        replay had reached at the end (less a second: the replay's start is known to a second)."""
        assert partition.end_wall is not None
        station = self.gym.station_of[partition.host]
        reached = self.gym.reading_time(station, partition.end_wall) - 1.0
        deadline = partition.end_wall + timeout_s
        while not self.stop.is_set() and time.time() < deadline:
            try:
                with fault_run.connect(self.gym.db) as db:
                    latest = db.execute("SELECT max(t) FROM sample_batches WHERE station = ?", (station,)).fetchone()[0]
                    holes = db.execute("SELECT count(*) FROM source_holes WHERE src LIKE ?", (f"%/sample.{station}",)).fetchone()[0]
            except sqlite3.Error:
                latest, holes = None, 1
            if latest is not None and latest >= reached and holes == 0:
                partition.stored_s = round(time.time() - partition.end_wall, 2)
                return
            time.sleep(0.25)

    def run_flaps(self) -> None:
        self.at(self.flap_from)
        periods, total = [], 0.0
        while total < self.flap_to - self.flap_from:
            down, up = round(self.rng.uniform(1.0, 7.0), 1), round(self.rng.uniform(2.0, 5.0), 1)
            periods.append((down, up))
            total += down + up
        stop = threading.Event()
        watcher = threading.Thread(target=lambda: (self.at(self.flap_to), stop.set()), daemon=True)
        watcher.start()
        self.flaps.detail = self.gym.net.flap(STATION_HOSTS[2], periods, stop)

    def run_bus_kill(self) -> None:
        assert self.bus_kill is not None and self.bus_kill.end_s is not None
        self.at(self.bus_kill.start_s)
        if self.stop.is_set():
            return
        self.gym.kill("vbt-bus")
        log("chaos: vbt-bus killed")
        self.at(self.bus_kill.end_s)
        self.gym.start_server("vbt-bus", wait=False)
        self.gym.wait_ready("vbt-bus")

    def start(self) -> None:
        jobs = [self.run_links, self.run_flaps] + ([self.run_bus_kill] if self.bus_kill else [])
        for job in jobs:
            def guarded(job=job) -> None:
                try:
                    job()
                except Exception as error:  # reported, and the run fails
                    self.errors.append(f"{job.__name__}: {error}")
            thread = threading.Thread(target=guarded, daemon=True)
            thread.start()
            self.threads.append(thread)

    def end(self) -> None:
        """Every link whole again: no drops, no throttle, up."""
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)
        for host in STATION_HOSTS:
            self.gym.net.drop(host, 0)
            self.gym.net.throttle(host, None)
            self.gym.net.link(host, "up")

    def time_recovery(self, window_s: float = 60.0) -> None:
        """Per partition: from its end until the last `caught up` line within `window_s` (or the next partition)."""
        caught = self.gym.caught_up_times()
        for index, partition in enumerate(self.partitions):
            end = partition.end_wall
            if end is None:
                continue
            until = min(end + window_s, self.gym.started_wall + self.partitions[index + 1].start_s
                        if index + 1 < len(self.partitions) else math.inf)
            times = [at for _, at in caught if end <= at < until]
            partition.caught_up_s = round(max(times) - end, 2) if times else None


# --------------------------------------------------------------------------
# The run


def run(folder: Path, scale: Scale, kill_bus: bool, seed: int, recording: Path | None, quiet_s: float,
        settle_timeout: float) -> dict[str, Any]:
    started = time.monotonic()
    folder.mkdir(parents=True, exist_ok=True)
    if recording is None:
        profile = scale.profile
        log(f"recording 3 simulated stations ({profile.sets} sets of {profile.reps}, {profile.rest_s:.0f} s rests)")
        recording = fault_run.make_recording(folder / "recording", profile, sims=fault_run.SIM_STATIONS[:3])
    info = fault_run.describe_recording(recording)
    if len(info.stations) != len(STATION_HOSTS):
        raise SystemExit(f"{recording}: {len(info.stations)} stations ({info.stations}); the chaos run replays 3")
    files, commands = split_recording(recording, folder / "stations")
    log(f"recording: {info.duration_s:.0f} s, {info.readings} readings, stations {info.stations}")
    gyms = [Gym("clean", folder / "clean", "10.79.0", "cq", files), Gym("chaos", folder / "chaos", "10.79.1", "c", files)]
    clean, chaotic = gyms
    chaos = Chaos(chaotic, info.duration_s, scale.partition_s, kill_bus, seed)
    settled: dict[str, bool] = {}
    try:
        for gym in gyms:
            gym.start_all()
            gym.give_commands(commands)
        # The same reading times in both gyms, so the same rep ids.
        t0 = math.floor(time.time()) + 2.0
        for gym in gyms:
            gym.t0 = t0
            gym.start_stations()
            log(f"{gym.name}: 3 station computers replaying at speed 1, --t0 {t0:.0f}")
        chaos.start()
        wait_until(lambda: all(gym.replay_done() for gym in gyms), "the replays to end", timeout=info.duration_s + 120,
                   interval=0.5, detail=lambda: "\n".join(gym.describe() for gym in gyms))
        chaos.end()
        log("replays over, every link whole again; waiting for the stores to settle")
        settled = fault_run.wait_settled(gyms, quiet_s, settle_timeout)
        logs = {gym.name: gym.log_lines() for gym in gyms}
    finally:
        chaos.stop.set()
        for gym in gyms:
            gym.stop()
    result = fault_run.compare(clean.db, chaotic.db)
    for entry in result["categories"].values():
        entry.pop("_lost_all", None)
        entry.pop("_doubled_all", None)
    chaos.time_recovery()
    result["problems"].extend(f"the chaos schedule failed: {error}" for error in chaos.errors)
    for name, ok in settled.items():
        if not ok:
            result["problems"].append(f"{name} run: the store kept changing for {settle_timeout:.0f} s after the replay")
    result["ok"] = not result["problems"]
    result["chaos"] = [{"what": e.what, "host": e.host, "station": chaotic.station_of.get(e.host, "server"),
                        "from_s": round(e.start_s, 1), "to_s": round(e.end_s, 1) if e.end_s is not None else None,
                        "caught_up_s": e.caught_up_s, "stored_s": e.stored_s,
                        "flaps": [[round(a - chaotic.started_wall, 1), round(b - chaotic.started_wall, 1)] for a, b in e.detail]}
                       for e in chaos.events]
    result["log_lines"] = logs
    result["bus_starts"] = sum(1 for host in chaotic.generations if host.name.startswith("vbt-bus."))
    result["run"] = {"seed": seed, "kill_bus": kill_bus, "recording": str(recording), "recording_s": round(info.duration_s, 1),
                     "recording_readings": info.readings, "partition_s": scale.partition_s, "folder": str(folder), "t0": t0,
                     "seconds": round(time.monotonic() - started, 1)}
    return result


def format_report(result: dict) -> str:
    run_info = result["run"]
    out = [f"chaos run: recording {run_info['recording_s']} s ({run_info['recording_readings']} readings, 3 stations), "
           f"partitions {run_info['partition_s']:.0f} s, seed {run_info['seed']}"
           + (", the bus killed during the first partition" if run_info["kill_bus"] else ""),
           f"time: {run_info['seconds']} s; folder {run_info['folder']}", "", "degraded (seconds after the replay's start):"]
    for event in result["chaos"]:
        span = f"{event['from_s']:>6}-{event['to_s'] if event['to_s'] is not None else 'end'}"
        line = f"  {event['host']} ({event['station']}): {event['what']}, {span} s"
        if event["flaps"]:
            longest = max(b - a for a, b in event["flaps"])
            line += f", {len(event['flaps'])} times down (longest {longest:.1f} s)"
        if event["what"].startswith("partitioned"):
            line += (f"; its readings stored {event['stored_s']} s after it ended" if event["stored_s"] is not None
                     else "; its readings NOT stored within 60 s of its end")
            line += (f", the last `caught up` of a server program (any station's) {event['caught_up_s']} s after"
                     if event["caught_up_s"] is not None else ", no server program logged `caught up` within 60 s")
        out.append(line)
    # fault_run's table of the comparison ("faulted" is the chaos gym).
    comparison = fault_run.format_report({k: v for k, v in result.items() if k not in ("run", "kills", "recovery", "diagnosis")})
    out.append(comparison.replace("faulted", "chaos").replace("OK: nothing lost, doubled or left open",
                                                               "OK: nothing lost, doubled, different or left open"))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--short", action="store_true",
                        help="a recording of about 80 s and 8 s partitions (CI) instead of about 5 minutes and 30 s partitions")
    parser.add_argument("--kill-bus", action="store_true", help="kill vbt-bus (SIGKILL) during the first partition and restart it")
    parser.add_argument("--seed", type=int, default=1, help="seeds the flapping link's down and up times (default 1)")
    parser.add_argument("--recording", type=Path, help="replay this recording of 3 stations instead of making one")
    parser.add_argument("--folder", type=Path, help="where the run keeps its databases and logs (default: a new temporary folder)")
    parser.add_argument("--quiet", type=float, default=15.0, help="seconds a store must stay unchanged to count as settled")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    reason = missing_tools()
    if reason:
        parser.error(f"cannot build the namespaces: {reason}")
    folder = args.folder or Path(tempfile.mkdtemp(prefix="vbt-chaos-run-"))
    result = run(folder, SHORT if args.short else LONG, args.kill_bus, args.seed, args.recording, args.quiet, settle_timeout=240.0)
    (folder / "report.json").write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    print(json.dumps(result, indent=2, default=str) if args.json else format_report(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
