"""The real BLE path, end to end, in a QEMU VM with emulated sensors.

This machine's kernel has no Bluetooth, so tests/ble-vm/ boots Debian's stock
kernel in QEMU (host root shared read-only over 9p), attaches a Bumble
virtual controller to it through /dev/vhci, and emulates a WitMotion IMU and
a posture wearable on the same virtual radio (peripherals.py). Inside, the
real binaries run: vbt-bus, `vbt record` and sensor-bridge. The checks here
run on the host against what the emulator logged and what was recorded.

Two modes (printed when the run starts):
  bridge  sensor-bridge is in $VBT_BIN_DIR: decoded values, order, the link
          drop and reconnect, status messages and the sensor commands.
  smoke   sensor-bridge is not built yet: hcitool and gatttool prove the VM,
          controller and emulated sensors work (scan, discovery, writes,
          notifications compared byte for byte with the emulator's log).

Run from the repository root:  python3 -m pytest -q tests/python
Needs `make deps` (tests/ble-vm/deps.sh). Environment:
  VBT_BIN_DIR          the Swift binaries (default .build/debug)
  VBT_BLE_VM_MODE      auto (default), bridge or smoke
  VBT_BLE_VM_TIMEOUT   seconds for the whole VM run (default 300)
  VBT_BLE_VM_RESULTS   check an existing results directory instead of
                       booting the VM (for working on the checks)
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from test_wire import check_src, validate_message

REPO = Path(__file__).resolve().parents[2]
BLE_VM = REPO / "tests" / "ble-vm"
BUILD = REPO / ".build" / "ble-vm"
BIN_DIR = Path(os.environ.get("VBT_BIN_DIR") or REPO / ".build" / "debug").resolve()
VENV = Path(os.environ.get("BLE_VENV") or REPO / ".build" / "ble-venv")
VM_TIMEOUT_S = int(os.environ.get("VBT_BLE_VM_TIMEOUT") or 300)

STATION = "rack-ble"
IMU_DROP_AFTER = 150  # IMU packets before the emulator drops the link once
IMU_MIN = 300
POSTURE_MIN = 40
TOLERANCE = 1e-6

sys.path.insert(0, str(BLE_VM))
import sensor_values as emu  # noqa: E402  (the emulator's names, addresses and values)

STATES = {"connecting", "connected", "streaming", "disconnected", "error"}


# --------------------------------------------------------------------------
# Running the VM


def missing_deps() -> list[str]:
    missing = []
    for tool in ("qemu-system-x86_64", "cpio", "modprobe", "hciconfig", "hcitool", "gatttool", "btmon"):
        if shutil.which(tool) is None:
            missing.append(tool)
    if not Path("/bin/busybox").exists():
        missing.append("busybox-static")
    python = VENV / "bin" / "python"
    if not python.exists() or subprocess.run(
        [str(python), "-c", "import bumble"], capture_output=True
    ).returncode != 0:
        missing.append(f"bumble venv at {VENV}")
    kver = subprocess.run(
        ["bash", "-c", f". {BLE_VM / 'common.sh'} && ble_vm_kver"], capture_output=True, text=True
    )
    if kver.returncode != 0:
        missing.append("a kernel with Bluetooth modules (linux-image-amd64)")
    return missing


@dataclass
class VmRun:
    results: Path
    mode: str
    status: int
    seconds: float

    def text(self, name: str) -> str:
        path = self.results / name
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else f"<no {name}>"

    def jsonl(self, name: str) -> list[dict]:
        path = self.results / name
        assert path.exists(), f"{name} missing in {self.results}\n{self.tail()}"
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    def tail(self, lines: int = 40) -> str:
        out = []
        for name in ("guest.log", "bridge.log", "peripherals.log"):
            text = self.text(name).splitlines()[-lines:]
            out.append(f"--- {name} (last {len(text)} lines)\n" + "\n".join(text))
        return "\n".join(out)


def announce(request: pytest.FixtureRequest, message: str) -> None:
    """Prints past pytest's capture, so -q runs show it too."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        with capture.global_and_fixture_disabled():
            print(f"\n{message}", flush=True)
    else:  # pragma: no cover
        print(message, flush=True)


