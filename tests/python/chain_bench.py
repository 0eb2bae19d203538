"""The chain benchmark (`make bench`): many gyms uplinking at once to one PostgreSQL on this computer.

`--gyms` gym stores (default 50) of `--stations` stations each (default 20) are made directly in
SQLite with the recorder's own schema (a session-recorder started once makes an empty store, which
is copied; one gym's history is made and copied to every gym, as the chain store keys every
row by its gym): per station and day of `--days` of history one session of 4 sets of 5 reps, each set
with a refused attempt and a load-velocity profile, 2 athletes per station. The history ends two
days before the run, outside the uplinks' refresh window, as a gym's older training is.

One PostgreSQL (tests/python/test_chain.py's Chain: TLS with client certificates, the chain
schema from `vbt chain init`, a role per gym from `vbt chain add-gym`) and then one vbt-uplink per
gym, all started at once (`--interval`, `--batch`). Measured:
- catch-up: the history's rows over the time from the uplinks' start until all are in the chain
  store (polled every 0.2 s);
- lag: then, for `--live-s` seconds, each gym's stations train on (a session and a set per
  station, a rep per station every `--rep-every-s`), written into the gym's SQLite with their wall
  time; a rep's lag is from its commit there to the first poll of the chain store (every 0.2 s,
  so up to 0.2 s late) that has it. p50 and p99 per gym and over all;
- per uplink: CPU seconds (utime + stime from /proc/PID/stat) for the catch-up and for the live
  part, and its peak resident size (VmHWM from /proc/PID/status) at the end;
- the baseline, in the same run once the uplinks have stopped: PostgreSQL's own COPY of the same
  history rows (CSV through `psql \\copy` over the Unix socket, one connection) into tables made
  `LIKE` the chain's (keys and indexes, no row-level security), timed.

Prints a table and writes `--json`. Run from the repository root with the release build, as
`make bench` does (about 3 minutes at the default size):
    VBT_BIN_DIR=$(swift build -c release --show-bin-path) python3 tests/python/chain_bench.py \\
        [--gyms 50] [--stations 20] [--days 5] [--live-s 30] [--json FILE] [--folder DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import signal
import sqlite3
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# The template store's bus is on loopback without keys, as under pytest (tests/python/conftest.py).
os.environ.setdefault("VBT_INSECURE", "1")

from test_chain import COLUMNS, Chain  # noqa: E402
from test_recorder import Recorder  # noqa: E402
from test_wire import BIN_DIR, Bus, wait_until  # noqa: E402

HISTORY_TABLES = ["athletes", "sessions", "sets", "reps", "rejected", "profiles"]
DAY = 86_400.0
CLOCK_TICK = os.sysconf("SC_CLK_TCK")
POLL_S = 0.2


def template_store(folder: Path) -> Path:
    """An empty store with the recorder's schema: a session-recorder run once on a bus of its own."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "template.sqlite"
    bus = Bus(folder)
    try:
        bus.start()
        Recorder(bus, db).close()
    finally:
        bus.stop_all()
    copy = folder / "empty.sqlite"
    with sqlite3.connect(db) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    return copy


def make_history(template: Path, db: Path, stations: int, days: int) -> int:
    """A gym's history; how many rows it has in the tables the uplink sends. Every gym gets a copy:
    the chain store keys each row by its gym, so the gyms' own keys may be the same."""
    rng = random.Random(1)
    with sqlite3.connect(template) as source, sqlite3.connect(db) as conn:
        source.backup(conn)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")  # as the recorder keeps it: the uplink reads while the live part writes
    end = time.time() - 2 * DAY - 3_600
    athletes = [(f"a{n}", f"Athlete {n}", rng.choice("fmx"), 1970 + n % 35, 160.0 + n % 40, None, end - days * DAY - 60, None)
                for n in range(2 * stations)]
    conn.executemany("INSERT INTO athletes VALUES (?, ?, ?, ?, ?, ?, ?, ?)", athletes)
    rows = len(athletes)
    session = 0
    for day in range(days):
        for s in range(stations):
            session += 1
            station, athlete = f"rack-{s:02d}", athletes[(day + s) % len(athletes)][0]
            start = end - (days - day) * DAY + s * 60
            conn.execute("INSERT INTO sessions (id, station, athlete, started_ts, ended_ts) VALUES (?, ?, ?, ?, ?)",
                         (session, station, athlete, start, start + 3_000))
            rows += 1 + history_sets(conn, rng, station, athlete, session, start)
    conn.commit()
    conn.close()
    return rows


