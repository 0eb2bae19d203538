"""What an attacker on the gym's network tries against a secured installation,
run from its own network namespace by test_multihost.py. Every
message it publishes names the athlete "intruder", so the test can look for
them downstream. Prints one JSON object: what it sent and what it got back.

    python3 attacker.py --host 10.77.0.1 --server-cert server.key --station-cert rack-01.key_secret --revoked-cert old.key_secret
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import zmq
import zmq.auth


def envelope(kind: str, station: str, seq: int, fields: dict | None = None) -> list[bytes]:
    body = {"v": 1, "type": kind, "station": station, "src": f"attacker-1/{kind}.{station}", "seq": seq,
            "ts": time.time(), "athlete": "intruder", **(fields or {})}
    return [f"{kind}.{station}".encode(), json.dumps(body, separators=(",", ":")).encode()]


FORGED = [
    envelope("sample", "rack-02", 2**53 - 1),  # as another station, with a seq meant to silence it
    envelope("cmd", "rack-01", 1, {"id": "c1", "command": "athlete.assign", "args": {"athlete": "intruder", "rom_mm": 100}}),
    envelope("rep", "rack-01", 1, {"mean_velocity_m_s": 9.99}),
    envelope("heartbeat", "bus", 1, {"role": "vbt-bus", "uptime_s": 1, "interval_s": 1}),
    envelope("alert", "rack-01", 1, {"kind": "fire"}),
]


def keyed(ctx: zmq.Context, kind: int, cert: str | None, server_key: bytes, unknown: bool = False) -> zmq.Socket:
    sock = ctx.socket(kind)
    if unknown:
        sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
        sock.curve_serverkey = server_key
    elif cert:
        sock.curve_publickey, sock.curve_secretkey = zmq.auth.load_certificate(cert)
        sock.curve_serverkey = server_key
    return sock


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", required=True)
    parser.add_argument("--server-cert", required=True)
    parser.add_argument("--station-cert", required=True, help="station rack-01's stolen secret certificate")
    parser.add_argument("--revoked-cert", required=True)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    server_key = zmq.auth.load_certificate(args.server_cert)[0]
    pub, sub, query = (f"tcp://{args.host}:{port}" for port in (7701, 7702, 7703))
    ctx = zmq.Context()
    ctx.setsockopt(zmq.LINGER, 0)
    identities = {"no-key": (None, False), "unknown-key": (None, True), "revoked-key": (args.revoked_cert, False),
                  "station-a-key": (args.station_cert, False)}
    report: dict = {"sent": {}, "received_from_bus": {}, "query_replies": {}}
    publishers = {name: keyed(ctx, zmq.PUB, cert, server_key, unknown) for name, (cert, unknown) in identities.items()}
    subscribers = {name: keyed(ctx, zmq.SUB, cert, server_key, unknown) for name, (cert, unknown) in identities.items()
                   if name != "station-a-key"}
    dealers = {name: keyed(ctx, zmq.DEALER, cert, server_key, unknown) for name, (cert, unknown) in identities.items()}
    for sock in publishers.values():
        sock.connect(pub)
    for sock in subscribers.values():
        sock.setsockopt(zmq.SUBSCRIBE, b"")
        sock.connect(sub)
    for name, sock in dealers.items():
        sock.connect(query)
        sock.send_multipart([b"", json.dumps({"id": name, "query": "athlete.list"}).encode()], zmq.NOBLOCK)
        sock.send_multipart([b"", json.dumps({"id": name + "-w", "query": "athlete.add",
                                              "args": {"id": "intruder", "name": "Intruder"}}).encode()], zmq.NOBLOCK)
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        for name, sock in publishers.items():
            for frames in FORGED:
                sock.send_multipart(frames)
                report["sent"][name] = report["sent"].get(name, 0) + 1
        time.sleep(0.05)
    # Anything the bus or the recorder let through arrives well within this.
    time.sleep(1.0)
    for name, sock in subscribers.items():
        count = 0
        while sock.poll(0):
            sock.recv_multipart()
            count += 1
        report["received_from_bus"][name] = count
    for name, sock in dealers.items():
        replies = []
        while sock.poll(0):
            replies.append(json.loads(sock.recv_multipart()[-1]))
        report["query_replies"][name] = replies
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
