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


# Order-only labels (proto/labels.md): a reference device's per-rep export without times, matched to the
# detector's reps in order within each set. The session below has, per station, sets of reps separated by
# rests longer than the detector's idle timeout (10 s), an exercise change, one partial rep the detector
# must reject, and labels that differ from what the detector can find in three ways: a set where the
# reference counted one rep more (the partial: a missed rep), a set where it counted one fewer (an extra
# rep), and a set the detector never saw.

PARTIAL_BOTTOM_MM = 370.0  # a 160 mm attempt against a learned 400 mm ROM: `partial`


def session_path(plan: list[tuple], rng: np.random.Generator, start: float) -> tuple[list[tuple[float, float]], list[dict]]:
    """Readings (t, distance_mm) of a plan of ("rep", ascent_s, bottom_mm) and ("rest", seconds) items.

    A rep: 1.5 s still at the top, 1.0 s down, 0.3 s at the bottom, up in ascent_s (half-cosines). Its
    truth: where the ascent ends (the top), and ROM / ascent as its mean velocity.
    """
    moves: list[tuple[float, float]] = [(TOP_MM, 1.0)]
    truth, t = [], start + 1.0
    for item in plan:
        if item[0] == "rest":
            moves.append((TOP_MM, item[1]))
            t += item[1]
            continue
        _, ascent, bottom = item
        moves += [(TOP_MM, 1.5), (bottom, 1.0), (bottom, 0.3), (TOP_MM, ascent)]
        t += 1.5 + 1.0 + 0.3 + ascent
        truth.append({"t_top": t, "rom_mm": TOP_MM - bottom, "mean": (TOP_MM - bottom) / 1000 / ascent})
    moves.append((TOP_MM, 3.0))
    readings, position, now = [], TOP_MM, start
    for target, seconds in moves:
        steps = max(1, round(seconds * RATE_HZ))
        for k in range(1, steps + 1):
            mm = position + (target - position) * (1 - math.cos(math.pi * k / steps)) / 2
            readings.append((now + k / RATE_HZ, mm + rng.normal(0, 2.0)))
        position, now = target, now + steps / RATE_HZ
    return readings, truth


def assign_line(station: str, exercise: str, at: float, seq: int) -> dict:
    """An athlete.assign to the rep-detector (every rep counts: velocity loss never ends a set)."""
    msg = {"v": 1, "type": "cmd", "station": station, "src": f"vbt-00000001/cmd.{station}", "seq": seq, "ts": round(at, 6),
           "id": f"vbt-eval-{station}-{seq}", "command": "athlete.assign", "target": "rep-detector",
           "args": {"athlete": "ana", "exercise": exercise, "load_kg": 80, "vl_threshold_pct": 100}}
    validate_message(msg)
    return {"topic": f"cmd.{station}", "msg": msg, "at": at}


def reps_of(ascents: list[float]) -> list[tuple]:
    return [("rep", a, BOTTOM_MM) for a in ascents]


