"""The rack display benchmark's pieces, short (about 40 s): one simulated station against a whole
installation, its rack display paired in headless Chromium with the sound hooks, a 20 s window.
Every rep the raw subscriber saw in the window is found on the page (its count and velocity)
and has its sound scheduled on a running AudioContext, and every time the benchmark reports is
there. No latency is asserted: the speed is `make bench`'s to measure (rack_bench.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("selenium")
import rack_bench  # noqa: E402


def test_every_rep_of_the_window_reaches_the_page_and_its_sound(tmp_path):
    result = rack_bench.one(stations=1, seconds=20, folder=tmp_path / "n1")
    reps = result["reps"]
    assert len(reps) >= 2, f"too few reps in the window to judge: {result['reps_on_bus_all_stations']} on the bus"
    assert result["unmatched_dom"] == [], result["unmatched_dom"]
    assert result["unmatched_sound"] == [], result["unmatched_sound"]
    assert result["matched_dom"] == result["matched_sound"] == len(reps)
    for rep in reps:
        assert rep["t_input"] is not None and rep["t_input"] >= rep["t_end"], rep
        # Each in the order it travels: the reading, then the bus; the page after the reading,
        # and the tone scheduled after the page's cue.
        assert rep["t_input"] < rep["bus"] and rep["t_input"] < rep["dom"], rep
        assert rep["cue"] <= rep["sound"] and rep["audio_state"] == "running", rep
    for stage in ("reading_to_bus", "reading_to_dom", "reading_to_sound", "lockout_to_dom", "bus_to_dom"):
        assert result["latency"][stage]["count"] == len(reps), (stage, result["latency"][stage])
    offsets = result["clock_offset_ms"]["rack-001"]
    assert len(offsets) == 2 and all(abs(x) < 5 for x in offsets), f"the page's clock is not the wall clock: {offsets}"
    assert rack_bench.report([result]).count("rack-001") >= 1
