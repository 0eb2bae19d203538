"""A pyzmq subscriber on its own thread that hands every message to a callback: the tests'
independent view of the bus (what they compare the programs' own counts with)."""

from __future__ import annotations

import json
import threading
from typing import Callable

import zmq


class BusTap:
    """Subscribes to `prefix` at `endpoint`; calls `on_message(message_dict)` for each message,
    on the tap's thread, until `close()`."""

    def __init__(self, endpoint: str, on_message: Callable[[dict], None], prefix: bytes = b""):
        self.on_message = on_message
        self.stop = threading.Event()
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.SUB)
        self.socket.setsockopt(zmq.SUBSCRIBE, prefix)
        self.socket.connect(endpoint)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.socket, zmq.POLLIN)
        while not self.stop.is_set():
            if poller.poll(50):
                _, body = self.socket.recv_multipart()
                self.on_message(json.loads(body))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.socket.close(0)
        self.context.term()


class BusLog:
    """Every message on the bus, kept as a pyzmq subscriber sees it (independent of the programs);
    `of` picks them by type, station and fields (`station` defaults to `default_station`)."""

    def __init__(self, endpoint: str, default_station: str | None = None):
        self.messages: list[dict] = []
        self.default_station = default_station
        self.lock = threading.Lock()
        self.tap = BusTap(endpoint, self.keep)

    def keep(self, message: dict) -> None:
        with self.lock:
            self.messages.append(message)

    def of(self, kind: str, station: str | None = None, **match) -> list[dict]:
        station = station or self.default_station
        with self.lock:
            return [m for m in self.messages if m["type"] == kind and (station is None or m["station"] == station)
                    and all(m.get(k) == v for k, v in match.items())]

    def close(self) -> None:
        self.tap.close()