@pytest.fixture(scope="module")
def order_session(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("eval-order")
    rng = np.random.default_rng(20261205)
    rest = ("rest", 20.0)
    plans = {
        # squat, squat (its last attempt a partial), then bench after the assignment in the second rest.
        "rack-01": reps_of([0.6, 0.7, 0.8, 0.9]) + [rest] + reps_of([0.6, 0.7, 0.8, 0.9]) + [("rep", 0.5, PARTIAL_BOTTOM_MM), rest]
        + reps_of([0.5, 0.6, 0.7, 0.8]),
        "rack-02": reps_of([0.55, 0.7, 0.85]) + [rest] + reps_of([0.6, 0.75, 0.9]),
    }
    lines, truth, seq = [], {}, {"rack-01": 0, "rack-02": 0}
    for n, (station, plan) in enumerate(plans.items()):
        start = START_T + 5.1 * n
        readings, reps = session_path(plan, rng, start)
        truth[station] = reps
        seq[station] += 1
        lines.append(assign_line(station, "squat", start - 0.5, seq[station]))
        lines += recording_lines(station, readings, f"sensor-bridge-0000000{n}")
    # rack-01 turns to bench 15 s into the second rest (after its squat set has closed on the idle timeout).
    partial = truth["rack-01"][8]
    assert partial["rom_mm"] == TOP_MM - PARTIAL_BOTTOM_MM
    lines.append(assign_line("rack-01", "bench", partial["t_top"] + 15.0, 2))
    lines.sort(key=lambda line: line["at"])
    first = lines[0]["at"]
    recording = tmp / "session.jsonl"
    recording.write_text("\n".join(json.dumps({"t": round(l["at"] - first, 6), "topic": l["topic"], "msg": l["msg"]}) for l in lines) + "\n",
                         encoding="utf-8")

    def velocities(rep: dict) -> tuple[str, str]:
        mean = rep["mean"] * (1 + rng.uniform(-0.04, 0.04))
        return f"{mean:.4f}", f"{mean * math.pi / 2 * (1 + rng.uniform(-0.05, 0.05)):.4f}"

    r1, r2 = truth["rack-01"], truth["rack-02"]
    rows = []
    # rack-01, numbered 1-3 as the device counts them: set 2 has the partial as its 5th rep (the detector
    # rejects it: a false negative); set 3 lacks its last rep (the detector's 4th: a false positive).
    for set_number, reps in ((1, r1[0:4]), (2, r1[4:9]), (3, r1[9:12])):
        rows += [["rack-01", str(set_number), str(k), *velocities(rep)] for k, rep in enumerate(reps, start=1)]
    # rack-02, numbered 7, 8, 9 (the device numbers sets over the whole session): set 9 the detector never saw.
    for set_number, reps in ((7, r2[0:3]), (8, r2[3:6])):
        rows += [["rack-02", str(set_number), str(k), *velocities(rep)] for k, rep in enumerate(reps, start=1)]
    rows += [["rack-02", "9", "1", "0.61", "0.95"], ["rack-02", "9", "2", "0.55", ""]]
    rows[1][4] = ""  # a rep the reference measured without its peak
    order = rng.permutation(len(rows))  # any row order
    labels = tmp / "order-labels.csv"
    with labels.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["station", "set", "rep", "mean_velocity_mps", "peak_velocity_mps"])
        writer.writerows(rows[i] for i in order)
    return {"tmp": tmp, "recording": recording, "labels": labels, "truth": truth, "final_exercise": {"rack-01": "bench", "rack-02": "squat"}}


