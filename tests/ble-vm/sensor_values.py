"""What the emulated BLE sensors send: names, addresses, UUIDs and the
deterministic values (pure functions of the packet or line number k).

Plain Python (no Bumble), so that peripherals.py (in the VM) and
tests/python/test_ble_vm.py (on the host) share one definition.
"""

from __future__ import annotations

import json
import math
import struct

# ---------------------------------------------------------------------------
# UUIDs and names (WitMotion's base UUID ends in 9a34fb, not the SIG's 9b34fb)

WIT_SERVICE = "0000ffe5-0000-1000-8000-00805f9a34fb"
WIT_NOTIFY = "0000ffe4-0000-1000-8000-00805f9a34fb"
WIT_WRITE = "0000ffe9-0000-1000-8000-00805f9a34fb"
NUS_SERVICE = "6e400001-b5a3-f393-e0a9-e50e24dcca9e"
NUS_RX = "6e400002-b5a3-f393-e0a9-e50e24dcca9e"  # central writes
NUS_TX = "6e400003-b5a3-f393-e0a9-e50e24dcca9e"  # peripheral notifies

IMU_NAME = "WT901BLE68"
POSTURE_NAME = "Arduino Posture"

KERNEL_CONTROLLER_ADDRESS = "00:1B:DC:0B:E0:01"  # public; must not be zero
IMU_ADDRESS = "00:0C:BF:07:1E:68"  # public
POSTURE_ADDRESS = "E3:5A:17:C0:FF:EE"  # random static (two top bits set)

# ---------------------------------------------------------------------------
# Deterministic sensor values (pure functions of the packet/line number k)

FULL_SCALE = (32767, -32768, -32767, 0, -1, 1)


def imu_raw(k: int) -> list[int]:
    """The 9 int16 raw values of WitMotion packet k: ax ay az wx wy wz roll pitch yaw.

    Mostly a hash of (k, field), so values cover the whole int16 range with
    both signs; every tenth packet puts full-scale values in three fields.
    """
    values = []
    for i in range(9):
        h = (k * 2654435761 + i * 40503 + 0x9E37) & 0xFFFFFFFF
        h ^= h >> 15
        h = (h * 2246822519) & 0xFFFFFFFF
        h ^= h >> 13
        values.append((h & 0xFFFF) - 32768)
    if k % 10 == 3:
        for j in range(3):
            field = (k // 10 + 3 * j) % 9
            values[field] = FULL_SCALE[(k // 10 + j) % len(FULL_SCALE)]
    return values


def imu_packet(raw: list[int]) -> bytes:
    return b"\x55\x61" + struct.pack("<9h", *raw)


def posture_values(k: int) -> tuple[list[float], list[float]]:
    """acc (g) and mag values of posture line k; at most 3 decimals, no exponents."""
    acc = [
        round(1.2 * math.sin(k / 7.0), 3),
        round(-0.8 * math.cos(k / 11.0), 3),
        round(0.95 + 0.01 * (k % 9), 3),
    ]
    mag = [
        round(30.0 * math.sin(k / 13.0), 2),
        -12.5 + (k % 7),
        44.0 - 0.25 * (k % 3),
    ]
    return acc, mag


def posture_line(k: int) -> tuple[list[float], list[float], str]:
    acc, mag = posture_values(k)
    line = json.dumps({"acc": acc, "mag": mag}, separators=(",", ":")) + "\n"
    return acc, mag, line


# Notification sizes the wearable cycles through: all at most 20 bytes, and
# uneven, so line boundaries fall anywhere inside a notification.
POSTURE_CHUNKS = (20, 20, 13, 20, 7, 20, 16)