@pytest.fixture(scope="module")
def vm(request: pytest.FixtureRequest) -> VmRun:
    reuse = os.environ.get("VBT_BLE_VM_RESULTS")
    if reuse:
        results = Path(reuse).resolve()
        mode = (results / "mode").read_text().strip()
        status = int((results / "guest.status").read_text().strip())
        announce(request, f"test_ble_vm: checking existing results in {results} ({mode} mode, no VM run)")
        return VmRun(results, mode, status, 0.0)

    missing = missing_deps()
    if missing:
        pytest.fail(
            "BLE VM test dependencies missing: " + ", ".join(missing)
            + ". Run `make deps` (it runs tests/ble-vm/deps.sh as root).",
            pytrace=False,
        )

    mode = os.environ.get("VBT_BLE_VM_MODE") or "auto"
    why = f"VBT_BLE_VM_MODE={mode}"
    if mode == "auto":
        mode = "bridge" if os.access(BIN_DIR / "sensor-bridge", os.X_OK) else "smoke"
        why = f"sensor-bridge {'found' if mode == 'bridge' else 'not built yet'} in {BIN_DIR}"
    assert mode in ("bridge", "smoke"), f"VBT_BLE_VM_MODE must be auto, bridge or smoke, not {mode!r}"
    if mode == "bridge":
        # A binary may be missing for a moment while it is being rebuilt.
        deadline = time.monotonic() + 60
        for name in ("vbt-bus", "vbt", "sensor-bridge"):
            while not os.access(BIN_DIR / name, os.X_OK) and time.monotonic() < deadline:
                time.sleep(0.5)
            assert os.access(BIN_DIR / name, os.X_OK), f"{BIN_DIR / name} missing (build it, or set VBT_BIN_DIR)"
    announce(
        request,
        f"test_ble_vm: {mode.upper()} mode ({why}): "
        + ("sensor-bridge against emulated BLE sensors" if mode == "bridge"
           else "hcitool/gatttool against emulated BLE sensors"),
    )

    build = subprocess.run(
        ["bash", str(BLE_VM / "build-initramfs.sh"), str(BUILD)], capture_output=True, text=True, timeout=300
    )
    assert build.returncode == 0, f"build-initramfs.sh failed:\n{build.stdout}\n{build.stderr}"

    results = BUILD / "results"
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir(parents=True)
    command = [
        "bash", str(BLE_VM / "run-vm.sh"), "--timeout", str(VM_TIMEOUT_S), "--initramfs-dir", str(BUILD),
        str(results),
        "/bin/sh", str(BLE_VM / "guest-test.sh"),
        "--results", str(results), "--bin-dir", str(BIN_DIR), "--venv", str(VENV.resolve()),
        "--mode", mode, "--wait", "90",
        "--imu-drop-after", str(IMU_DROP_AFTER), "--imu-min", str(IMU_MIN), "--posture-min", str(POSTURE_MIN),
    ]
    start = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=VM_TIMEOUT_S + 60, cwd=REPO)
    seconds = time.monotonic() - start
    run = VmRun(results, mode, proc.returncode, seconds)
    announce(request, f"test_ble_vm: VM run took {seconds:.0f} s, guest status {proc.returncode}; results in {results}")
    (results / "run-vm.stderr").write_text(proc.stderr)
    return run


def test_vm_run_succeeded(vm: VmRun):
    assert vm.status == 0, (
        f"the {vm.mode}-mode VM run failed with status {vm.status}\n{vm.text('run-vm.stderr')}\n{vm.tail()}"
    )
    assert vm.text("mode").strip() == vm.mode


# --------------------------------------------------------------------------
# Emulator logs


def sent_imu(vm: VmRun) -> list[dict]:
    sent = vm.jsonl("imu.sent.jsonl")
    assert [p["k"] for p in sent] == list(range(len(sent))), "the emulator's IMU log is not k = 0, 1, 2, ..."
    for packet in sent[:50]:  # the log and the emulator's value function agree
        assert packet["raw"] == emu.imu_raw(packet["k"])
    return sent


def sent_posture(vm: VmRun) -> list[dict]:
    sent = vm.jsonl("posture.sent.jsonl")
    assert [p["k"] for p in sent] == list(range(len(sent)))
    return sent


def test_emulated_values_cover_full_scale():
    values = {v for k in range(200) for v in emu.imu_raw(k)}
    assert {32767, -32768, -32767}.issubset(values)
    assert min(values) < -20000 and max(values) > 20000


# --------------------------------------------------------------------------
# Smoke mode: the VM, controller and sensors, through BlueZ's tools


def needs(vm: VmRun, mode: str) -> None:
    if vm.mode != mode:
        pytest.skip(f"{mode}-mode check; this run was in {vm.mode} mode")


def notifications(text: str) -> list[bytes]:
    """The values of gatttool's `Notification handle = 0x.... value: aa bb ...` lines.

    gatttool is stopped by a signal, which may cut its last line short: only
    lines with their newline count.
    """
    out = []
    for line in text.split("\n")[:-1]:
        if line.startswith("Notification handle = ") and "value: " in line:
            out.append(bytes.fromhex(line.split("value: ", 1)[1]))
    return out