def history_sets(conn: sqlite3.Connection, rng: random.Random, station: str, athlete: str, session: int, start: float) -> int:
    rows = 0
    src = f"rep.{station}"
    for n in range(4):
        set_id, load = f"{station}-{session}-{n}", 60.0 + 10 * n
        t0 = start + 300 * n
        velocities = [round(1.25 - 0.008 * load - 0.03 * i + rng.uniform(-0.02, 0.02), 4) for i in range(5)]
        loss = round((velocities[0] - velocities[-1]) / velocities[0] * 100, 3)
        conn.execute("INSERT INTO sets (id, session, station, athlete, exercise, load_kg, started_ts, ended_ts, reps, reason, "
                     "best_mean_velocity_mps, velocity_loss_pct) VALUES (?, ?, ?, ?, 'squat', ?, ?, ?, 5, 'idle', ?, ?)",
                     (set_id, session, station, athlete, load, t0, t0 + 40, max(velocities), loss))
        seq = session * 40 + n * 10
        for i, v in enumerate(velocities, 1):
            rep(conn, f"{set_id}-r{i}", set_id, station, athlete, load, i, v, src, seq + i, t0 + 6 * i)
        conn.execute("INSERT INTO rejected VALUES (?, ?, ?, ?, 'partial', 'ROM 268 mm below 430 mm', 268.0, 0.5, 0.5, ?, 'det')",
                     (src, seq + 7, station, athlete, t0 + 38))
        conn.execute("INSERT INTO profiles VALUES (?, ?, ?, ?, 'squat', ?, 1.57, -0.011, 0.97, 0.3, ?)",
                     (src, seq + 8, station, athlete, t0 + 40, 115.0 + rng.uniform(-5, 5)))
        rows += 1 + 5 + 2
    return rows


def rep(conn: sqlite3.Connection, rep_id: str, set_id: str, station: str, athlete: str, load: float, idx: int, v: float, src: str,
        seq: int, ts: float) -> None:
    conn.execute("INSERT INTO reps (id, set_id, station, athlete, exercise, load_kg, idx, mean_velocity_mps, peak_velocity_mps, "
                 "mean_propulsive_velocity_mps, rom_mm, concentric_s, time_to_peak_s, velocity_loss_pct, mean_power_w, t_end, "
                 "detector, src, seq, ts) VALUES (?, ?, ?, ?, 'squat', ?, ?, ?, ?, ?, 600.0, ?, 0.25, 0.0, ?, ?, 'det', ?, ?, ?)",
                 (rep_id, set_id, station, athlete, load, idx, v, round(v * 1.5, 4), round(v * 1.04, 4), round(0.6 / v, 4),
                  round(load * 9.81 * v, 2), ts, src, seq, ts))


