"""The live rep-detector gives `vbt eval`'s reps, however readings are grouped and paced.

A recording is made with the simulator: three stations, one set each, with the hard
cases (a laser with a bar IMU beside it and a sticking point in every rep; a laser with
real sensors' faults and a depth that shrinks over the set; a bar IMU alone). `vbt eval`
gives the reference rep stream. The recording is then replayed through the running
programs (vbt-bus, rep-detector, a subscriber to `rep.` and `rejected.`) 10 times: 8 as
fast as possible and 2 at speed 1, each with another `--batch-size` and `--batch-delay`
(the replaying bridge batches the readings again, as a live bridge does), all at once on
buses of their own. Every run's reps (set, number, top, mean and peak velocity) and
rejections (reason and detail, which carries the ROM) must be eval's, and every run's
ROMs the same. The batch sizes stay within the detector's lateness bound
(docs/detection.md, "Determinism"): a laser's message of 150 readings spans 3 s.
"""

from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from test_wire import WAIT_S, Bus, binary, read_recording, wait_until

try:
    import zmq
except ImportError:  # pragma: no cover - the Makefile installs pyzmq for CI
    zmq = None

# (speed, --batch-size, --batch-delay): 0 is as fast as possible.
RUNS = [(0, 1, 0), (0, 2, 0.02), (0, 4, 0), (0, 8, 0.02), (0, 16, 0.02), (0, 32, 1), (0, 64, 1), (0, 150, 1),
        (1, 1, 0), (1, 64, 1)]

STATIONS = {
    "sticky": ["--mode", "sticking", "--imu-rate", "100", "--seed", "3", "--load-kg", "120"],
    "shrinking": ["--mode", "shrinking-depth", "--real-sensors", "--imu-rate", "0", "--seed", "4"],
    "imu": ["--distance-rate", "0", "--imu-rate", "100", "--seed", "5"],
}


def same(a: float, b: float) -> bool:
    """Equal but for the last digit a float's formatting may change."""
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> tuple[Path, dict]:
    """The simulated session and `vbt eval --json` of it."""
    tmp = tmp_path_factory.mktemp("determinism")
    bus = Bus(tmp)
    try:
        bus.start()
        path = tmp / "session.jsonl"
        recorder = bus.spawn("record", ["vbt", "record", "--out", str(path), "sample."])
        recorder.wait_for_log("bus connected")
        simulators = [
            bus.spawn(f"sim-{station}", ["sensor-bridge", "--station", station, "--simulate", "--speed", "0", "--sets", "1",
                                         "--reps", "3", "--wait-subscribers", str(WAIT_S), *args])
            for station, args in STATIONS.items()]
        for simulator in simulators:
            assert simulator.proc.wait(timeout=60) == 0, simulator.describe()
        published = sum(int(p.stderr().split("published=sample=")[1].split(",")[0].split()[0]) for p in simulators)
        wait_until(lambda: path.exists() and len(path.read_text(encoding="utf-8").splitlines()) >= published,
                   f"the recorder to write the {published} sample messages", detail=bus.describe)
        assert recorder.terminate() == 0, recorder.describe()
    finally:
        bus.stop_all()
    result = subprocess.run([binary("vbt"), "eval", str(path), "--json"], capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    return path, json.loads(result.stdout)


def replay(path: Path, tmp: Path, speed: float, batch: int, delay: float, expected: int) -> list[dict]:
    """The rep and rejected messages of one replay through the running programs, in order."""
    tmp.mkdir()
    bus = Bus(tmp)
    context = zmq.Context()
    sub = context.socket(zmq.SUB)
    try:
        bus.start()
        for prefix in (b"rep.", b"rejected."):
            sub.setsockopt(zmq.SUBSCRIBE, prefix)
        sub.connect(bus.sub_endpoint)
        detector = bus.spawn("rep-detector", ["rep-detector", "--patterns", str(tmp / "patterns.json"),
                                              "--recorder-timeout", "1"])
        detector.wait_for_log("rep detector running")
        first_t = min(s["t"] for line in read_recording(path) for s in line["msg"]["samples"])
        bridge = bus.spawn("replay", ["sensor-bridge", "--replay", str(path), "--speed", str(speed), "--t0", repr(first_t),
                                      "--batch-size", str(batch), "--batch-delay", str(delay)])
        received: list[dict] = []

        def take() -> bool:
            while sub.poll(0):
                topic, body = sub.recv_multipart()
                received.append(json.loads(body))
            return len(received) >= expected

        # The last rejections come once the stations have been silent for --idle-timeout (10 s).
        wait_until(take, f"{expected} reps and rejections", timeout=60 + 40 * speed,
                   detail=lambda: f"{len(received)} received\n{bus.describe()}")
        assert bridge.proc.wait(timeout=WAIT_S) == 0, bridge.describe()
        assert detector.terminate() == 0, detector.describe()
        take()
        return received
    finally:
        sub.close(linger=0)
        context.term()
        bus.stop_all()


@pytest.mark.skipif(zmq is None, reason="pyzmq is not installed (pip install pyzmq)")
def test_replays_give_evals_reps(recording, tmp_path: Path):
    path, evaluated = recording
    reference = evaluated["reps"]
    rejected = evaluated["rejected"]
    assert {rep["station"] for rep in reference} == set(STATIONS), evaluated["stations"]
    assert rejected, "the session's re-racks are rejections eval reports"
    expected = len(reference) + len(rejected)

    with ThreadPoolExecutor(max_workers=len(RUNS)) as pool:
        runs = list(pool.map(lambda k: replay(path, tmp_path / f"run-{k}", *RUNS[k], expected), range(len(RUNS))))

    roms: dict | None = None
    for (speed, batch, delay), messages in zip(RUNS, runs):
        run = f"speed {speed}, --batch-size {batch} --batch-delay {delay}"
        reps = [m for m in messages if m["type"] == "rep"]
        for station in STATIONS:
            live = [m for m in reps if m["station"] == station]
            offline = [r for r in reference if r["station"] == station]
            assert [(m["set_id"], m["index"]) for m in live] == [(r["set_id"], r["index"]) for r in offline], (run, station)
            for m, r in zip(live, offline):
                assert same(m["concentric_end_t"], r["t_top"]), (run, m, r)
                assert same(m["mean_velocity_mps"], r["mean_velocity_mps"]), (run, m, r)
                assert same(m["peak_velocity_mps"], r["peak_velocity_mps"]), (run, m, r)
            live_rejected = [(m["reason"], m["detail"]) for m in messages if m["type"] == "rejected" and m["station"] == station]
            assert live_rejected == [(r["reason"], r["detail"]) for r in rejected if r["station"] == station], (run, station)
        # eval reports no ROM: each run's must be the first run's.
        run_roms = {m["rep_id"]: m["rom_mm"] for m in reps}
        roms = roms or run_roms
        assert run_roms.keys() == roms.keys() and all(same(run_roms[k], roms[k]) for k in roms), run
