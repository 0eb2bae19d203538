"""posture-evaluator end to end over real processes: a simulated wearable (this
test, on pyzmq), announced by a status as a bridge announces one, is calibrated with `vbt posture calibrate`, then slouches and
sits straight; the published state follows. The calibration survives a restart
of the evaluator, and every message validates against proto/."""

import json
import secrets
from pathlib import Path

import numpy as np
import zmq

from test_wire import (Bus, bus, read_recording, read_stats, received_by_topic,  # noqa: F401 (fixture)
                       validate_message, wait_until)

STATION = "desk-1"


class Wearable:
    """Publishes posture readings like the wearable's bridge: 5 readings (50 Hz) a message."""

    def __init__(self, bus: Bus):
        self.ctx = zmq.Context()
        self.pub = self.ctx.socket(zmq.XPUB)
        self.pub.setsockopt(zmq.LINGER, 2000)
        self.pub.connect(bus.pub_endpoint)
        instance = f"py-wearable-{secrets.token_hex(4)}"
        self.src = f"{instance}/sample.{STATION}"
        self.status_src = f"{instance}/status.{STATION}"
        self.seq = 0
        self.status_seq = 0
        self.t = 1_763_812_345.0
        self.rng = np.random.default_rng(7)
        self.bus = bus
        self.announce()

    def announce(self) -> None:
        """Says, as a bridge does, that the station has a posture wearable (a `status`), until an
        evaluator asks for the station's samples: it subscribes to those of stations that have one."""
        topics: list[bytes] = []

        def subscribed() -> bool:
            if self.pub.poll(100, zmq.POLLIN):
                topics.append(self.pub.recv())
            else:
                self.status_seq += 1
                msg = {"v": 1, "type": "status", "station": STATION, "src": self.status_src, "seq": self.status_seq,
                       "ts": self.t, "state": "streaming", "sensor": "posture", "device": "py"}
                self.pub.send_multipart([f"status.{STATION}".encode(), json.dumps(msg).encode()])
            return f"\x01sample.{STATION}".encode() in topics
        wait_until(subscribed, "the evaluator's subscription to the wearable's samples", detail=self.bus.describe)

    def hold(self, tilt_deg: float, seconds: float) -> None:
        tilt = np.radians(tilt_deg)
        for _ in range(int(seconds * 10)):
            readings = []
            for _ in range(5):
                self.t += 0.02
                n = self.rng.normal(size=6)
                acc = [9.81 * np.sin(tilt) + 0.05 * n[0], 0.05 * n[1], 9.81 * np.cos(tilt) + 0.05 * n[2]]
                mag = [30 + 40 * np.sin(tilt) + 0.5 * n[3], -10 + 0.5 * n[4], -40 * np.cos(tilt) + 0.5 * n[5]]
                readings.append({"t": round(self.t, 6), "acc": acc, "mag": mag})
            self.seq += 1
            msg = {"v": 1, "type": "sample", "station": STATION, "src": self.src, "seq": self.seq, "ts": self.t,
                   "sensor": "posture", "samples": readings}
            self.pub.send_multipart([f"sample.{STATION}".encode(), json.dumps(msg).encode()])

    def close(self) -> None:
        self.pub.close()
        self.ctx.term()


def messages(path: Path, kind: str) -> list[dict]:
    try:
        return [r["msg"] for r in read_recording(path) if r["msg"]["type"] == kind]
    except (OSError, ValueError):
        return []


def test_calibrate_slouch_sit_straight(bus: Bus, tmp_path: Path):
    store = tmp_path / "calibrations.json"
    rec, stats = tmp_path / "posture.jsonl", tmp_path / "posture.stats.json"
    recorder = bus.spawn("record", ["vbt", "record", "--out", str(rec), "--stats", str(stats),
                                    "--stats-interval", "0.1", "posture.", "calibration."])
    recorder.wait_for_log("bus connected")
    evaluator = bus.spawn("posture-evaluator", ["posture-evaluator", "--calibrations", str(store)])
    evaluator.wait_for_log("bus connected")
    wearable = Wearable(bus)
    try:
        result = bus.run(["vbt", "posture", "calibrate", "--station", STATION, "--athlete", "ana", "--seconds", "2", "--no-check"])
        assert "calibration" in result.stdout
        evaluator.wait_for_log("posture calibration started")
        wearable.hold(0, 2.5)
        wait_until(lambda: received_by_topic(read_stats(stats)).get(f"calibration.{STATION}", 0) == 1,
                   "the calibration message", detail=bus.describe)

        wearable.hold(0, 1)
        wearable.hold(30, 7)
        wearable.hold(0, 2)
        wait_until(lambda: len([m for m in messages(rec, "posture") if m["changed"]]) >= 3
                   and messages(rec, "posture")[-1]["correct"], "posture to follow: correct, bad, correct",
                   detail=bus.describe)
        states = [m["correct"] for m in messages(rec, "posture") if m["changed"]]
        assert states[:3] == [True, False, True], states
        assert any(m["sustained_bad"] for m in messages(rec, "posture")), "7 s of slouching is sustained"

        # Restart: the calibration comes back from the store on assignment.
        assert evaluator.terminate() == 0, evaluator.describe()
        assert json.loads(store.read_text())["byAthlete"]["ana"]["acc"]["fromData"] is True
        again = bus.spawn("posture-evaluator-2", ["posture-evaluator", "--calibrations", str(store)])
        again.wait_for_log("bus connected")
        wearable.announce()
        before = len(messages(rec, "posture"))
        bus.run(["vbt", "pub", f"cmd.{STATION}", json.dumps({"id": "a1", "command": "athlete.assign", "target": "*",
                                                            "args": {"athlete": "ana"}}), "--rate", "0"])
        again.wait_for_log("posture calibration loaded")
        wearable.hold(30, 2)
        wait_until(lambda: any(not m["correct"] for m in messages(rec, "posture")[before:]),
                   "the restarted evaluator to judge with the stored calibration", detail=bus.describe)
        assert again.terminate() == 0, again.describe()
    finally:
        wearable.close()
    assert recorder.terminate() == 0
    records = read_recording(rec)
    for record in records:
        validate_message(record["msg"])
    calibrations = [r["msg"] for r in records if r["msg"]["type"] == "calibration"]
    assert calibrations[0]["athlete"] == "ana" and calibrations[0]["acc"]["from_data"] is True
    assert read_stats(stats)["malformed"] == {}
