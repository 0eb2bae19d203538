"""`vbt eval` checked by an independent computation.

A recording is synthesised here (a bar path of half-cosine moves, the laser at
50 Hz with a few mm of noise, envelopes as proto/ describes) together with
reference labels that differ a little from the truth, hold one label with no
rep (a false negative) and one empty velocity cell. `vbt eval --json` is run
on them; the matching (greedy by smallest time difference, one-to-one, within
the tolerance), precision/recall/F1 and the Bland-Altman figures (bias, MAE,
SD, bias +- 1.96 SD; Bland & Altman, The Lancet 1986) are recomputed with
numpy from the reps it reports and the labels, and must agree.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from test_wire import binary, validate_message

RATE_HZ = 50.0
START_T = 1_763_812_345.0  # sensor time, Unix s (~1.76e9)
TOP_MM, BOTTOM_MM = 530.0, 130.0
TOLERANCE_S = 0.5


def bar_path(ascents_s: list[float], rng: np.random.Generator, start: float) -> tuple[list[tuple[float, float]], list[dict]]:
    """Readings (t, distance_mm) of reps with pauses, and each rep's truth.

    Each rep: 1.5 s still at the top, 1.0 s down (half-cosine), 0.3 s still at
    the bottom, up in `ascent` s (half-cosine). The truth: the top is where the
    ascent ends; mean velocity = ROM / ascent, peak = pi/2 x that.
    """
    moves: list[tuple[float, float]] = [(TOP_MM, 1.0)]
    truth = []
    t = start + 1.0
    for ascent in ascents_s:
        moves += [(TOP_MM, 1.5), (BOTTOM_MM, 1.0), (BOTTOM_MM, 0.3), (TOP_MM, ascent)]
        t += 1.5 + 1.0 + 0.3 + ascent
        rom_m = (TOP_MM - BOTTOM_MM) / 1000
        truth.append({"t_top": t, "mean": rom_m / ascent, "peak": math.pi / 2 * rom_m / ascent})
    moves.append((TOP_MM, 3.0))
    readings = []
    position, now = TOP_MM, start
    for target, seconds in moves:
        steps = max(1, round(seconds * RATE_HZ))
        for k in range(1, steps + 1):
            x = k / steps
            mm = position + (target - position) * (1 - math.cos(math.pi * x)) / 2
            readings.append((now + k / RATE_HZ, mm + rng.normal(0, 2.0)))
        position, now = target, now + steps / RATE_HZ
    return readings, truth


def recording_lines(station: str, readings: list[tuple[float, float]], src_instance: str) -> list[dict]:
    """Sample messages of 5 readings each, as sensor-bridge sends them, in recording lines."""
    lines = []
    src = f"{src_instance}/sample.{station}"
    for seq, i in enumerate(range(0, len(readings), 5), start=1):
        batch = readings[i:i + 5]
        msg = {"v": 1, "type": "sample", "station": station, "src": src, "seq": seq, "ts": round(batch[-1][0] + 0.003, 6),
               "sensor": "distance", "device": "sim",
               "samples": [{"t": round(t, 6), "distance_mm": round(mm, 1)} for t, mm in batch]}
        validate_message(msg)
        lines.append({"topic": f"sample.{station}", "msg": msg, "at": batch[-1][0]})
    return lines


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("eval")
    rng = np.random.default_rng(20261125)
    stations = {"rack-01": [0.60, 0.70, 0.80, 0.90, 1.00], "rack-02": [0.50, 0.65, 0.80]}
    lines, truth = [], {}
    for n, (station, ascents) in enumerate(stations.items()):
        readings, reps = bar_path(ascents, rng, START_T + 7.3 * n)
        truth[station] = reps
        lines += recording_lines(station, readings, f"sensor-bridge-0000000{n}")
    lines.sort(key=lambda line: line["at"])
    # One line a live subscriber would refuse: it is skipped and reported, never fatal.
    first = lines[0]["at"]
    text = [json.dumps({"t": round(line["at"] - first, 6), "topic": line["topic"], "msg": line["msg"]}) for line in lines]
    text.insert(10, '{"t": 0.2, "topic": "sample.rack-01", "msg": "not an object"}')
    recording = tmp / "session.jsonl"
    recording.write_text("\n".join(text) + "\n", encoding="utf-8")

    # Labels: the truth shifted a little (a reference instrument is not the truth either).
    rows = []
    for station, reps in truth.items():
        for k, rep in enumerate(reps):
            mean = round(rep["mean"] * (1 + rng.uniform(-0.04, 0.04)), 4)
            peak = round(rep["peak"] * (1 + rng.uniform(-0.05, 0.05)), 4)
            rows.append([station, f"{rep['t_top'] + rng.uniform(-0.08, 0.08):.4f}", f"{mean}", "" if (station, k) == ("rack-01", 2) else f"{peak}"])
    # A rep the reference saw and the device did not: during the final still period of rack-01.
    rows.append(["rack-01", f"{truth['rack-01'][-1]['t_top'] + 2.2:.4f}", "0.55", "0.8"])
    labels = tmp / "labels.csv"
    with labels.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["station", "t_top", "mean_velocity_mps", "peak_velocity_mps"])
        writer.writerows(rows)
    return {"tmp": tmp, "recording": recording, "labels": labels, "truth": truth}


def run_eval(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary("vbt"), "eval", *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def read_labels(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return [{"line": n, "station": r["station"], "t_top": float(r["t_top"]),
                 "mean": float(r["mean_velocity_mps"]) if r["mean_velocity_mps"] else None,
                 "peak": float(r["peak_velocity_mps"]) if r["peak_velocity_mps"] else None}
                for n, r in enumerate(csv.DictReader(f), start=2)]


def greedy_match(reps: list[dict], labels: list[dict], tolerance: float) -> dict[int, int]:
    """Rep index -> label index: qualifying pairs by smallest |dt| first, each rep and label used once."""
    pairs = sorted((abs(r["t_top"] - l["t_top"]), i, j) for i, r in enumerate(reps) for j, l in enumerate(labels)
                   if r["station"] == l["station"] and abs(r["t_top"] - l["t_top"]) <= tolerance)
    used_r, used_l, match = set(), set(), {}
    for _, i, j in pairs:
        if i not in used_r and j not in used_l:
            used_r.add(i), used_l.add(j)
            match[i] = j
    return match


def agreement(diffs: list[float]) -> dict:
    d = np.array(diffs, dtype=float)
    sd = float(np.std(d, ddof=1))
    bias = float(np.mean(d))
    return {"n": len(d), "bias_mps": bias, "mae_mps": float(np.mean(np.abs(d))), "sd_mps": sd,
            "loa_lower_mps": bias - 1.96 * sd, "loa_upper_mps": bias + 1.96 * sd}


def expected_figures(reps: list[dict], labels: list[dict], match: dict[int, int], station: str | None) -> dict:
    rs = [i for i, r in enumerate(reps) if station is None or r["station"] == station]
    ls = [j for j, l in enumerate(labels) if station is None or l["station"] == station]
    tp = sum(1 for i in rs if i in match)
    fp, fn = len(rs) - tp, len(ls) - tp
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    return {
        "detected_reps": len(rs), "labels": len(ls), "true_positives": tp, "false_positives": fp, "false_negatives": fn,
        "precision": precision, "recall": recall, "f1": 2 * precision * recall / (precision + recall),
        "mean_velocity": agreement([reps[i]["mean_velocity_mps"] - labels[match[i]]["mean"] for i in rs
                                    if i in match and labels[match[i]]["mean"] is not None]),
        "peak_velocity": agreement([reps[i]["peak_velocity_mps"] - labels[match[i]]["peak"] for i in rs
                                    if i in match and labels[match[i]]["peak"] is not None]),
    }


def assert_figures(got: dict, want: dict, where: str) -> None:
    for key, value in want.items():
        if isinstance(value, dict):
            assert_figures(got[key], value, f"{where}.{key}")
        elif isinstance(value, int):
            assert got[key] == value, (where, key, got[key], value)
        else:
            assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), (where, key, got[key], value)


def test_eval_agrees_with_an_independent_computation(session):
    plot = session["tmp"] / "agreement.svg"
    result = run_eval(str(session["recording"]), "--labels", str(session["labels"]), "--json", "--plot", str(plot))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    reps, labels = report["reps"], read_labels(session["labels"])

    # The detector found every simulated rep near its true top (the device works on this clean session).
    truth = session["truth"]
    for station, true_reps in truth.items():
        found = sorted(r["t_top"] for r in reps if r["station"] == station)
        assert len(found) == len(true_reps), (station, found, true_reps)
        assert all(abs(f - t["t_top"]) < 0.25 for f, t in zip(found, true_reps)), (station, found, true_reps)
    # The broken line is reported with its number (it was inserted as line 11).
    assert [u["line"] for u in report["unreadable_lines"]] == [11], report["unreadable_lines"]

    match = greedy_match(reps, labels, TOLERANCE_S)
    for i, rep in enumerate(reps):
        assert rep["matched"] == (i in match), (i, rep)
        if i in match:
            assert rep["label"]["line"] == labels[match[i]]["line"], (rep, labels[match[i]])
    assert sorted(l["line"] for l in report["unmatched_labels"]) == sorted(
        l["line"] for j, l in enumerate(labels) if j not in match.values())

    names = sorted(truth)
    assert [s["station"] for s in report["stations"]] == names
    for summary in report["stations"]:
        assert_figures(summary, expected_figures(reps, labels, match, summary["station"]), summary["station"])
    overall = expected_figures(reps, labels, match, None)
    assert_figures(report["overall"], overall, "overall")
    # The set-up's own facts: one false negative, an empty peak cell left out of the peak figures.
    assert overall["false_negatives"] == 1 and overall["false_positives"] == 0
    assert overall["peak_velocity"]["n"] == overall["mean_velocity"]["n"] - 1

    svg = ET.parse(plot).getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    ns = {"s": "http://www.w3.org/2000/svg"}
    bias = svg.find(".//s:line[@id='bias']", ns)
    assert bias is not None, plot.read_text()
    assert len(svg.findall(".//s:g[@id='points']/s:circle", ns)) == overall["mean_velocity"]["n"]
    assert all(el.get("href") is None and el.get("{http://www.w3.org/1999/xlink}href") is None for el in svg.iter())


def test_human_output_names_the_figures(session):
    result = run_eval(str(session["recording"]), "--labels", str(session["labels"]))
    assert result.returncode == 0, result.stderr
    assert "F1" in result.stdout and "precision" in result.stdout and "LoA" in result.stdout, result.stdout
    assert "m/s" in result.stdout and "rack-01" in result.stdout and "overall" in result.stdout, result.stdout
    plain = run_eval(str(session["recording"]))
    assert plain.returncode == 0, plain.stderr
    assert "F1" not in plain.stdout and "rack-02" in plain.stdout, plain.stdout


@pytest.mark.parametrize("content, line", [
    ("station,t_top,mean_velocity_mps,peak_velocity_mps\nrack-01,1763812350.2,0.61,0.9\nrack-01,abc,0.5,0.7\n", 3),
    ("station,t_top,mean_velocity_mps\nrack-01,1763812350.2,0.61\n", 1),
    ("station,t_top,mean_velocity_mps,peak_velocity_mps\nrack-01,1763812350.2,0.61\n", 2),
    ("station,t_top,mean_velocity_mps,peak_velocity_mps\nrack-01,1763812350.2,0.61,0.9\n\nrack-01,1763812352.2,fast,\n", 4),
])
def test_malformed_labels_give_one_line_naming_the_line(session, content: str, line: int):
    bad = session["tmp"] / f"bad-{line}.csv"
    bad.write_text(content, encoding="utf-8")
    result = run_eval(str(session["recording"]), "--labels", str(bad), "--json")
    lines = [text for text in result.stderr.splitlines() if text.strip()]
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert len(lines) == 1 and f"line {line}" in lines[0] and str(bad) in lines[0], result.stderr
    assert result.stdout == "", result.stdout
