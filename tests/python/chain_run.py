"""A gym cut off from the chain store while it trains on: nothing lost or doubled once it is back.

A PostgreSQL of the run's own (tests/python/test_chain.py's Chain) runs in a network namespace of
the run's own (`vbtch<pid>`), with two gyms' uplinks in it too: `steady` reaches the server at
127.0.0.1, `cutoff` at 127.0.0.2 (TLS verify-full still names `localhost`). Each gym is a real
session-recorder on its own bus with a detector's publisher (test_chain's Gym). Once both gyms'
first round is in the chain store, nftables in the namespace drops every packet to and from
127.0.0.2's PostgreSQL port: DROP, not reject, so cutoff's open connection hangs as over a dead
Wi-Fi. For `--cut-s` seconds both gyms go on training (a round every `--round-s`); steady's rows
keep reaching the chain store and cutoff's uplink must notice the dead link itself (its
`--dead-link` bound, libpq keepalives and tcp_user_timeout) and log `chain store unavailable`
while the cut lasts. Then the rule goes, both gyms train a last round, and the chain store must
equal the union of the two gyms' SQLite stores row for row (test_chain.differences: none
missing, none extra, none different) within a bound.

Times in the report: `noticed_s` from the cut to cutoff's `chain store unavailable`,
`reconnected_s` from the link's return to its next `chain store connected`, `caught_up_s` from
the link's return to the chain store equal to the gyms' stores.

Needs root (ip netns) and nft; PostgreSQL 15 and openssl as test_chain. Run from the repository
root (the cut's length and a minute):
    VBT_BIN_DIR=.build/debug python3 tests/python/chain_run.py [--cut-s 600] [--dead-link 15] [--json FILE] [--folder DIR]
Exit status 0 when the stores match and the cut was noticed while it lasted, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# The gyms' buses are on loopback without keys, as under pytest (tests/python/conftest.py).
os.environ.setdefault("VBT_INSECURE", "1")

from test_chain import Chain, Gym, differences, union, TABLES  # noqa: E402
from test_multihost import namespaces_available  # noqa: E402
from test_wire import BIN_DIR, wait_until  # noqa: E402

STEADY, CUTOFF = "steady", "cutoff"
# How long after the link is back the chain store may take to equal the gyms' stores: the dead-link
# bound of a connection tried just before, libpq's connect_timeout (10 s), and the backlog's sending.
CATCH_UP_S = 90.0


def unavailable() -> str | None:
    """Why this run cannot happen here, or None."""
    return namespaces_available() or (None if shutil.which("nft") else "needs nft")


class Uplink:
    """A vbt-uplink inside the namespace (`ip netns exec` becomes the uplink: its pid is this one's)."""

    def __init__(self, gym: Gym, chain: Chain, address: str, dead_link: int, logs: Path):
        self.name = f"uplink-{gym.name}"
        self.stderr_path = logs / f"{self.name}.stderr"
        args = [str(BIN_DIR / "vbt-uplink"), "--db", str(gym.db), "--gym", gym.name, "--batch", "4", "--interval", "0.2",
                "--dead-link", str(dead_link), "--chain-url", f"postgresql:///chain?hostaddr={address}",
                *chain.gym_options(gym.name)]
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(["ip", "netns", "exec", str(chain.netns), *args], stdout=subprocess.DEVNULL, stderr=err,
                                         stdin=subprocess.DEVNULL, env=gym.bus.env)

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def lines(self, text: str) -> list[str]:
        return [line for line in self.stderr().splitlines() if text in line]

    def describe(self) -> str:
        return f"{self.name} (exit {self.proc.poll()}):\n" + "\n".join(self.stderr().splitlines()[-15:])

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def nft(ns: str, *args: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, "nft", *args], check=True, capture_output=True, timeout=30)


def cut(ns: str, port: int, on: bool) -> None:
    """Drops (silently) every packet to and from 127.0.0.2's `port`: both ways, so neither data nor
    acknowledgements nor keepalive probes pass, in the namespace's own nftables."""
    if not on:
        nft(ns, "delete", "table", "inet", "vbtchaincut")
        return
    nft(ns, "add", "table", "inet", "vbtchaincut")
    nft(ns, "add", "chain", "inet", "vbtchaincut", "out", "{ type filter hook output priority 0; }")
    nft(ns, "add", "rule", "inet", "vbtchaincut", "out", "ip", "daddr", "127.0.0.2", "tcp", "dport", str(port), "drop")
    nft(ns, "add", "rule", "inet", "vbtchaincut", "out", "ip", "saddr", "127.0.0.2", "tcp", "sport", str(port), "drop")


def in_chain(chain: Chain, gym: str) -> int:
    return int(chain.query(f"SELECT count(*) FROM reps WHERE gym = '{gym}'"))


