#!/usr/bin/env python3
"""Emulated BLE sensors for the VM test, on Bumble's virtual radio.

One process holds a Bumble LocalLink with three virtual controllers:

* the kernel-facing controller, attached to the guest kernel through
  /dev/vhci (it becomes hci0, "Bus: Virtual");
* a WitMotion WT901BLE IMU ("WT901BLE68", public address);
* a posture wearable ("Arduino Posture", random static address) that sends
  JSON lines over a Nordic-UART-style characteristic.

Everything the sensors send and receive is appended, as JSON lines, to files
in --results so that the host can compare it with what the bridge decoded:

  imu.sent.jsonl       {"k", "raw": [ax, ay, az, wx, wy, wz, roll, pitch, yaw], "conn", "t"}
  imu.commands.jsonl   {"hex", "cmd", ...} for every frame written to ffe9
  posture.sent.jsonl   {"k", "acc", "mag", "line", "conn", "t"}
  peripherals.events.jsonl  connections, subscriptions, MTU, link drops
  peripherals.ready    JSON with the sensors' addresses, once both advertise
  peripherals.summary.json  counters, written at exit

Runs until SIGTERM/SIGINT. Needs bumble==0.0.236 (the link fix below uses
its internals).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import struct
import sys
import time
from pathlib import Path
from typing import Any

from bumble import hci
from bumble.controller import Controller
from bumble.core import AdvertisingData, PhysicalTransport
from bumble.device import Connection, Device
from bumble.gatt import Characteristic, CharacteristicValue, Service
from bumble.host import Host
from bumble.link import LocalLink
from bumble.transport import open_transport
from bumble.transport.common import AsyncPipeSink

from sensor_values import (  # this directory; plain Python, shared with the host-side test
    IMU_ADDRESS,
    IMU_NAME,
    KERNEL_CONTROLLER_ADDRESS,
    NUS_RX,
    NUS_SERVICE,
    NUS_TX,
    POSTURE_ADDRESS,
    POSTURE_CHUNKS,
    POSTURE_NAME,
    WIT_NOTIFY,
    WIT_SERVICE,
    WIT_WRITE,
    imu_packet,
    imu_raw,
    posture_line,
)

log = logging.getLogger("peripherals")

# ---------------------------------------------------------------------------
# Logging to the results share


def plain(address: hci.Address) -> str:
    """AA:BB:CC:DD:EE:FF, without Bumble's /P suffix for public addresses."""
    return address.to_string(with_type_qualifier=False)


