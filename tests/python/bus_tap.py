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