def run(cut_s: float, dead_link: int, round_s: float, folder: Path) -> dict:
    ns = f"vbtch{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True, timeout=30)
    chain = Chain(folder / "chain", gyms=[STEADY, CUTOFF], netns=ns)
    (folder / "chain").mkdir(parents=True, exist_ok=True)
    gyms: list[Gym] = []
    uplinks: dict[str, Uplink] = {}
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True, capture_output=True, timeout=30)
        chain.start()
        gyms = [Gym(name, folder, chain) for name in [STEADY, CUTOFF]]
        steady, cutoff = gyms
        stores = {gym.name: gym.db for gym in gyms}
        uplinks = {STEADY: Uplink(steady, chain, "127.0.0.1", dead_link, folder),
                   CUTOFF: Uplink(cutoff, chain, "127.0.0.2", dead_link, folder)}
        round_ = 1
        for gym in gyms:
            gym.train(round_)
        wait_until(lambda: all(g.stored() for g in gyms), "round 1 stored in both gyms")
        wait_until(lambda: not differences(chain, stores), "round 1 in the chain store", timeout=60,
                   detail=lambda: "\n".join(differences(chain, stores) + [u.describe() for u in uplinks.values()]))

        earlier = len(uplinks[CUTOFF].lines("chain store unavailable"))
        cut(ns, chain.port, True)
        cut_at = time.monotonic()
        noticed_s: float | None = None
        next_round = cut_at
        while (now := time.monotonic()) < cut_at + cut_s:
            if now >= next_round:
                round_ += 1
                for gym in gyms:
                    gym.train(round_)
                next_round = now + round_s
            if noticed_s is None and len(uplinks[CUTOFF].lines("chain store unavailable")) > earlier:
                noticed_s = time.monotonic() - cut_at
            assert all(u.proc.poll() is None for u in uplinks.values()), "\n".join(u.describe() for u in uplinks.values())
            time.sleep(0.2)
        wait_until(lambda: steady.stored(), "steady's rounds stored")
        # What the chain store held as the link came back: steady's every rep, cutoff's first round's.
        wait_until(lambda: in_chain(chain, STEADY) == steady.reps, "steady's reps in the chain store during the cut", timeout=30)
        during = {STEADY: in_chain(chain, STEADY), CUTOFF: in_chain(chain, CUTOFF)}
        trained = {g.name: g.reps for g in gyms}
        connected_before = len(uplinks[CUTOFF].lines("chain store connected"))
        cut(ns, chain.port, False)
        back_at = time.monotonic()

        wait_until(lambda: len(uplinks[CUTOFF].lines("chain store connected")) > connected_before, "cutoff's uplink to connect again",
                   timeout=CATCH_UP_S, detail=uplinks[CUTOFF].describe)
        reconnected_s = time.monotonic() - back_at
        wait_until(lambda: all(g.stored() for g in gyms), "every round stored in both gyms")
        wait_until(lambda: not differences(chain, stores), "the chain store to equal the gyms' stores after the cut",
                   timeout=CATCH_UP_S, detail=lambda: "\n".join(differences(chain, stores) + [u.describe() for u in uplinks.values()]))
        caught_up_s = time.monotonic() - back_at
        round_ += 1
        for gym in gyms:
            gym.train(round_)
        wait_until(lambda: all(g.stored() for g in gyms), "the last round stored in both gyms")
        wait_until(lambda: not differences(chain, stores), "the last round in the chain store", timeout=60,
                   detail=lambda: "\n".join(differences(chain, stores)))
        exits = {name: uplink.stop() for name, uplink in uplinks.items()}
        return {
            "cut_s": cut_s, "dead_link_s": dead_link, "rounds": round_, "noticed_s": noticed_s, "reconnected_s": reconnected_s,
            "caught_up_s": caught_up_s, "differences": differences(chain, stores),
            "rows": {table: len(union(stores, table)) for table in TABLES},
            "reps": {g.name: g.reps for g in gyms},
            "reps_in_chain_when_restored": during, "reps_trained_when_restored": trained,
            "unavailable_lines": len(uplinks[CUTOFF].lines("chain store unavailable")), "uplink_exits": exits,
        }
    finally:
        for uplink in uplinks.values():
            uplink.stop()
        for gym in gyms:
            gym.close()
        chain.stop()
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cut-s", type=float, default=25.0, help="how long cutoff's link drops every packet")
    parser.add_argument("--dead-link", type=int, default=15, help="the uplinks' --dead-link")
    parser.add_argument("--round-s", type=float, default=None, help="seconds between training rounds during the cut")
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--folder", type=Path, help="keep the stores and logs here (default: a new temp folder)")
    args = parser.parse_args(argv)
    reason = unavailable()
    if reason:
        print(f"chain_run: {reason}", file=sys.stderr)
        return 2
    folder = args.folder or Path(tempfile.mkdtemp(prefix="vbt-chain-run-"))
    folder.mkdir(parents=True, exist_ok=True)
    round_s = args.round_s or max(5.0, args.cut_s / 10)
    report = run(args.cut_s, args.dead_link, round_s, folder)
    ok = not report["differences"] and report["noticed_s"] is not None
    print(f"cut {report['cut_s']:.0f} s (dead link {report['dead_link_s']} s): noticed after "
          f"{report['noticed_s'] if report['noticed_s'] is None else round(report['noticed_s'], 1)} s, reconnected "
          f"{report['reconnected_s']:.1f} s and caught up {report['caught_up_s']:.1f} s after the link came back; "
          f"{sum(report['rows'].values())} rows in {report['rounds']} rounds, "
          f"{'none lost or doubled' if not report['differences'] else 'DIFFERENT: ' + '; '.join(report['differences'])}")
    print(f"folder: {folder}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
