"""The load test as a benchmark (`make bench`): a whole installation on this
computer (bus, rep-detector, posture-evaluator, session-recorder, notifier, each run as
its systemd unit runs it: journals, state files, the bus's memory budget, its `Nice=` and real-time priority), and `vbt loadtest` replaying a
recording of the three simulated stations of `make run` (a squat rack with a laser at
50 Hz, a bar IMU at 100 Hz and a posture wearable at 20 Hz; a bench and a platform with
the laser and the IMU: about 150 readings a second a station) at each N stations.

Prints, per N and per stagger (the copies' starts spread over 2 s, `vbt loadtest`'s
default, then all at once: the worst case, where every copy completes a rep on the same
reading), what `vbt loadtest --json` reports (readings/s, reps against expected,
lost per consumer, completing reading -> rep p50/p99/max, CPU and RSS of each daemon),
and checks the report against an independent count: the database's reps at the
replayed stations. A run holds with nothing lost, p99 within 5 ms and every daemon's peak
memory within 50 MB (`RSS_GOAL_MB`). The raw libzmq baseline of the same `make bench` run is vbt-bench's
bus section, printed before this.

From 500 stations the rep-detector runs as a gym that size runs it, split in two
(`--detector-shards`, deploy/README.md "Splitting the rep-detector"): `rep-detector@1` and `@2`,
`--shard K/2`, each its own journal and patterns file; each is reported as its own process.

Each run also prints where a rep's time went (`vbt loadtest`'s stages: bridge, to the detector,
in the detector, to the listener; p50/p99/max) and the stage that holds the tail. `--repeat N`
runs each count N times back to back (a goal held once may be luck); `--hog` runs each count
once more beside a CPU-bound process at normal priority (`vbt eval` of the recording, over and
over), as a gym's server runs backups and reports beside the rep path.

Run from the repository root:
    VBT_BIN_DIR=$(swift build -c release --show-bin-path) python3 tests/python/loadtest_bench.py \\
        [--stations 9 1000] [--stagger 2 0] [--duration 40] [--probes 100] [--repeat 1] [--hog] [--folder DIR]
        [--detector-shards N]
A --folder keeps its recording between runs (making one takes about 2 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fault_run  # noqa: E402
from test_wire import binary  # noqa: E402

# `make run`'s stations (scripts/run.sh), with the sensor-bridge's default rates, recorded
# in real time with readings batched up to 20 ms, as the load test first ran (about 70 messages
# a second a station; a bridge now publishes each reading at once when idle, up to 170 a
# second). Until 2026-11-28 the recording was simulated at 4 times real time, so a 20 ms batch
# held 80 ms of readings: about 25 messages a second a station, as many readings.
BATCHED = ("--batch-delay", "0.02")
MAKE_RUN_STATIONS = [
    fault_run.SimStation("rack", "squat", 100, 140, 1, "ana", ("--posture-rate", "20", *BATCHED)),
    fault_run.SimStation("bench", "bench", 70, 95, 2, "ben", BATCHED, (("rom_mm", 355),)),
    fault_run.SimStation("platform", "deadlift", 140, 180, 3, "cleo", BATCHED),
]
DAEMONS = ["vbt-bus", "session-recorder", "rep-detector", "posture-evaluator", "notifier"]
# From this many stations the detectors are split in two, as deploy/README.md advises a gym that
# size: one detector at 1,002 stations held 79-80 MB (over the 50 MB a daemon may) and completed a
# lockstep wave's ~1,000 reps on one thread (p99 66 ms).
SPLIT_FROM_STATIONS = 500


def detector_shards(stations: int, asked: int | None) -> int:
    """How many rep-detectors run at `stations`: `asked`, else 2 from SPLIT_FROM_STATIONS, else 1."""
    return asked if asked else (2 if stations >= SPLIT_FROM_STATIONS else 1)


def daemons(shards: int) -> list[str]:
    """The daemons' names, each shard its own (`rep-detector-1`, `rep-detector-2`), as their heartbeats name them."""
    detectors = ["rep-detector"] if shards == 1 else [f"rep-detector-{k}" for k in range(1, shards + 1)]
    return [d for name in DAEMONS for d in (detectors if name == "rep-detector" else [name])]