class JsonlLog:
    """Appends JSON lines; flushed periodically and at exit (9p writes are slow)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = open(path, "w", encoding="utf-8")
        self.t0 = time.monotonic()

    def write(self, **record: Any) -> None:
        record.setdefault("t", round(time.monotonic() - self.t0, 4))
        self.file.write(json.dumps(record, separators=(",", ":")) + "\n")

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()


# ---------------------------------------------------------------------------
# The link fix


class RoutedLink(LocalLink):
    """LocalLink that tags LE ACL data with the connection's own address.

    Bumble 0.0.236's LocalLink.send_acl_data labels LE data with the sender
    controller's *random* address. The kernel connects from its *public*
    address, so the peripheral finds no connection for the data it receives
    ("!!! no connection for ...") and ATT times out. Here the source address
    is the self_address of the sender's connection to the destination.
    """

    def send_acl_data(self, sender_controller, destination_address, transport, data):
        if transport != PhysicalTransport.LE:
            return super().send_acl_data(sender_controller, destination_address, transport, data)
        connection = sender_controller.le_connections.get(destination_address)
        source_address = (
            connection.self_address if connection is not None else sender_controller.random_address
        )
        destination = self.find_le_controller(destination_address)
        if destination is None:
            log.warning("no controller for LE ACL data to %s", destination_address)
            return
        asyncio.get_running_loop().call_soon(
            destination.on_link_acl_data, source_address, transport, data
        )


# ---------------------------------------------------------------------------
# Sensors


class Sensor:
    """A Bumble device on its own controller of the link, advertising a name."""

    def __init__(self, link: LocalLink, name: str, address: str, public: bool, events: JsonlLog):
        self.name = name
        self.public = public
        self.events = events
        address_type = hci.Address.PUBLIC_DEVICE_ADDRESS if public else hci.Address.RANDOM_DEVICE_ADDRESS
        self.address = hci.Address(address, address_type)
        self.controller = Controller(
            name, link=link, public_address=address if public else None
        )
        self.device = Device(
            name=name,
            address=None if public else self.address,
            host=Host(self.controller, AsyncPipeSink(self.controller)),
        )
        self.device.on("connection", self._on_connection)
        self.connection: Connection | None = None
        self.connections = 0

    async def start(self) -> None:
        await self.device.power_on()
        await self.advertise()

    async def advertise(self) -> None:
        data = bytes(
            AdvertisingData(
                [
                    (
                        AdvertisingData.FLAGS,
                        bytes(
                            [
                                AdvertisingData.LE_GENERAL_DISCOVERABLE_MODE_FLAG
                                | AdvertisingData.BR_EDR_NOT_SUPPORTED_FLAG
                            ]
                        ),
                    ),
                    (AdvertisingData.COMPLETE_LOCAL_NAME, self.name.encode()),
                ]
            )
        )
        await self.device.start_advertising(
            own_address_type=hci.OwnAddressType.PUBLIC if self.public else hci.OwnAddressType.RANDOM,
            advertising_data=data,
            scan_response_data=data,
            advertising_interval_min=100,
            advertising_interval_max=100,
        )
        self.events.write(event="advertising", sensor=self.name, address=plain(self.address))

    def _on_connection(self, connection: Connection) -> None:
        self.connections += 1
        self.connection = connection
        number = self.connections
        self.events.write(
            event="connected", sensor=self.name, conn=number, peer=plain(connection.peer_address)
        )
        connection.on(
            "disconnection", lambda reason: self._on_disconnection(connection, number, reason)
        )
        connection.on(
            "connection_att_mtu_update",
            lambda: self.events.write(
                event="mtu", sensor=self.name, conn=number, mtu=connection.att_mtu
            ),
        )

    def _on_disconnection(self, connection: Connection, number: int, reason: int) -> None:
        self.events.write(event="disconnected", sensor=self.name, conn=number, reason=reason)
        if self.connection is connection:
            self.connection = None
        self.on_disconnected()
        # Keep advertising, so the central can come back.
        asyncio.get_running_loop().create_task(self._readvertise())

    async def _readvertise(self) -> None:
        try:
            await self.advertise()
        except Exception:  # pragma: no cover - logged for the post-mortem
            log.exception("%s: could not restart advertising", self.name)

    # -- the notification stream, shared by every emulated sensor (subclasses define _stream)

    def _on_subscription(self, connection, notify_enabled: bool, indicate_enabled: bool) -> None:
        self.events.write(
            event="subscription", sensor=self.name, conn=self.connections, notify=notify_enabled
        )
        if notify_enabled and self.stream_task is None:
            self.stream_task = asyncio.get_running_loop().create_task(self._stream(connection))
        elif not notify_enabled:
            self.stop_stream()

    def stop_stream(self) -> None:
        if self.stream_task is not None:
            self.stream_task.cancel()
            self.stream_task = None

    def on_disconnected(self) -> None:
        self.stop_stream()


class WitMotionImu(Sensor):
    """WT901BLE: 0x55 0x61 packets on ffe4, commands on ffe9."""

    def __init__(self, link, events, results: Path, rate_hz: float, drop_after: int):
        super().__init__(link, IMU_NAME, IMU_ADDRESS, True, events)
        self.rate_hz = rate_hz
        self.drop_after = drop_after
        self.dropped = False
        self.k = 0
        self.rate_code = 0x06  # 10 Hz, the factory default
        self.saved_rate_code = self.rate_code
        self.unlocked = False
        self.sent = JsonlLog(results / "imu.sent.jsonl")
        self.commands = JsonlLog(results / "imu.commands.jsonl")
        self.stream_task: asyncio.Task | None = None

        self.notify_char = Characteristic(
            WIT_NOTIFY, Characteristic.Properties.NOTIFY, Characteristic.READABLE, b""
        )
        self.write_char = Characteristic(
            WIT_WRITE,
            Characteristic.Properties.WRITE | Characteristic.Properties.WRITE_WITHOUT_RESPONSE,
            Characteristic.WRITEABLE,
            CharacteristicValue(write=self._on_write),
        )
        self.device.add_service(Service(WIT_SERVICE, [self.notify_char, self.write_char]))
        self.notify_char.on("subscription", self._on_subscription)

    # -- commands

    def _on_write(self, connection: Connection, value: bytes) -> None:
        value = bytes(value)
        frames = [value[i : i + 5] for i in range(0, len(value), 5)] if len(value) % 5 == 0 else [value]
        for frame in frames:
            self._on_command(connection, frame)

    def _on_command(self, connection: Connection, frame: bytes) -> None:
        record: dict[str, Any] = {"hex": frame.hex(), "conn": self.connections}
        if len(frame) != 5 or frame[0:2] != b"\xff\xaa":
            record["cmd"] = "unknown"
        elif frame[2:] == b"\x69\x88\xb5":
            record["cmd"] = "unlock"
            self.unlocked = True
        elif frame[2] == 0x03:
            record.update(cmd="rate", code=frame[3], unlocked=self.unlocked)
            self.rate_code = frame[3]
        elif frame[2:] == b"\x00\x00\x00":
            record.update(cmd="save", unlocked=self.unlocked)
            self.saved_rate_code = self.rate_code
        elif frame[2] == 0x27:
            reg = frame[3]
            record.update(cmd="read", reg=reg)
            asyncio.get_running_loop().create_task(self._reply_register(connection, reg))
        else:
            record.update(cmd="write", reg=frame[2], value=frame[3] | frame[4] << 8)
        self.commands.write(**record)
        self.commands.flush()

    def registers(self, reg: int) -> list[int]:
        """The 8 registers reg..reg+7 a 0x71 reply carries."""
        known = {
            0x03: self.rate_code,  # RRATE
            0x04: 0x06,  # BAUD: 115200
            0x3A: 360,  # HX, HY, HZ: the datasheet's worked example
            0x3B: 105,
            0x3C: 122,
            0x64: 395,  # battery voltage x100
        }
        return [known.get(reg + i, 0) for i in range(8)]

    async def _reply_register(self, connection: Connection, reg: int) -> None:
        values = self.registers(reg)
        packet = b"\x55\x71" + struct.pack("<H", reg) + struct.pack("<8h", *values)
        await self.device.notify_subscriber(connection, self.notify_char, packet)
        self.commands.write(cmd="reply", reg=reg, values=values, hex=packet.hex(), conn=self.connections)
        self.commands.flush()

    # -- data stream

    async def _stream(self, connection: Connection) -> None:
        period = 1.0 / self.rate_hz
        deadline = time.monotonic()
        try:
            while True:
                raw = imu_raw(self.k)
                await self.device.notify_subscriber(connection, self.notify_char, imu_packet(raw))
                self.sent.write(k=self.k, raw=raw, conn=self.connections)
                self.k += 1
                if self.drop_after and self.k == self.drop_after and not self.dropped:
                    self.dropped = True
                    self.events.write(event="dropping", sensor=self.name, conn=self.connections, after=self.k)
                    self.sent.flush()
                    self.stream_task = None
                    await connection.disconnect()
                    return
                deadline += period
                delay = deadline - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                elif delay < -0.1:  # far behind (slow emulation): do not burst
                    deadline = time.monotonic()
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("IMU stream stopped")
            self.events.write(event="stream_error", sensor=self.name, conn=self.connections)

    def close(self) -> None:
        self.sent.close()
        self.commands.close()


class PostureWearable(Sensor):
    """JSON lines on a Nordic-UART TX characteristic, chunked into small notifications."""

    def __init__(self, link, events, results: Path, rate_hz: float):
        super().__init__(link, POSTURE_NAME, POSTURE_ADDRESS, False, events)
        self.rate_hz = rate_hz
        self.k = 0
        self.sent = JsonlLog(results / "posture.sent.jsonl")
        self.received = JsonlLog(results / "posture.rx.jsonl")
        self.stream_task: asyncio.Task | None = None
        self.tx = Characteristic(NUS_TX, Characteristic.Properties.NOTIFY, Characteristic.READABLE, b"")
        self.rx = Characteristic(
            NUS_RX,
            Characteristic.Properties.WRITE | Characteristic.Properties.WRITE_WITHOUT_RESPONSE,
            Characteristic.WRITEABLE,
            CharacteristicValue(write=self._on_rx),
        )
        self.device.add_service(Service(NUS_SERVICE, [self.rx, self.tx]))
        self.tx.on("subscription", self._on_subscription)
        self.notifications = 0

    def _on_rx(self, connection: Connection, value: bytes) -> None:
        self.received.write(hex=bytes(value).hex(), conn=self.connections)
        self.received.flush()

    async def _stream(self, connection: Connection) -> None:
        period = 1.0 / self.rate_hz
        deadline = time.monotonic()
        pending = b""
        try:
            while True:
                acc, mag, line = posture_line(self.k)
                self.sent.write(k=self.k, acc=acc, mag=mag, line=line, conn=self.connections)
                self.k += 1
                pending += line.encode()
                # Send whole chunks; a partial tail waits for the next line, so
                # notifications straddle line boundaries.
                while True:
                    size = min(POSTURE_CHUNKS[self.notifications % len(POSTURE_CHUNKS)], connection.att_mtu - 3, 20)
                    if len(pending) < size:
                        break
                    chunk, pending = pending[:size], pending[size:]
                    await self.device.notify_subscriber(connection, self.tx, chunk)
                    self.notifications += 1
                deadline += period
                delay = deadline - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                elif delay < -0.1:
                    deadline = time.monotonic()
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("posture stream stopped")
            self.events.write(event="stream_error", sensor=self.name, conn=self.connections)

    def close(self) -> None:
        self.sent.close()
        self.received.close()


# ---------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> int:
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    ready = results / "peripherals.ready"
    ready.unlink(missing_ok=True)
    events = JsonlLog(results / "peripherals.events.jsonl")

    link = RoutedLink()
    transport = await open_transport(args.transport)
    kernel_controller = Controller(
        "kernel",
        host_source=transport.source,
        host_sink=transport.sink,
        link=link,
        public_address=KERNEL_CONTROLLER_ADDRESS,
    )
    if not args.extended_reports:
        # Bumble's controller answers even legacy scans with LE Extended
        # Advertising Reports while it claims that feature; real controllers
        # driven by legacy commands send legacy reports (which hcitool needs).
        kernel_controller.le_features = kernel_controller.le_features & ~hci.LeFeatureMask.LE_EXTENDED_ADVERTISING

    imu = WitMotionImu(link, events, results, args.imu_hz, args.imu_drop_after)
    posture = PostureWearable(link, events, results, args.posture_hz)
    await imu.start()
    await posture.start()

    info = {
        "kernel_controller": KERNEL_CONTROLLER_ADDRESS,
        "imu": {"name": IMU_NAME, "address": IMU_ADDRESS, "type": "public"},
        "posture": {"name": POSTURE_NAME, "address": POSTURE_ADDRESS, "type": "random"},
        "imu_drop_after": args.imu_drop_after,
    }
    tmp = ready.with_suffix(".tmp")
    tmp.write_text(json.dumps(info) + "\n")
    tmp.rename(ready)
    events.write(event="ready")
    events.flush()
    print(f"peripherals: ready ({IMU_NAME} {IMU_ADDRESS}, {POSTURE_NAME} {POSTURE_ADDRESS})", flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except asyncio.TimeoutError:
            pass
        for f in (events, imu.sent, posture.sent):
            f.flush()

    # Streams first (a central that closed its sockets may leave the kernel
    # holding the links for a while), then the logs.
    for sensor in (imu, posture):
        sensor.stop_stream()
    await asyncio.sleep(0)

    summary = {
        "imu_sent": imu.k,
        "imu_connections": imu.connections,
        "imu_dropped": imu.dropped,
        "imu_rate_code": imu.rate_code,
        "posture_lines": posture.k,
        "posture_notifications": posture.notifications,
        "posture_connections": posture.connections,
    }
    (results / "peripherals.summary.json").write_text(json.dumps(summary) + "\n")
    print(f"peripherals: stopping {summary}", flush=True)
    events.write(event="stopped", **summary)
    events.close()
    imu.close()
    posture.close()
    await transport.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", required=True, help="directory for logs and the ready marker")
    parser.add_argument("--transport", default="vhci", help="Bumble transport of the kernel-facing controller")
    parser.add_argument("--imu-hz", type=float, default=100.0)
    parser.add_argument("--posture-hz", type=float, default=20.0)
    parser.add_argument(
        "--imu-drop-after", type=int, default=150,
        help="disconnect the IMU link once, from the peripheral side, after this many packets (0: never)",
    )
    parser.add_argument(
        "--extended-reports", action="store_true",
        help="keep Bumble's LE extended advertising reports (0x0D) towards the kernel",
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="peripherals %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