def test_smoke_scan_sees_both_sensors(vm: VmRun):
    needs(vm, "smoke")
    scan = vm.text("smoke.lescan.txt")
    assert f"{emu.IMU_ADDRESS} {emu.IMU_NAME}" in scan, scan[:2000]
    assert f"{emu.POSTURE_ADDRESS} {emu.POSTURE_NAME}" in scan, scan[:2000]
    assert emu.WIT_SERVICE in vm.text("smoke.imu.primary.txt").lower()
    assert emu.NUS_SERVICE in vm.text("smoke.posture.primary.txt").lower()


def test_smoke_imu_notifications_match_the_emulator(vm: VmRun):
    needs(vm, "smoke")
    got = notifications(vm.text("smoke.imu.notify.txt"))
    assert len(got) >= 10, vm.text("smoke.imu.notify.txt")[:2000]
    sent = sent_imu(vm)
    assert len(sent) >= len(got)
    for k, value in enumerate(got):
        assert value == emu.imu_packet(sent[k]["raw"]), f"notification {k}: {value.hex()}"
    commands = vm.jsonl("imu.commands.jsonl")
    assert any(c.get("cmd") == "rate" and c.get("code") == 0x0B for c in commands), commands


def test_smoke_posture_chunks_reassemble_to_the_sent_lines(vm: VmRun):
    needs(vm, "smoke")
    chunks = notifications(vm.text("smoke.posture.notify.txt"))
    assert chunks and max(map(len, chunks)) <= 20, [len(c) for c in chunks]
    stream = b"".join(chunks)
    sent = "".join(p["line"] for p in sent_posture(vm)).encode()
    assert sent.startswith(stream), "the notifications are not the emulator's byte stream in order"
    assert stream.count(b"\n") >= 10
    # Lines straddle notifications: the receiver has to reassemble.
    assert any(not c.endswith(b"\n") and b"\n" in c for c in chunks)
    assert "70696e670a" in vm.text("posture.rx.jsonl")


# --------------------------------------------------------------------------
# Bridge mode: sensor-bridge against the emulated sensors


def recording(vm: VmRun) -> list[dict]:
    records = vm.jsonl("bridge.jsonl")
    for record in records:
        assert set(record) == {"t", "topic", "msg"}, record
    return records


def samples(records: list[dict], sensor: str) -> list[tuple[dict, dict]]:
    """(message, reading) pairs of one sensor's sample messages, in recorded order."""
    out = []
    for record in records:
        msg = record["msg"]
        if record["topic"] == f"sample.{STATION}" and msg.get("type") == "sample" and msg.get("sensor") == sensor:
            out.extend((msg, reading) for reading in msg["samples"])
    return out


def close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= TOLERANCE for x, y in zip(a, b))


def imu_expected(raw: list[int]) -> tuple[list[float], list[float], list[float]]:
    return (
        [v / 32768 * 16 for v in raw[0:3]],
        [v / 32768 * 2000 for v in raw[3:6]],
        [v / 32768 * 180 for v in raw[6:9]],
    )


def match_in_order(readings: list, sent: list, equal) -> list[int]:
    """Index in `sent` of each reading, matching in order (skipping unmatched sent items)."""
    indices, j = [], 0
    for i, reading in enumerate(readings):
        start = j
        while j < len(sent) and not equal(reading, sent[j]):
            j += 1
        assert j < len(sent), (
            f"reading {i} ({reading}) matches no emulator value at or after index {start} "
            f"(expected {sent[start] if start < len(sent) else 'nothing more'})"
        )
        indices.append(j)
        j += 1
    return indices


def test_bridge_messages_validate(vm: VmRun):
    needs(vm, "bridge")
    records = recording(vm)
    bridge = [r for r in records if r["topic"].endswith(f".{STATION}")]
    assert bridge, f"nothing from the bridge in the recording\n{vm.tail()}"
    for record in bridge:
        validate_message(record["msg"])
        check_src(record["msg"], record["topic"])
        assert record["msg"]["station"] == STATION
    stats = json.loads(vm.text("bridge.stats.json"))
    for src, source in stats["sources"].items():
        assert source["gaps"] == 0 and source["duplicates"] == 0, (src, source)