# The memory each daemon may hold at its peak, as the gym-scale goal asks of a release build
# (`vbt loadtest`'s own default, 100 MB, also fits debug builds, whose mapped files are 30 MB).
RSS_GOAL_MB = 50
# The load generator, on the same two cores (`vbt loadtest` reads its CPU before stopping it).
REPLAY = "sensor-bridge (replay)"


UNITS = Path(__file__).resolve().parents[2] / "deploy" / "systemd"


def unit_scheduling(name: str) -> tuple[int, int]:
    """The `Nice=` and `CPUSchedulingPriority=` (with `CPUSchedulingPolicy=rr`) of the daemon's systemd
    unit, 0 without: the rep path (the bus, the rep-detector) real-time, ahead of the work that waits in
    queues (deploy/README.md, "Priorities"). Both take root (CAP_SYS_NICE), as systemd has; without it,
    only a lowered niceness applies."""
    settings = dict(line.split("=", 1) for line in (UNITS / f"{name}.service").read_text().splitlines()
                    if "=" in line and not line.startswith("#"))
    nice = int(settings.get("Nice", 0))
    rr = int(settings.get("CPUSchedulingPriority", 0)) if settings.get("CPUSchedulingPolicy") == "rr" else 0
    if (nice < 0 or rr) and os.geteuid() != 0:
        print(f"  {name}: the unit's Nice={nice}, SCHED_RR {rr} need root; run at {max(nice, 0)} under the normal scheduler",
              file=sys.stderr)
        return max(nice, 0), 0
    return nice, rr


def unit_option(name: str, option: str) -> list[str]:
    """`option` and its value as the daemon's systemd unit's ExecStart gives them ([] without): the
    bus runs with the unit's memory budget (`--memory-budget-mb`), as it would in the gym."""
    for line in (UNITS / f"{name}.service").read_text().splitlines():
        if line.startswith("ExecStart="):
            words = line.split()
            if option in words[:-1]:
                return [option, words[words.index(option) + 1]]
    return []


def recording(folder: Path, sims: list[fault_run.SimStation] = MAKE_RUN_STATIONS, how: str = "batched up to 20 ms") -> Path:
    """`sims` recorded once a folder, in real time (2 sets of 5, 20 s rests: about 70 s)."""
    path = folder / "recording.jsonl"
    if not path.exists():
        fault_run.log(f"recording make run's three stations in real time, {how} (about 70 s)")
        fault_run.make_recording(folder, fault_run.Profile(sets=2, reps=5, rest_s=20, kills=0, stations=len(sims)),
                                 sim_speed=1, sims=sims)
    return path


def run_once(rec: Path, stations: int, duration: float, folder: Path, stagger: float = 2, probes: int = 100,
             replay_journal: bool = False, shards: int = 1) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "vbt.sqlite"
    query = f"tcp://127.0.0.1:{fault_run.free_port()}"
    node = fault_run.Node(folder, {"VBT_QUERY_ENDPOINT": query, "VBT_DB": str(db)})
    journal = folder / "journal"
    commands = {
        "vbt-bus": ["vbt-bus", *unit_option("vbt-bus", "--memory-budget-mb")],
        "session-recorder": ["session-recorder", "--db", str(db), "--query-endpoint", query],
        "posture-evaluator": ["posture-evaluator", "--calibrations", str(folder / "calibrations.json"),
                              "--journal", str(journal / "posture-evaluator")],
        "notifier": ["notifier", "--state", str(folder / "notifier.json"), "--journal", str(journal / "notifier")],
    }
    # As the units run them: rep-detector.service, or rep-detector@K.service with --shard K/N, each
    # its own journal and patterns file.
    units = {name: name for name in DAEMONS}
    if shards == 1:
        commands["rep-detector"] = ["rep-detector", "--patterns", str(folder / "patterns.json"), "--journal", str(journal / "rep-detector")]
    for k in range(1, shards + 1) if shards > 1 else []:
        commands[f"rep-detector-{k}"] = ["rep-detector", "--shard", f"{k}/{shards}", "--patterns", str(folder / f"patterns-{k}.json"),
                                         "--journal", str(journal / f"rep-detector-{k}")]
        units[f"rep-detector-{k}"] = "rep-detector@"
    try:
        # Each started as fault_run starts it, and at work before the next (and the replay) starts.
        for name in daemons(shards):
            nice, rr = unit_scheduling(units[name])
            node.spawn(name, commands[name], nice, rr)
            for needle in fault_run.Installation.ready(name):
                node.current[name].wait_for_log(needle, timeout=60)
        result = subprocess.run([binary("vbt"), "loadtest", "--recording", str(rec), "--stations", str(stations),
                                 "--duration", str(duration), "--stagger", str(stagger), "--probes", str(probes), "--json", "--svg", str(folder / "loadtest.svg"),
                                 "--timings", str(folder / "timings.csv"), "--rss-goal-mb", str(RSS_GOAL_MB),
                                 *(["--journal", str(folder / "replay-journal")] if replay_journal else [])],
                                env=node.env, capture_output=True, text=True, timeout=duration + 300)
        if result.returncode != 0:
            raise RuntimeError(f"vbt loadtest exited {result.returncode}: {result.stderr[-2000:]}")
        report = json.loads(result.stdout)
        (folder / "report.json").write_text(result.stdout)
        report["db_reps"] = stored_reps(db, report["reps_received"])
        report["detector_shards"] = shards
        return report
    finally:
        node.stop_all()


