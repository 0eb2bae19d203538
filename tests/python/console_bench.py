"""The coach console's speed (`make bench`): a rep on the bus -> visible in a
real browser's DOM, with N stations streaming, beside a raw pyzmq subscriber's latency on
the same bus in the same run (the floor: what the bus and the loopback cost); and the
console's CPU and memory at each N.

A pyzmq publisher plays N stations, as the rep-detector, notifier and bridges would
publish them: every station lifts a set of reps (one every 2 s), rests, and sends its
sensor status and its bridge's heartbeat every second and a rest timer every second
while resting (about 2.5 console messages a second per station). Each rep's mean
velocity is unique in its station's sequence (2 decimals), so the page's `last-mv` change
names the rep. A MutationObserver in the headless Chromium records when each station's
`last-mv` text changes (performance.timeOrigin + now: the same wall clock as the
publisher's time.time()). The console's CPU is utime + stime from /proc over the window,
its memory VmRSS at the end.

Run from the repository root:  python3 tests/python/console_bench.py [--stations 100 500] [--seconds 40]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import zmq  # noqa: E402

import fault_run  # noqa: E402
from bus_tap import BusTap  # noqa: E402
from test_console import browser, log_in  # noqa: E402
from test_wire import binary, free_port, wait_until  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
ACCOUNT = ("bench", "bench-password")

OBSERVER = """
window.__seen = [];
const grid = document.getElementById('stations');
new MutationObserver(records => {
  const at = performance.timeOrigin + performance.now();
  for (const r of records) {
    const el = r.target.nodeType === 3 ? r.target.parentElement : r.target;
    if (!el || !el.dataset || el.dataset.field !== 'last-mv') continue;
    const card = el.closest('[data-station]');
    window.__seen.push([card.dataset.station, el.textContent, at]);
  }
}).observe(grid, {subtree: true, childList: true, characterData: true});
"""


def cpu_seconds(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


class Gym(threading.Thread):
    """N simulated stations on one PUB socket; remembers when each rep was sent."""

    def __init__(self, endpoint: str, stations: int):
        super().__init__(daemon=True)
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.PUB)
        self.socket.setsockopt(zmq.SNDHWM, 100_000)
        self.socket.connect(endpoint)
        self.names = [f"st-{i:04d}" for i in range(stations)]
        self.sent: dict[tuple[str, str], float] = {}
        self.stop = threading.Event()
        self.seq: dict[str, int] = {}

    def send(self, kind: str, station: str, fields: dict, athlete: str | None = None) -> float:
        topic = f"{kind}.{station}"
        self.seq[topic] = self.seq.get(topic, 0) + 1
        now = time.time()
        body = {"v": 1, "type": kind, "station": station, "src": f"bench-0000beef/{topic}", "seq": self.seq[topic], "ts": now, **fields}
        if athlete:
            body["athlete"] = athlete
        self.socket.send_multipart([topic.encode(), json.dumps(body).encode()])
        return now

    def run(self) -> None:
        start = time.monotonic()
        tick = 0
        # Stations are spread over the 2 s rep period, so reps arrive evenly, not in one burst.
        count = len(self.names)
        while not self.stop.is_set():
            slot_start = start + tick * 0.02
            if slot_start > time.monotonic():
                time.sleep(slot_start - time.monotonic())
            second = tick % 50 == 0
            for index, name in enumerate(self.names):
                phase = (tick + index * 100 // max(1, count)) % 100  # 100 ticks of 20 ms: a rep every 2 s
                cycle = (tick + index * 100 // max(1, count)) // 100
                in_set = cycle % 8 < 5  # five reps, then three slots of rest
                if phase == 0 and in_set:
                    rep = cycle % 8 + 1
                    set_id = f"{name}-set-{cycle // 8}"
                    if rep == 1:
                        self.send("set", name, {"set_id": set_id, "event": "start"}, "ana")
                    velocity = 0.40 + (cycle % 40) / 100  # 0.40 ... 0.79: unique among neighbours
                    at = self.send("rep", name, {
                        "set_id": set_id, "rep_id": f"{set_id}-{rep}", "index": rep, "mean_velocity_mps": velocity,
                        "peak_velocity_mps": velocity * 1.6, "mean_propulsive_velocity_mps": velocity * 1.1, "rom_mm": 600,
                        "concentric_s": 0.7, "time_to_peak_s": 0.3, "velocity_loss_pct": 0, "t_end": time.time(),
                        "detector": "bench", "exercise": "squat", "load_kg": 100, "zone": "strength"}, "ana")
                    self.sent[(name, f"{velocity:.2f}")] = at
                    if rep == 5:
                        self.send("set", name, {"set_id": set_id, "event": "end", "reps": 5, "reason": "idle",
                                                "best_mean_velocity_mps": velocity, "velocity_loss_pct": 0}, "ana")
                if second:
                    self.send("status", name, {"state": "streaming", "sensor": "imu", "device": "bench", "rate_hz": 100})
                    self.send("heartbeat", f"bridge-{name}", {"role": "sensor-bridge", "uptime_s": tick / 50, "interval_s": 1})
                    if not in_set:
                        self.send("timer", name, {"timer_id": f"{name}-rest", "state": "running", "duration_s": 90, "remaining_s": 60})
            tick += 1

    def close(self) -> None:
        self.stop.set()
        self.join(5)
        self.socket.close(0)
        self.context.term()


def raw_latencies(endpoint: str) -> tuple[BusTap, list[float]]:
    """The floor: a plain pyzmq subscriber to rep.* on the same bus, timing each rep's arrival."""
    latencies: list[float] = []
    return BusTap(endpoint, lambda m: latencies.append((time.time() - m["ts"]) * 1000), b"rep."), latencies


