"""What journalling costs a sensor-bridge at gym scale (`make bench`).

Replays the fault run's short recording (4 simulated stations: a laser at
50 Hz and a bar IMU at 100 Hz on the rack, IMUs on the others) as N stations
(default 1,000) at speed 1 into a real vbt-bus with a `vbt record` subscriber,
once with `--journal` and once without, alternately, `--runs` times each, and
measures the bridge's CPU time (utime + stime from /proc) over a fixed window
after a warm-up, and the messages it published. Prints medians and the ratio
of the two. The machine is noisy: compare the ratio, not the seconds.

Run from the repository root:  python3 tests/python/journal_cost.py [--stations N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fault_run  # noqa: E402
from test_wire import wait_until  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (proc(5): fields 14 and 15 of /proc/PID/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def one_run(folder: Path, recording: Path, copies: int, journal: bool, warmup_s: float, window_s: float) -> dict:
    node = fault_run.Node(folder)
    try:
        node.spawn("vbt-bus", ["vbt-bus"]).wait_for_log("bus forwarding")
        node.spawn("vbt-record", ["vbt", "record", "--out", "/dev/null", "sample."]).wait_for_log("bus connected")
        args = ["sensor-bridge", "--replay", str(recording), "--stations", str(copies), "--speed", "1", "--loop"]
        # Without: --no-journal, since every producer journals by default.
        args += ["--journal", str(folder / "journal")] if journal else ["--no-journal"]
        bridge = node.spawn("bridge", args)
        time.sleep(warmup_s)  # the measured quantity is CPU over a wall-clock window, not a wait for a condition
        assert bridge.proc.poll() is None, bridge.describe()
        cpu_start, wall_start = cpu_seconds(bridge.proc.pid), time.monotonic()
        time.sleep(window_s)
        cpu = cpu_seconds(bridge.proc.pid) - cpu_start
        wall = time.monotonic() - wall_start
        assert bridge.terminate() == 0, bridge.describe()
        wait_until(lambda: "bridge stopped" in bridge.stderr(), "the bridge's summary", timeout=20)
        return {"journal": journal, "cpu_s": cpu, "wall_s": wall, "cpu_share": cpu / wall}
    finally:
        node.stop_all()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stations", type=int, default=1000, help="stations replayed (a multiple of 4; default 1000)")
    parser.add_argument("--runs", type=int, default=2, help="runs with and without the journal, alternately (default 2)")
    parser.add_argument("--window", type=float, default=20, help="seconds of CPU measured per run (default 20)")
    parser.add_argument("--warmup", type=float, default=5, help="seconds before measuring (default 5)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vbt-journal-cost-") as tmp:
        folder = Path(tmp)
        recording = fault_run.make_recording(folder / "recording", fault_run.SHORT)
        info = fault_run.describe_recording(recording)
        copies = max(1, args.stations // len(info.stations))
        readings_per_s = info.readings * copies / info.duration_s
        results = []
        for index in range(args.runs):
            for journal in (True, False) if index % 2 == 0 else (False, True):
                run = one_run(folder / f"run-{index}-{'journal' if journal else 'plain'}", recording, copies,
                              journal, args.warmup, args.window)
                results.append(run)
                fault_run.log(f"run {index + 1}, journal {'on' if journal else 'off'}: bridge CPU {run['cpu_share'] * 100:.1f} % of a core")
        with_journal = statistics.median(r["cpu_share"] for r in results if r["journal"])
        without = statistics.median(r["cpu_share"] for r in results if not r["journal"])
        stations = copies * len(info.stations)
        print(f"sensor-bridge journalling, {stations} stations replayed at speed 1 (~{readings_per_s / 1000:.0f} k readings/s), "
              f"median of {args.runs} runs of {args.window:.0f} s each")
        print(f"  bridge CPU with --journal     {with_journal * 100:6.1f} % of a core")
        print(f"  bridge CPU without a journal  {without * 100:6.1f} % of a core")
        print(f"  journalling costs             {(with_journal - without) * 100:6.1f} % of a core "
              f"(ratio {with_journal / without:.2f})" if without > 0 else "  (no CPU measured without the journal)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
