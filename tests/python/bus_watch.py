"""A bus subscriber with its own key, for tests that run it in another network
namespace: writes every message it receives as one JSON line
{"topic": ..., "body": ...} to --out, flushed at once, until SIGTERM.

    python3 bus_watch.py --endpoint tcp://10.77.0.1:7702 --cert viewer.key_secret --server-cert server.key --out FILE
"""
from __future__ import annotations

import argparse
import json
import signal
import sys

import zmq
import zmq.auth


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--cert", required=True, help="this subscriber's secret certificate")
    parser.add_argument("--server-cert", required=True, help="the bus's public certificate")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    ctx = zmq.Context()
    sock = ctx.socket(zmq.SUB)
    sock.curve_publickey, sock.curve_secretkey = zmq.auth.load_certificate(args.cert)
    sock.curve_serverkey = zmq.auth.load_certificate(args.server_cert)[0]
    sock.setsockopt(zmq.SUBSCRIBE, b"")
    sock.connect(args.endpoint)
    with open(args.out, "w", encoding="utf-8") as out:
        while not stop:
            if sock.poll(100):
                frames = sock.recv_multipart()
                topic = frames[0].decode("utf-8", "replace")
                body = frames[1].decode("utf-8", "replace") if len(frames) > 1 else ""
                out.write(json.dumps({"topic": topic, "body": body}) + "\n")
                out.flush()
    sock.close(0)
    ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