def stored_reps(db: Path, received: int, quiet_s: float = 5, timeout_s: float = 120) -> int:
    """The database's reps once the recorder has caught up: as many as the report's, or no
    more coming for `quiet_s` (a recorder that fell behind writes its backlog after the run)."""
    deadline = time.monotonic() + timeout_s
    last, since = -1, time.monotonic()
    while True:
        with sqlite3.connect(db) as conn:
            count = conn.execute("SELECT count(*) FROM reps").fetchone()[0]
        if count != last:
            last, since = count, time.monotonic()
        if count >= received or time.monotonic() - since >= quiet_s or time.monotonic() >= deadline:
            return count
        time.sleep(0.5)


def show(report: dict) -> str:
    latency = report["latency_ms"]
    processes = {p["name"]: p for p in report["processes"]}
    # What no consumer has yet, fetched or given up: a loss not counted yet.
    lost = sum(report["lost"].values()) + sum(c.get("outstanding", 0) for c in report["consumers"].values())
    cells = [
        f"{report['stations']:>5}", f"{report.get('stagger_s', 0):4.1f} s", f"{report['readings_per_s'] / 1000:6.1f} k",
        f"{report['reps_received']:>5} / {report['reps_expected']:<5}", f"{lost:>4}",
        f"{latency['p50']:7.2f}", f"{latency['p99']:8.2f}", f"{latency['max']:8.1f}",
        "  ".join(f"{short(name)} {processes[name]['cpu_pct']:3.0f}% {processes[name]['rss_mb']:4.0f}/{processes[name]['rss_max_mb']:.0f}MB"
                  for name in daemons(report.get("detector_shards", 1)) if name in processes)
        + (f"  replay {processes[REPLAY]['cpu_pct']:3.0f}%" if REPLAY in processes else ""),
    ]
    return " | ".join(cells)


def short(name: str) -> str:
    """A daemon's name in a report line: its first word, and a detector's shard (`rep 2`)."""
    first, _, rest = name.partition("-")
    shard = rest.rsplit("-", 1)[-1] if first == "rep" and rest[-1:].isdigit() else ""
    return f"{first[:8]} {shard}".strip()


def show_stages(report: dict) -> str:
    """Where the timed reps' time went, a stage a line, and the stage holding the tail."""
    stages = report.get("stages") or {}
    lines = [f"    {name:<12} p50 {stages[name]['p50']:7.2f}  p99 {stages[name]['p99']:8.2f}  max {stages[name]['max']:8.1f} ms"
             for name in ("bridge", "to_detector", "detector", "to_listener") if name in stages]
    tail = stages.get("tail")
    if tail:
        lines.append(f"    the tail: {tail['stage']}, {tail['share'] * 100:.0f} % of the slowest {tail['reps']} reps' time")
    return "\n".join(lines) if lines else "    (no stages: the report has none)"