def test_bridge_imu_readings_equal_what_the_sensor_sent(vm: VmRun):
    needs(vm, "bridge")
    sent = sent_imu(vm)
    pairs = samples(recording(vm), "imu")
    assert len(pairs) >= IMU_MIN, f"{len(pairs)} IMU readings recorded\n{vm.tail()}"
    for msg, _ in pairs:
        assert msg.get("device", "").upper() == emu.IMU_ADDRESS, msg.get("device")

    def equal(reading: dict, packet: dict) -> bool:
        acc, gyro, angle = imu_expected(packet["raw"])
        return close(reading["acc_g"], acc) and close(reading["gyro_dps"], gyro) and close(reading["angle_deg"], angle)

    ks = [sent[i]["k"] for i in match_in_order([r for _, r in pairs], sent, equal)]
    conn = {p["k"]: p["conn"] for p in sent}
    first = [k for k in ks if conn[k] == 1]
    second = [k for k in ks if conn[k] == 2]
    assert first and first[0] == 0, f"the first IMU reading is packet {ks[0]}, not 0"
    assert first == list(range(first[0], first[-1] + 1)), "IMU packets missing before the link drop"
    assert second, f"no IMU readings after the reconnect (last packet before the drop: {first[-1]})"
    resumed = min(k for k, c in conn.items() if c == 2)
    assert resumed == IMU_DROP_AFTER
    assert second[0] == resumed, f"after the reconnect the readings resume at packet {second[0]}, not {resumed}"
    assert second == list(range(second[0], second[-1] + 1)), "IMU packets missing after the reconnect"
    assert not [k for k in ks if conn[k] > 2], "the IMU link dropped more than once"
    lost = IMU_DROP_AFTER - 1 - first[-1]
    assert lost == 0, (
        f"{lost} IMU packet(s) sent just before the peripheral dropped the link never reached the recording "
        f"(packets {first[-1] + 1}..{IMU_DROP_AFTER - 1}; btmon.snoop shows whether the kernel got them). "
        "Note: once the link is torn down, recv() on the L2CAP socket reports the pending error "
        "(ECONNRESET) before notifications still queued on it; drain it with MSG_DONTWAIT after the error."
    )


def test_bridge_posture_readings_equal_the_sent_lines(vm: VmRun):
    needs(vm, "bridge")
    sent = sent_posture(vm)
    pairs = samples(recording(vm), "posture")
    assert len(pairs) >= POSTURE_MIN, f"{len(pairs)} posture readings recorded\n{vm.tail()}"
    for msg, _ in pairs:
        assert msg.get("device", "").upper() == emu.POSTURE_ADDRESS, msg.get("device")

    def equal(reading: dict, line: dict) -> bool:
        return close(reading["acc"], line["acc"]) and close(reading["mag"], line["mag"])

    ks = [sent[i]["k"] for i in match_in_order([r for _, r in pairs], sent, equal)]
    assert ks == list(range(len(ks))), f"posture lines missing or out of order: {ks[:20]}..."


def test_bridge_status_shows_the_imu_reconnect(vm: VmRun):
    needs(vm, "bridge")
    statuses = [r["msg"] for r in recording(vm)
                if r["topic"] == f"status.{STATION}" and r["msg"].get("type") == "status"]
    for status in statuses:
        assert status["state"] in STATES, status
        assert status["sensor"] in {"imu", "posture"}, status
        if "battery_pct" in status:
            assert 0 <= status["battery_pct"] <= 100, status
    imu = [s for s in statuses if s["sensor"] == "imu"]
    states = [s["state"] for s in imu]
    wanted, at = ["connected", "disconnected", "connected"], 0
    for state in states:
        if at < len(wanted) and state == wanted[at]:
            at += 1
    assert at == len(wanted), f"IMU status states {states}: want connected, then disconnected, then connected"
    for status in imu:
        if status["state"] in ("connected", "streaming"):
            assert status.get("device", "").upper() == emu.IMU_ADDRESS, status
    assert "connected" in [s["state"] for s in statuses if s["sensor"] == "posture"], statuses


def test_bridge_configured_the_imu(vm: VmRun):
    needs(vm, "bridge")
    commands = vm.jsonl("imu.commands.jsonl")
    rate = [c for c in commands if c.get("cmd") == "rate"]
    assert rate and all(c["hex"].startswith("ffaa03") for c in rate), commands
    assert any(c.get("cmd") == "read" and c.get("reg") == 0x03 for c in commands), commands
    unknown = [c for c in commands if c.get("cmd") == "unknown"]
    assert not unknown, f"malformed command frames: {unknown}"


def test_bridge_imu_packets_are_well_formed():
    # The emulator's packets are what the bridge decodes: 20 bytes, 55 61, int16 LE.
    packet = emu.imu_packet(emu.imu_raw(3))
    assert len(packet) == 20 and packet[:2] == b"\x55\x61"
    assert list(struct.unpack("<9h", packet[2:])) == emu.imu_raw(3)
