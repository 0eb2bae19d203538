#!/usr/bin/env python3
"""Waits until a vbt recording holds enough BLE readings (used inside the VM).

Exit status: 0 when the recording has at least --imu IMU readings and
--posture posture readings for --station; 2 when the process --pid ended
first; 1 at the --timeout. Prints the counts as it goes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def count(path: str, station: str, offset: int, counts: dict[str, int]) -> int:
    """Adds the readings in complete lines after byte `offset`; returns the new offset."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return offset
    end = data.rfind(b"\n") + 1
    for raw in data[:end].splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        msg = line.get("msg") or {}
        if line.get("topic") != f"sample.{station}" or msg.get("type") != "sample":
            continue
        sensor = msg.get("sensor")
        counts[sensor] = counts.get(sensor, 0) + len(msg.get("samples") or [])
    return offset + end


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) counts as ended.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--recording", required=True)
    parser.add_argument("--station", default="rack-ble")
    parser.add_argument("--imu", type=int, default=300)
    parser.add_argument("--posture", type=int, default=40)
    parser.add_argument("--timeout", type=float, default=90)
    parser.add_argument("--pid", type=int, default=0)
    args = parser.parse_args()

    counts: dict[str, int] = {}
    offset = 0
    deadline = time.monotonic() + args.timeout
    last_report = 0.0
    while True:
        offset = count(args.recording, args.station, offset, counts)
        imu, posture = counts.get("imu", 0), counts.get("posture", 0)
        now = time.monotonic()
        if now - last_report >= 5:
            print(f"wait_recording: imu={imu} posture={posture}", flush=True)
            last_report = now
        if imu >= args.imu and posture >= args.posture:
            print(f"wait_recording: done, imu={imu} posture={posture}", flush=True)
            return 0
        if args.pid and not alive(args.pid):
            print(f"wait_recording: process {args.pid} ended; imu={imu} posture={posture}", flush=True)
            return 2
        if now >= deadline:
            print(f"wait_recording: timeout after {args.timeout:.0f}s; imu={imu} posture={posture}", flush=True)
            return 1
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