def one(stations: int, seconds: float, folder: Path) -> dict:
    node = fault_run.Node(folder)
    users = folder / "users"
    subprocess.run([binary("vbt"), "console", "user", "add", ACCOUNT[0], "--role", "viewer", "--users", str(users)],
                   input=ACCOUNT[1] + "\n", text=True, check=True, capture_output=True, env=node.env)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    gym = tap = driver = None
    try:
        node.spawn("vbt-bus", ["vbt-bus"]).wait_for_log("bus forwarding")
        console = node.spawn("coach-console", ["coach-console", "--users", str(users), "--listen", f"127.0.0.1:{port}"])
        console.wait_for_log("console listening")
        tap, raw = raw_latencies(node.sub_endpoint)
        gym = Gym(node.pub_endpoint, stations)
        gym.start()
        driver = browser()
        log_in(driver, base, ACCOUNT)
        wait_until(lambda: len(driver.find_elements("css selector", "[data-station]")) >= stations,
                   f"{stations} stations on the board", timeout=60, detail=node.describe)
        driver.execute_script(OBSERVER)
        raw.clear()
        cpu_start, wall_start = cpu_seconds(console.proc.pid), time.monotonic()
        time.sleep(seconds)  # a measurement window, not a wait for a condition
        cpu = cpu_seconds(console.proc.pid) - cpu_start
        wall = time.monotonic() - wall_start
        seen = driver.execute_script("return window.__seen")
        rss = rss_mb(console.proc.pid)
        latencies = [at - gym.sent[(station, text)] * 1000 for station, text, at in seen if (station, text) in gym.sent]
        assert latencies, "no rep reached the page"
        return {
            "stations": stations, "reps_seen": len(latencies),
            "dom_p50_ms": percentile(latencies, 50), "dom_p99_ms": percentile(latencies, 99), "dom_max_ms": max(latencies),
            "raw_p50_ms": percentile(raw, 50), "raw_p99_ms": percentile(raw, 99),
            "console_cpu_pct": 100 * cpu / wall, "console_rss_mb": rss,
        }
    finally:
        if driver:
            driver.quit()
        if gym:
            gym.close()
        if tap:
            tap.close()
        node.stop_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stations", type=int, nargs="+", default=[100, 500])
    parser.add_argument("--seconds", type=float, default=40)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="vbt-console-bench-") as folder:
        for stations in args.stations:
            rows.append(one(stations, args.seconds, Path(folder) / f"n{stations}"))
    print("\ncoach-console: a rep on the bus -> visible in the browser's DOM (headless Chromium), beside a raw pyzmq subscriber")
    print(f"{'stations':>8} {'reps':>6} {'DOM p50':>9} {'DOM p99':>9} {'DOM max':>9} {'raw p50':>9} {'raw p99':>9} {'CPU':>6} {'RSS':>8}")
    for r in rows:
        print(f"{r['stations']:>8} {r['reps_seen']:>6} {r['dom_p50_ms']:>7.1f}ms {r['dom_p99_ms']:>7.1f}ms {r['dom_max_ms']:>7.1f}ms "
              f"{r['raw_p50_ms']:>7.2f}ms {r['raw_p99_ms']:>7.2f}ms {r['console_cpu_pct']:>5.1f}% {r['console_rss_mb']:>6.1f}MB")
    print("goal: DOM p99 <= 100 ms at 100 stations")


if __name__ == "__main__":
    main()