def proc_usage(pid: int) -> tuple[float, float]:
    """CPU seconds so far and peak resident MB of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICK
    hwm = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmHWM:"))
    return cpu, hwm / 1024


def chain_count(chain: Chain, sql: str) -> int:
    return int(chain.query(sql))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def live_phase(chain: Chain, stores: dict[str, Path], stations: int, live_s: float, rep_every_s: float,
               uplinks: dict[str, subprocess.Popen]) -> dict[str, list[float]]:
    """Each gym's stations train for `live_s`; every rep's lag to the chain store, per gym. The chain
    store is polled on a thread of its own, so a slow poll delays no rep's writing."""
    conns = {gym: sqlite3.connect(db, timeout=30) for gym, db in stores.items()}
    now = time.time()
    for gym, conn in conns.items():
        conn.execute("PRAGMA synchronous = NORMAL")  # as the recorder: no fsync per commit in WAL mode
        for s in range(stations):
            station = f"rack-{s:02d}"
            conn.execute("INSERT INTO sessions (id, station, athlete, started_ts, ended_ts) VALUES (?, ?, ?, ?, ?)",
                         (1_000_000 + s, station, f"a{s}", now, now))
            conn.execute("INSERT INTO sets (id, session, station, athlete, exercise, load_kg, started_ts, reps) "
                         "VALUES (?, ?, ?, ?, 'squat', 80.0, ?, 0)", (f"live-{station}", 1_000_000 + s, station, f"a{s}", now))
        conn.commit()
    written: dict[tuple[str, int], float] = {}
    seen: dict[tuple[str, int], float] = {}
    lock = threading.Lock()
    done = threading.Event()
    failure: list[str] = []

    def poll() -> None:
        while not done.is_set():
            with lock:
                low = min((s for key in written.keys() - seen.keys() for s in [key[1]]), default=None)
            if low is not None:
                got = chain.query(f"SELECT coalesce(json_agg(json_build_array(gym, seq)), '[]') FROM reps "
                                  f"WHERE src = 'live' AND seq >= {low}")
                at = time.time()
                with lock:
                    for gym, s in got:
                        seen.setdefault((gym, s), at)
            dead = [gym for gym, p in uplinks.items() if p.poll() is not None]
            if dead:
                failure.append(f"uplinks exited: {dead}")
                return
            done.wait(POLL_S)

    poller = threading.Thread(target=poll, name="chain-poll", daemon=True)
    poller.start()
    seq = 0
    start = time.monotonic()
    tick = rep_every_s / stations  # a rep per gym per tick, the stations in turn
    try:
        while (now_m := time.monotonic()) < start + live_s and not failure:
            if now_m < start + seq * tick:
                time.sleep(start + seq * tick - now_m)
                continue
            station_n = seq % stations
            seq += 1
            for gym, conn in conns.items():
                station = f"rack-{station_n:02d}"
                rep(conn, f"live-{seq}", f"live-{station}", station, f"a{station_n}", 80.0, 1 + seq // stations, 0.6, "live", seq,
                    time.time())
                conn.commit()
                with lock:
                    written[(gym, seq)] = time.time()
        wait_until(lambda: failure or len(seen) >= len(written), "every live rep in the chain store", timeout=120,
                   detail=lambda: f"{len(written) - len(seen)} of {len(written)} missing")
    finally:
        done.set()
        poller.join(timeout=30)
        for conn in conns.values():
            conn.close()
    assert not failure, failure
    lags: dict[str, list[float]] = {gym: [] for gym in stores}
    for (gym, s), t in written.items():
        lags[gym].append(max(0.0, seen[(gym, s)] - t))
    return lags


