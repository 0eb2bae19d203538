"""The Wi-Fi chaos run, short (tests/python/chaos_run.py): three station computers
replaying a recording at speed 1 over links that drop 10 % of their packets, one
partitioned twice for 8 s, one throttled to 1 Mbit/s with a deep queue, one
flapping, and the bus killed during the first partition; the store equals a
clean run's. `make soak` runs the links alone and with the bus killed, longer.

Needs root (ip netns, unshare, mount), nft and tc; skipped, saying why, where any is missing.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import chaos_run
import fault_run


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    reason = chaos_run.missing_tools()
    if reason:
        pytest.skip(reason)
    # One recording for both runs: about 80 s of three stations.
    return fault_run.make_recording(tmp_path_factory.mktemp("chaos-recording"), chaos_run.SHORT.profile,
                                    sims=fault_run.SIM_STATIONS[:3])


def check(result: dict) -> None:
    report = chaos_run.format_report(result)
    assert result["ok"], report
    partitions = [e for e in result["chaos"] if e["what"].startswith("partitioned")]
    assert len(partitions) == 2 and all(p["to_s"] for p in partitions), report
    # The partitions made the server's programs miss readings; they fetched them, and the store
    # held the partitioned station's readings within a minute of each partition's end.
    assert all(p["caught_up_s"] is not None and p["stored_s"] is not None for p in partitions), report
    flapping = next(e for e in result["chaos"] if e["what"].startswith("link flapping"))
    assert len(flapping["flaps"]) >= 3, report
    for category in ("readings", "reps", "sets", "rejected"):
        assert result["categories"][category]["clean"] > 0, report


# The links' chaos with the bus killed too: the links alone are a part of it, run on their own
# by `make soak` (chaos_run.py without --kill-bus), at full length.
def test_chaos_loses_nothing(recording, tmp_path):
    result = chaos_run.run(tmp_path, chaos_run.SHORT, kill_bus=True, seed=1, recording=recording, quiet_s=15.0,
                           settle_timeout=120.0)
    check(result)
    assert result["bus_starts"] == 2, chaos_run.format_report(result)
