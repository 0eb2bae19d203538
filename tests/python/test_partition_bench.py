"""The network recovery benchmark's pieces, short (about 1.5 minutes): tests/python/partition_bench.py
with one short partition, then the same on the link as built and throttled to 1 Mbit/s. Its report
has every run and consumer, the times are ordered as they happen, the fetch after the partition is
counted, and nothing is lost: the store holds every reading of the station's journal and no consumer
counts one lost. No time is asserted: the speed is `make bench`'s to measure.

Needs root (ip netns), nft and tc; skipped, saying why, where any is missing."""

from __future__ import annotations

import contextlib
import io
import json
import shutil

import pytest

import partition_bench
from test_multihost import namespaces_available

SECONDS = "8"


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """One short run of the benchmark: its result, what it printed and its exit status."""
    reason = namespaces_available() or next((f"needs {t}" for t in ["nft", "tc"] if not shutil.which(t)), None)
    if reason:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("partition-bench")
    out = folder / "report.json"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = partition_bench.main(["--partitions", SECONDS, "--fetch-partition", SECONDS, "--throttle-kbit", "1000",
                                     "--json", str(out), "--folder", str(folder / "run")])
    return json.loads(out.read_text()), printed.getvalue(), code


def test_a_short_partition_is_timed_and_the_store_loses_nothing(bench):
    result, printed, code = bench
    end = result["end"]
    assert end["exited"] == [], end["exited"]
    assert end["readings"] > 0 and end["missing_from_store"] == 0, end
    assert end["store_lost"] == 0 and end["store_hole"] is None, end
    assert end["consumers_lost"]["session-recorder"] == 0, end["consumers_lost"]
    assert [r["kind"] for r in result["runs"]] == ["recovery", "baseline", "throttled"]
    assert set(result["summary"]) == {f"{kind} {SECONDS}" for kind in ["recovery", "baseline", "throttled"]}
    for run in result["runs"]:
        assert run["restored"] - run["cut"] >= float(SECONDS), run
        assert set(run["caught_up_s"]) == set(partition_bench.CONSUMERS), run
        recorder = run["caught_up_s"]["session-recorder"]
        assert recorder is not None and 0 < recorder <= run["all_s"], run
        assert all(t is None or 0 <= t <= run["all_s"] for t in run["caught_up_s"].values()), run
        # The bus dropped the silent station: the partition's readings were fetched, not sent late.
        assert run["missed_readings"] > 0 and run["recovered"]["session-recorder"] > 0, run
        assert run["readings_per_s"] > 0 and run["link_kb_per_s"] > 0, run
        assert run["lost"]["session-recorder"] == 0, run
        if run["throttle_kbit"] is None:
            assert run["lost"] == dict.fromkeys(partition_bench.CONSUMERS, 0), run
    assert result["runs"][-1]["throttle_kbit"] == 1000 and result["runs"][-2]["throttle_kbit"] is None
    assert printed.count(f" {SECONDS} s |") == 3 and "1000 kbit/s" in printed, printed
    assert code == (0 if not any(end["consumers_lost"].values()) else 1), (code, end["consumers_lost"])


# Not strict: whether a given run loses depends on how the slow link's queue falls.
def test_over_a_slow_link_no_consumer_loses_anything(bench):
    result, _, _ = bench
    assert result["runs"][-1]["lost"] == dict.fromkeys(partition_bench.CONSUMERS, 0), result["runs"][-1]