def copy_baseline(chain: Chain, stores: dict[str, Path], folder: Path) -> tuple[int, float]:
    """PostgreSQL's own COPY of the gyms' history into LIKE tables: rows, seconds."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = 0
    commands = ["CREATE SCHEMA baseline;"]
    for table in HISTORY_TABLES:
        commands.append(f"CREATE TABLE baseline.{table} (LIKE public.{table} INCLUDING DEFAULTS INCLUDING INDEXES);")
    setup = chain.psql("\n".join(commands))
    assert setup.returncode == 0, setup.stderr
    script = []
    for table in HISTORY_TABLES:
        path = folder / f"{table}.csv"
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            for gym, db in stores.items():
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                    for row in conn.execute(f"SELECT {', '.join(COLUMNS[table])} FROM {table} WHERE NOT ({live_condition(table)})"):
                        writer.writerow([gym, *row])
                        rows += 1
        script.append(f"\\copy baseline.{table} (gym, {', '.join(COLUMNS[table])}) FROM '{path}' WITH (FORMAT csv)")
    target = f"host={chain.socket} port={chain.port} user=chainadmin dbname=chain"
    started = time.monotonic()
    result = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", target], input="\n".join(script) + "\n",
                            capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    copied = chain_count(chain, "SELECT " + " + ".join(f"(SELECT count(*) FROM baseline.{t})" for t in HISTORY_TABLES))
    assert copied == rows, (copied, rows)
    return rows, seconds


def live_condition(table: str) -> str:
    """The rows the live part added (not history): the baseline copies the history only."""
    return {"sessions": "id >= 1000000", "sets": "id LIKE 'live-%'", "reps": "src = 'live'"}.get(table, "0")


def run(args: argparse.Namespace, folder: Path) -> dict:
    gyms = [f"g{n:02d}" for n in range(args.gyms)]
    template = template_store(folder / "template")
    stores: dict[str, Path] = {}
    history = 0
    made = time.monotonic()
    one = make_history(template, folder / "history.sqlite", args.stations, args.days)
    for gym in gyms:
        stores[gym] = folder / f"{gym}.sqlite"
        shutil.copy(folder / "history.sqlite", stores[gym])
        history += one
    made_s = time.monotonic() - made
    chain = Chain(folder / "chain", gyms=gyms)
    (folder / "chain").mkdir(parents=True, exist_ok=True)
    uplinks: dict[str, subprocess.Popen] = {}
    logs: list = []
    try:
        chain.start()
        total = "SELECT " + " + ".join(f"(SELECT count(*) FROM {t})" for t in HISTORY_TABLES)
        started = time.monotonic()
        for gym in gyms:
            log = open(folder / f"uplink-{gym}.stderr", "wb")
            logs.append(log)
            uplinks[gym] = subprocess.Popen(
                [str(BIN_DIR / "vbt-uplink"), "--db", str(stores[gym]), "--gym", gym, "--interval", str(args.interval),
                 "--batch", str(args.batch), *chain.gym_options(gym)],
                stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL)
        wait_until(lambda: chain_count(chain, total) >= history, f"the {history} history rows in the chain store",
                   timeout=args.timeout, interval=POLL_S,
                   detail=lambda: f"{chain_count(chain, total)} of {history}; exited: "
                                  f"{[g for g, p in uplinks.items() if p.poll() is not None]}")
        catch_up_s = time.monotonic() - started
        assert chain_count(chain, total) == history
        catch_up_cpu = {gym: proc_usage(p.pid)[0] for gym, p in uplinks.items()}
        lags = live_phase(chain, stores, args.stations, args.live_s, args.rep_every_s, uplinks)
        usage = {gym: proc_usage(p.pid) for gym, p in uplinks.items()}
        exits = {}
        for gym, p in uplinks.items():
            p.send_signal(signal.SIGTERM)
        for gym, p in uplinks.items():
            exits[gym] = p.wait(timeout=60)
        copy_rows, copy_s = copy_baseline(chain, stores, folder / "copy")
        assert copy_rows == history, (copy_rows, history)
    finally:
        for p in uplinks.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        for log in logs:
            log.close()
        chain.stop()
    every = [lag for gym_lags in lags.values() for lag in gym_lags]
    per_gym = {
        gym: {"lag_p50_s": percentile(lags[gym], 50), "lag_p99_s": percentile(lags[gym], 99), "live_reps": len(lags[gym]),
              "cpu_catch_up_s": catch_up_cpu[gym], "cpu_live_s": usage[gym][0] - catch_up_cpu[gym], "peak_rss_mb": usage[gym][1],
              "exit": exits[gym]}
        for gym in gyms
    }
    return {
        "gyms": args.gyms, "stations": args.stations, "days": args.days, "interval_s": args.interval, "batch": args.batch,
        "binaries": str(BIN_DIR), "made_s": made_s, "history_rows": history, "catch_up_s": catch_up_s,
        "rows_per_s": history / catch_up_s, "live_s": args.live_s, "live_reps": len(every),
        "lag_p50_s": percentile(every, 50), "lag_p99_s": percentile(every, 99), "lag_max_s": max(every),
        "gym_lag_p99_s": {"median": statistics.median(g["lag_p99_s"] for g in per_gym.values()),
                          "max": max(g["lag_p99_s"] for g in per_gym.values())},
        "cpu_catch_up_s": {"mean": statistics.mean(catch_up_cpu.values()), "max": max(catch_up_cpu.values())},
        "cpu_live_s": {"mean": statistics.mean(g["cpu_live_s"] for g in per_gym.values()),
                       "max": max(g["cpu_live_s"] for g in per_gym.values())},
        "peak_rss_mb": {"mean": statistics.mean(g["peak_rss_mb"] for g in per_gym.values()),
                        "max": max(g["peak_rss_mb"] for g in per_gym.values())},
        "copy_rows": copy_rows, "copy_s": copy_s, "copy_rows_per_s": copy_rows / copy_s, "per_gym": per_gym,
    }


def report(result: dict) -> str:
    lines = [
        f"chain benchmark: {result['gyms']} gyms x {result['stations']} stations, {result['days']} days of history "
        f"({result['history_rows']} rows), --interval {result['interval_s']} --batch {result['batch']}, {result['binaries']}",
        "",
        "| what | value |",
        "|---|---|",
        f"| uplinks' catch-up, all gyms at once | {result['rows_per_s']:,.0f} rows/s ({result['catch_up_s']:.1f} s) |",
        f"| PostgreSQL's own COPY of the same rows | {result['copy_rows_per_s']:,.0f} rows/s ({result['copy_s']:.1f} s) |",
        f"| lag over all gyms, p50 / p99 / max ({result['live_reps']} live reps in {result['live_s']:.0f} s) | "
        f"{result['lag_p50_s']:.2f} / {result['lag_p99_s']:.2f} / {result['lag_max_s']:.2f} s |",
        f"| a gym's lag p99: median / worst gym | {result['gym_lag_p99_s']['median']:.2f} / {result['gym_lag_p99_s']['max']:.2f} s |",
        f"| CPU per uplink, catch-up: mean / max | {result['cpu_catch_up_s']['mean']:.2f} / {result['cpu_catch_up_s']['max']:.2f} s |",
        f"| CPU per uplink, live part: mean / max | {result['cpu_live_s']['mean']:.2f} / {result['cpu_live_s']['max']:.2f} s |",
        f"| peak RSS per uplink: mean / max | {result['peak_rss_mb']['mean']:.1f} / {result['peak_rss_mb']['max']:.1f} MB |",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gyms", type=int, default=50)
    parser.add_argument("--stations", type=int, default=20, help="stations per gym")
    parser.add_argument("--days", type=int, default=5, help="days of history per station (a session a day)")
    parser.add_argument("--live-s", type=float, default=30.0, help="seconds of live training for the lag")
    parser.add_argument("--rep-every-s", type=float, default=4.0, help="seconds between a station's reps in the live part")
    parser.add_argument("--interval", type=float, default=1.0, help="the uplinks' --interval")
    parser.add_argument("--batch", type=int, default=500, help="the uplinks' --batch")
    parser.add_argument("--timeout", type=float, default=900.0, help="the most the catch-up may take")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--folder", type=Path, help="keep the stores and logs here (default: a new temp folder)")
    args = parser.parse_args(argv)
    folder = args.folder or Path(tempfile.mkdtemp(prefix="vbt-chain-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    result = run(args, folder)
    print(report(result))
    print(f"folder: {folder}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if all(g["exit"] == 0 for g in result["per_gym"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