class Hog:
    """A CPU-bound process at normal priority beside the installation: `vbt eval` of the
    recording, again and again, until stopped."""

    def __init__(self, rec: Path, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        script = f'while :; do "{binary("vbt")}" eval "{rec}" --json > /dev/null 2>&1 || sleep 1; done'
        self.process = subprocess.Popen(["bash", "-c", script], start_new_session=True)

    def stop(self) -> None:
        os.killpg(self.process.pid, 15)
        self.process.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stations", type=int, nargs="+", default=[9, 1000], help="station counts (default 9 1000)")
    parser.add_argument("--stagger", type=float, nargs="+", default=[2, 0],
                        help="seconds over which the copies' starts are spread, each in turn (default 2 0)")
    parser.add_argument("--duration", type=float, default=40, help="seconds per count (default 40)")
    parser.add_argument("--folder", type=Path, help="keep the recording and the runs here")
    parser.add_argument("--probes", type=int, default=100,
                        help="stations whose reps are timed (1 to 100, default 100): a 40 s run times 5 reps each")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each count at the first stagger, back to back (default 1)")
    parser.add_argument("--hog", action="store_true",
                        help="then each count once more beside a CPU-bound process at normal priority (vbt eval in a loop)")
    parser.add_argument("--detector-shards", type=int, metavar="N",
                        help=f"rep-detectors splitting the gym (--shard K/N; default 2 from {SPLIT_FROM_STATIONS} stations, else 1)")
    parser.add_argument("--journal", action="store_true",
                        help="journal the replay as station bridges do (vbt loadtest --journal): what a consumer misses is fetched")
    args = parser.parse_args(argv)
    if args.detector_shards is not None and args.detector_shards < 1:
        parser.error("--detector-shards needs 1 or more")
    with tempfile.TemporaryDirectory(prefix="vbt-loadtest-") as scratch:
        folder = args.folder or Path(scratch)
        rec = recording(folder / "rec-realtime")
        print("stations | stagger | readings/s | reps received / expected | lost or still missing | p50 ms | p99 ms | max ms | CPU and RSS per daemon (at the end / the most it held)",
              flush=True)
        failures = 0
        # Per count: the first stagger `repeat` times back to back, the others once, then once
        # beside the hog.
        runs = [(n, s, False) for n in args.stations for i, s in enumerate(args.stagger) for _ in range(args.repeat if i == 0 else 1)]
        runs += [(n, args.stagger[0], True) for n in args.stations] if args.hog else []
        for stations, stagger, hogged in runs:
            hog = Hog(rec, folder / "hog") if hogged else None
            try:
                report = run_once(rec, stations, args.duration, folder / f"run-{stations}-{stagger}-{int(time.time())}", stagger,
                                  args.probes, args.journal, detector_shards(stations, args.detector_shards))
            finally:
                if hog:
                    hog.stop()
            print(show(report) + ("  [beside a CPU-bound vbt eval]" if hogged else ""), flush=True)
            print(show_stages(report), flush=True)
            slow = ", ".join(f"{rep['station']} {rep.get('sensor') or '?'} {rep['latency_ms']:.1f} ms ({rep['messages_after']} messages after)"
                             for rep in report.get("slowest", [])[:3])
            print(f"  slowest: {slow}", flush=True)
            machine, outside = report["machine_stalls"], report["latency_ms_outside_stalls"]
            print(f"  this computer ({machine['policy']}): woke over 2 ms late {machine['over_2ms']} times, over 5 ms "
                  f"{machine['over_5ms']}, worst {machine['worst_ms']:.1f} ms; the {outside['count']} reps it did not stall: "
                  f"p50 {outside['p50']:.2f} ms, p99 {outside['p99']:.2f} ms, max {outside['max']:.1f} ms", flush=True)
            print(f"  scheduled: listener {report['scheduling']['listener']}, replay {report['scheduling']['replay']}", flush=True)
            verdict = report["verdict"]
            print(f"  held (p99 <= {verdict['p99_goal_ms']:g} ms, every daemon <= {verdict['rss_goal_mb']:g} MB, nothing lost)"
                  if verdict["held"] else f"  did not hold: {'; '.join(verdict['short_of'])}", flush=True)
            if report["db_reps"] < report["reps_received"]:
                print(f"  the database holds {report['db_reps']} reps, fewer than the report's {report['reps_received']}")
                failures += 1
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