def read_order_labels(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return [{"line": n, "station": r["station"], "set": int(r["set"]), "rep": int(r["rep"]),
                 "mean": float(r["mean_velocity_mps"]) if r["mean_velocity_mps"] else None,
                 "peak": float(r["peak_velocity_mps"]) if r["peak_velocity_mps"] else None}
                for n, r in enumerate(csv.DictReader(f), start=2)]


def detector_sets(reps: list[dict], station: str) -> list[list[int]]:
    """The detector's sets at a station in the order of their first rep, each its reps' indices by time."""
    sets: dict[str, list[int]] = {}
    for i in sorted((i for i, r in enumerate(reps) if r["station"] == station), key=lambda i: reps[i]["t_top"]):
        sets.setdefault(reps[i]["set_id"], []).append(i)
    return list(sets.values())


def order_match(reps: list[dict], labels: list[dict], final_exercise: dict[str, str]) -> tuple[dict[int, int], dict[int, str]]:
    """Rep index -> label index, and unmatched label index -> the exercise its false negative counts under."""
    match, missed = {}, {}
    for station in sorted({l["station"] for l in labels} | {r["station"] for r in reps}):
        sets = detector_sets(reps, station)
        numbers = sorted({l["set"] for l in labels if l["station"] == station})
        for j, label in enumerate(labels):
            if label["station"] != station:
                continue
            n = numbers.index(label["set"])
            if n < len(sets) and label["rep"] <= len(sets[n]):
                match[sets[n][label["rep"] - 1]] = j
            else:
                missed[j] = reps[sets[n][0]]["exercise"] if n < len(sets) else final_exercise[station]
    return match, missed


def agreement_with_sdc(diffs: list[float]) -> dict:
    figures = agreement(diffs)
    sd = float(np.std(np.array(diffs, dtype=float), ddof=1))
    figures["sem_mps"] = sd / math.sqrt(2)
    figures["sdc_mps"] = 1.96 * math.sqrt(2) * (sd / math.sqrt(2))
    return figures


def order_figures(reps: list[dict], labels: list[dict], match: dict[int, int], missed: dict[int, str], pick) -> dict:
    rs = [i for i, r in enumerate(reps) if pick(r)]
    tp = sum(1 for i in rs if i in match)
    fn = sum(1 for j, exercise in missed.items() if pick({**labels[j], "exercise": exercise}))
    fp = len(rs) - tp
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    pairs = [(reps[i], labels[match[i]]) for i in rs if i in match]
    return {
        "detected_reps": len(rs), "labels": tp + fn, "true_positives": tp, "false_positives": fp, "false_negatives": fn,
        "precision": precision, "recall": recall, "f1": 2 * tp / (2 * tp + fp + fn),
        "mean_velocity": agreement_with_sdc([r["mean_velocity_mps"] - l["mean"] for r, l in pairs if l["mean"] is not None]),
        "peak_velocity": agreement_with_sdc([r["peak_velocity_mps"] - l["peak"] for r, l in pairs if l["peak"] is not None]),
    }


def test_order_only_labels_agree_with_an_independent_computation(order_session):
    result = run_eval(str(order_session["recording"]), "--labels", str(order_session["labels"]), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    reps, labels = report["reps"], read_order_labels(order_session["labels"])
    assert report["labelled"] is True and report["matching"] == "order" and report["tolerance_s"] is None

    # The detector found the sets and reps the recording has (so what follows tests the matching, not it).
    truth = order_session["truth"]
    assert [len(s) for s in detector_sets(reps, "rack-01")] == [4, 4, 4]
    assert [len(s) for s in detector_sets(reps, "rack-02")] == [3, 3]
    for station, true_reps in truth.items():
        tops = [t["t_top"] for t in true_reps if t["rom_mm"] == TOP_MM - BOTTOM_MM]
        found = sorted(r["t_top"] for r in reps if r["station"] == station)
        assert all(abs(f - t) < 0.25 for f, t in zip(found, tops, strict=True)), (station, found, tops)
    assert [r["exercise"] for r in sorted(reps, key=lambda r: (r["station"], r["t_top"]))] == ["squat"] * 8 + ["bench"] * 4 + ["squat"] * 6

    # Rejections: the partial attempt, at its top, and nothing else.
    partial = truth["rack-01"][8]
    assert [(r["station"], r["reason"]) for r in report["rejected"]] == [("rack-01", "partial")], report["rejected"]
    assert set(report["rejected"][0]) == {"station", "t", "reason", "detail"}
    assert abs(report["rejected"][0]["t"] - partial["t_top"]) < 0.25, (report["rejected"], partial)
    assert "ROM" in report["rejected"][0]["detail"]
    assert {s["station"]: s["rejected_attempts"] for s in report["stations"]} == {"rack-01": 1, "rack-02": 0}

    match, missed = order_match(reps, labels, order_session["final_exercise"])
    for i, rep in enumerate(reps):
        assert rep["matched"] == (i in match), (i, rep)
        if i in match:
            label = labels[match[i]]
            assert {k: rep["label"][k] for k in ("line", "set", "rep")} == {k: label[k] for k in ("line", "set", "rep")}, (rep, label)
    got_missed = {u["line"]: u["exercise"] for u in report["unmatched_labels"]}
    assert got_missed == {labels[j]["line"]: exercise for j, exercise in missed.items()}
    # What the set-up put there: the partial (rack-01 set 2 rep 5, squat) and rack-02's set 9 (squat) missed,
    # rack-01's 4th bench rep extra.
    assert sorted((labels[j]["station"], labels[j]["set"], labels[j]["rep"]) for j in missed) == [
        ("rack-01", 2, 5), ("rack-02", 9, 1), ("rack-02", 9, 2)]
    assert sorted(missed.values()) == ["squat"] * 3
    extra = [r for i, r in enumerate(reps) if i not in match]
    assert [(r["station"], r["exercise"], r["index"]) for r in extra] == [("rack-01", "bench", 4)]

    for summary in report["stations"]:
        assert_figures(summary, order_figures(reps, labels, match, missed, lambda r, s=summary["station"]: r["station"] == s), summary["station"])
    assert [e["exercise"] for e in report["exercises"]] == ["bench", "squat"]
    for summary in report["exercises"]:
        assert_figures(summary, order_figures(reps, labels, match, missed, lambda r, e=summary["exercise"]: r["exercise"] == e), summary["exercise"])
    assert_figures(report["overall"], order_figures(reps, labels, match, missed, lambda r: True), "overall")
    assert report["overall"]["false_negatives"] == 3 and report["overall"]["false_positives"] == 1
    assert report["overall"]["peak_velocity"]["n"] == report["overall"]["mean_velocity"]["n"] - 1

    # The sets side by side: rack-02's third set only the labels have.
    assert [(s["station"], s["set"], s["detected_reps"], s["labels"], s["exercise"]) for s in report["sets"]] == [
        ("rack-01", 1, 4, 4, "squat"), ("rack-01", 2, 4, 5, "squat"), ("rack-01", 3, 4, 3, "bench"),
        ("rack-02", 7, 3, 3, "squat"), ("rack-02", 8, 3, 3, "squat"), ("rack-02", 9, 0, 2, "squat")]
    assert report["sets"][-1]["set_id"] is None


def test_order_only_table_lists_exercises_sets_and_rejections(order_session):
    result = run_eval(str(order_session["recording"]), "--labels", str(order_session["labels"]))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "in order within each set" in out and "SDC" in out and "bench" in out, out
    assert "rack-02 set 9 rep 1" in out and "rack-01 set 2 rep 5" in out, out
    rejected = out[out.index("Rejected attempts"):]
    assert "rack-01" in rejected and "partial" in rejected and "ROM" in rejected, out
    refused = run_eval(str(order_session["recording"]), "--labels", str(order_session["labels"]), "--tolerance", "0.3")
    assert refused.returncode == 1 and "--tolerance" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, refused


def test_time_labels_report_sdc_and_rejections(session):
    result = run_eval(str(session["recording"]), "--labels", str(session["labels"]), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["matching"] == "time" and report["tolerance_s"] == TOLERANCE_S and report["sets"] is None
    for row in report["stations"] + report["exercises"] + [report["overall"]]:
        for key in ("mean_velocity", "peak_velocity"):
            a = row[key]
            assert a["sdc_mps"] == pytest.approx(1.96 * a["sd_mps"], rel=1e-12), row
            assert a["sem_mps"] == pytest.approx(a["sd_mps"] / math.sqrt(2), rel=1e-12), row
    # No assignment in this recording: every rep, and the false negative, counts under the detector's default.
    assert [e["exercise"] for e in report["exercises"]] == ["generic"]
    assert [u["exercise"] for u in report["unmatched_labels"]] == ["generic"]
    assert report["rejected"] == [] and all(s["rejected_attempts"] == 0 for s in report["stations"])


@pytest.mark.parametrize("content, line, says", [
    ("station,set,rep,mean_velocity_mps\nrack-01,1,1,0.5\n", 1, "header"),
    ("station,set,rep,mean_velocity_mps,peak_velocity_mps\nrack-01,0,1,0.5,0.8\n", 2, "set `0`"),
    ("station,set,rep,mean_velocity_mps,peak_velocity_mps\nrack-01,1,1,0.5,0.8\nrack-01,1,2.5,0.5,0.8\n", 3, "rep `2.5`"),
    ("station,set,rep,mean_velocity_mps,peak_velocity_mps\nrack-01,1,1,0.5,0.8\nrack-02,1,1,0.5,\nrack-01,1,1,0.6,0.9\n", 4,
     "also on line 2"),
])
def test_malformed_order_labels_give_one_line_naming_the_line(order_session, content: str, line: int, says: str):
    bad = order_session["tmp"] / f"bad-order-{line}.csv"
    bad.write_text(content, encoding="utf-8")
    result = run_eval(str(order_session["recording"]), "--labels", str(bad), "--json")
    lines = [text for text in result.stderr.splitlines() if text.strip()]
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert len(lines) == 1 and f"line {line}:" in lines[0] and str(bad) in lines[0] and says in lines[0], result.stderr
    assert result.stdout == "", result.stdout
