"""The session report a coach sends (`vbt report`, docs/programs/vbt.md).

A day of sets, reps and refused attempts is stored by the real session-recorder. The test reads
the stored rows from SQLite and works out on its own what the report must say: the sets per
session, each set's reps and mean velocities, its velocity loss as docs/detection.md defines it
(the last rep against the fastest, (best - last) / best), the refused attempts, and each
exercise's e1RM that day (numpy, as test_e1rm.py). `vbt report` as JSON, as text, as an HTML page
and as a PDF must show those figures. The page is photographed in Chromium and the PDF's first
page turned into a PNG (artifacts/report/, with the text), for a person to look at.

Run from the repository root:  python3 -m pytest -q tests/python/test_report.py
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from test_console import browser
from test_e1rm import independent_e1rm
from test_recorder import RawPublisher, Recorder, vbt
from test_wire import Bus, bus, wait_until  # noqa: F401 (fixture)

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "report"
STATION = "rack-31"
# Three sets at rising loads, then a back-off set that slows down: velocity loss of its own.
SETS = [(60.0, [1.02, 0.99, 0.97, 0.93]), (80.0, [0.79, 0.77, 0.72]), (100.0, [0.56, 0.53, 0.49]), (70.0, [0.90, 0.88, 0.80, 0.71, 0.66])]
REFUSED = 2
# Earlier days (days before, sets), slower at each load: the e1RM trend rises to today's.
EARLIER = [(21, [(60.0, [0.96, 0.93]), (80.0, [0.72, 0.70]), (100.0, [0.47, 0.45])]),
           (7, [(60.0, [0.99, 0.96]), (80.0, [0.75, 0.73]), (100.0, [0.52, 0.50])])]


def publish_day(publisher: RawPublisher, sets: list = SETS, days_ago: int = 0) -> int:
    """A day's sets, reps and refused attempts (today's only), as a detector publishes them,
    stamped `days_ago` days back; the number of reps."""
    count = 0
    shift = days_ago * 86_400

    def send(kind: str, fields: dict) -> None:
        message = publisher.message(kind, STATION, fields)
        message["ts"] -= shift
        publisher.send(message)

    for number, (load, velocities) in enumerate(sets, 1):
        set_id = f"report-set-{days_ago}-{number}"
        base = {"exercise": "squat", "load_kg": load}
        send("set", {"set_id": set_id, "event": "start", **base})
        for index, v in enumerate(velocities, 1):
            best = max(velocities[:index])
            # Today's reps were prescribed 3-1-X-0; every third one came down too fast.
            met = index % 3 != 0
            tempo = {} if days_ago else {"eccentric_s": 2.8 if met else 1.4, "pause_bottom_s": 1.0, "tempo": "3-1-X-0", "tempo_met": met,
                                         "tempo_missed": [] if met else ["eccentric"]}
            send("rep", {
                "set_id": set_id, "rep_id": f"{set_id}-r{index}", "index": index, "mean_velocity_mps": v,
                "peak_velocity_mps": v * 1.5, "mean_propulsive_velocity_mps": v * 1.05, "rom_mm": 600.0, "concentric_s": 0.6 / v,
                "time_to_peak_s": 0.25, "velocity_loss_pct": round((best - v) / best * 100, 3), "t_end": time.time() - shift,
                "detector": "rep-detector-0000a1a1", **base, **tempo})
            count += 1
        if number == 2 and not days_ago:
            for attempt in range(REFUSED):
                publisher.send(publisher.message("rejected", STATION, {
                    "reason": "partial", "detail": "ROM 268 mm below 430 mm", "rom_mm": 268.0, "concentric_s": 0.5,
                    "mean_velocity_mps": 0.5, "t_end": time.time(), "detector": "rep-detector-0000a1a1"}))
        send("set", {
            "set_id": set_id, "event": "end", "reps": len(velocities), "reason": "idle", "best_mean_velocity_mps": max(velocities),
            "velocity_loss_pct": round((max(velocities) - velocities[-1]) / max(velocities) * 100, 3), **base})
    return count


def expected_day(db: Path, athlete: str, offset: int) -> dict:
    """What the report must say, from the stored rows alone: the local day of the latest set, its
    sets grouped by session, each set's mean velocities, best, mean and velocity loss, the refused
    attempts, and the e1RM that day (numpy)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        latest = conn.execute("SELECT max(started_ts) FROM sets WHERE athlete = ?", (athlete,)).fetchone()[0]
        day = int((latest + offset) // 86_400)
        start = day * 86_400 - offset
        rows = conn.execute("SELECT id, session, load_kg FROM sets WHERE athlete = ? AND started_ts >= ? AND started_ts < ? "
                            "ORDER BY started_ts, id", (athlete, start, start + 86_400)).fetchall()
        columns = {row[1] for row in conn.execute("PRAGMA table_info(reps)")}
        assert "tempo_met" in columns, "the recorder stores each rep's tempo verdict (v10-rep-phases)"
        sessions: dict[int, list[dict]] = {}
        for set_id, session, load in rows:
            velocities = [v for (v,) in conn.execute("SELECT mean_velocity_mps FROM reps WHERE set_id = ? ORDER BY idx", (set_id,))]
            met = [None if m is None else bool(m) for (m,) in conn.execute("SELECT tempo_met FROM reps WHERE set_id = ? ORDER BY idx", (set_id,))]
            best = max(velocities)
            sessions.setdefault(session, []).append({
                "id": set_id, "load_kg": load, "velocities": velocities, "best": best, "mean": sum(velocities) / len(velocities),
                "vl_pct": (best - velocities[-1]) / best * 100, "tempo_met": met})
        refused = conn.execute("SELECT count(*) FROM rejected WHERE athlete = ?", (athlete,)).fetchone()[0]
        # Readiness as the recorder stored it.
        readiness = {session: conn.execute("SELECT exercise, verdict, score_pct FROM readiness WHERE session = ? ORDER BY exercise",
                                           (session,)).fetchall() for session in sessions}
        met = conn.execute("SELECT tempo_met FROM reps r JOIN sets s ON s.id = r.set_id WHERE s.athlete = ? AND s.started_ts >= ? "
                           "AND s.started_ts < ? AND tempo_met IS NOT NULL", (athlete, start, start + 86_400)).fetchall()
    date = time.strftime("%Y-%m-%d", time.gmtime(day * 86_400))
    first = time.strftime("%Y-%m-%d", time.gmtime((day - 8 * 7 + 1) * 86_400))  # the default 8 weeks, that day's included
    trend = [e for e in independent_e1rm(db, athlete, offset) if first <= e["day"] <= date]
    e1rm = [e for e in trend if e["day"] == date]
    return {"date": date, "sessions": list(sessions.values()), "refused": refused, "e1rm": e1rm[0] if e1rm else None, "trend": trend,
            "readiness": [[list(r) for r in readiness[session]] for session in sessions],
            "tempo": (sum(1 for (m,) in met if m), len(met)) if met else None}


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("chromium is needed (make deps installs it)")
    return found


def test_report_shows_the_figures_computed_from_the_stored_rows(bus: Bus, tmp_path: Path):
    db = tmp_path / "vbt.sqlite"
    recorder = Recorder(bus, db)
    try:
        vbt(bus, "athlete", "add", "ana", "--name", "Ana Rossi")
        publisher = RawPublisher(bus, "rep.")
        earlier = sum(publish_day(publisher, sets, days) for days, sets in EARLIER)
        reps = publish_day(publisher)
        wait_until(lambda: recorder.rows("reps") >= earlier + reps and recorder.rows("rejected") >= REFUSED
                   and recorder.result("history", {"athlete": "ana"})[0].get("reason") == "idle",
                   "every rep, refused attempt and set end stored", detail=bus.describe)
        publisher.close()

        offset = time.localtime().tm_gmtoff  # the asker's zone, as vbt uses it
        want = expected_day(db, "ana", offset)
        assert want["e1rm"] and not want["e1rm"]["warnings"], want
        assert [len(s) for s in want["sessions"]] == [len(SETS)], want  # one session: the sets came without a break

        # JSON: every figure, set by set.
        got = json.loads(vbt(bus, "report", "ana", "--date", want["date"], "--json").stdout)
        assert got["date"] == want["date"] and got["name"] == "Ana Rossi", got
        assert [[[r["exercise"], r["assessment"]["verdict"], r["assessment"].get("score_pct")] for r in s["readiness"]]
                for s in got["sessions"]] == want["readiness"], (got["sessions"], want["readiness"])
        assert [len(s["sets"]) for s in got["sessions"]] == [len(s) for s in want["sessions"]]
        assert sum(s["rejected"] for s in got["sessions"]) == want["refused"] == REFUSED
        for session, wanted in zip(got["sessions"], want["sessions"]):
            for s, w in zip(session["sets"], wanted):
                assert s["id"] == w["id"] and s["load_kg"] == w["load_kg"], (s, w)
                assert [r["mean_velocity_mps"] for r in s["reps"]] == w["velocities"], (s, w)
                assert abs(s["best_mean_velocity_mps"] - w["best"]) < 1e-12 and abs(s["average_mean_velocity_mps"] - w["mean"]) < 1e-12
                assert abs(s["velocity_loss_pct"] - w["vl_pct"]) < 1e-9, (s, w)
                assert [r.get("tempo_met") for r in s["reps"]] == w["tempo_met"], (s, w)
        squat = next(e for e in got["exercises"] if e["exercise"] == "squat")
        assert abs(squat["e1rm"]["e1rm_kg"] - want["e1rm"]["e1rm_kg"]) < 1e-9 * want["e1rm"]["e1rm_kg"], (squat, want["e1rm"])
        assert squat["e1rm"]["loads_kg"] == want["e1rm"]["loads_kg"]
        assert [e["day"] for e in squat["trend"]] == [e["day"] for e in want["trend"]] and len(want["trend"]) == 3, (squat["trend"], want)
        for e, w in zip(squat["trend"], want["trend"]):
            assert abs(e["e1rm_kg"] - w["e1rm_kg"]) < 1e-9 * w["e1rm_kg"], (e, w)

        # Text: one row per set with its figures; readiness and tempo as stored, or not measured.
        text = vbt(bus, "report", "ana", "--date", want["date"]).stdout
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "report.txt").write_text(text)
        assert f"1 session, {len(SETS)} sets, {reps} reps, {REFUSED} rejected attempts" in text, text
        if not any(want["readiness"]):
            assert "readiness: not measured" in text, text
        assert want["tempo"] and want["tempo"][1] > 0, "the day's reps were judged against 3-1-X-0"
        tempo = "not measured" if not want["tempo"] else f"{want['tempo'][0]} of {want['tempo'][1]} reps ({want['tempo'][0] / want['tempo'][1] * 100:.0f}%) at 3-1-X-0"
        assert f"tempo compliance: {tempo}" in text, text
        for number, w in enumerate(want["sessions"][0], 1):
            row = next(line.split() for line in text.splitlines() if line.split()[:2] == [str(number), "squat"])
            assert row[2:8] == [f"{w['load_kg']:.1f}", str(len(w["velocities"])), f"{w['best']:.2f}", f"{w['mean']:.2f}",
                                f"{w['velocities'][-1]:.2f}", f"{w['vl_pct']:.1f}"], (row, w)
        e1rm_row = next(line for line in text.splitlines() if line.startswith("squat "))
        assert f"{want['e1rm']['e1rm_kg']:.1f}" in e1rm_row.split() and "reliable" in e1rm_row, e1rm_row
        # Without --date: the day of the latest set, the same report.
        assert vbt(bus, "report", "ana").stdout == text
        empty = vbt(bus, "report", "ana", "--date", "2020-01-01").stdout
        assert "0 sessions, 0 sets, 0 reps" in empty, empty

        # The page: self-contained, the same figures; then printed to PDF by Chromium.
        page, pdf = ARTIFACTS / "report.html", ARTIFACTS / "report.pdf"
        pdf.unlink(missing_ok=True)
        vbt(bus, "report", "ana", "--date", want["date"], "--html", str(page), "--pdf", str(pdf), "--chromium", chromium())
        html = page.read_text()
        assert "<script" not in html and not re.search(r'(src|href)="', html) and "@page { size: A4" in html
        assert f'<dd data-field="rejected">{REFUSED}</dd>' in html
        assert ('data-field="readiness" class="muted">not measured<' in html) == (not any(want["readiness"])), html
        for w in want["sessions"][0]:
            row = re.search(rf'<tr data-set="{w["id"]}">(.*?)</tr>', html).group(1)
            assert f'data-field="vl">{w["vl_pct"]:.1f}<' in row and f'data-field="best">{w["best"]:.2f}<' in row, row
            judged = [m for m in w["tempo_met"] if m is not None]
            assert f'data-field="tempo">{f"{sum(judged)}/{len(judged)}" if judged else "–"}<' in row, row
        assert f'data-field="e1rm">{want["e1rm"]["e1rm_kg"]:.1f}<' in html and "<svg" in html
        change = want["trend"][-1]["e1rm_kg"] - want["trend"][0]["e1rm_kg"]
        assert f"{change:+.1f} kg since {want['trend'][0]['day']}" in html, html
        assert pdf.read_bytes().startswith(b"%PDF-")

        # Pictures to look at: the page in Chromium, and the PDF's first page.
        shot = ARTIFACTS / "report.png"
        shot.unlink(missing_ok=True)
        driver = browser()
        try:
            driver.set_window_size(900, 1000)
            driver.get(page.as_uri())
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(900, min(int(height) + 140, 6000))
            driver.save_screenshot(str(shot))
            # Every figure cell is on top where it is drawn: nothing (the chart) covers it.
            hidden = driver.execute_script("""return [...document.querySelectorAll('td[data-field]')].filter(cell => {
                cell.scrollIntoView({block: 'center'});
                const r = cell.getBoundingClientRect();
                const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
                return !top || !cell.contains(top);
            }).map(cell => cell.dataset.field);""")
            assert hidden == [], hidden
        finally:
            driver.quit()
        assert shot.stat().st_size > 10_000
        if not shutil.which("pdftoppm"):
            pytest.fail("pdftoppm is needed (poppler-utils; make deps installs it)")
        subprocess.run(["pdftoppm", "-png", "-r", "80", "-f", "1", "-l", "1", str(pdf), str(ARTIFACTS / "report-pdf")],
                       check=True, capture_output=True, timeout=60)
        assert (ARTIFACTS / "report-pdf-1.png").stat().st_size > 10_000

        # No Chromium: a clear error naming --html, and no PDF.
        missing = vbt(bus, "report", "ana", "--pdf", str(tmp_path / "x.pdf"), "--chromium", str(tmp_path / "no-chromium"), expect_ok=False)
        assert missing.returncode == 1 and "--html" in missing.stderr and not (tmp_path / "x.pdf").exists(), missing.stderr
        # A Chromium that fails: its last words and exit status, and no PDF.
        broken = tmp_path / "broken-chromium"
        broken.write_text("#!/bin/sh\necho 'cannot open display' >&2\nexit 3\n")
        broken.chmod(0o755)
        failed = vbt(bus, "report", "ana", "--pdf", str(tmp_path / "y.pdf"), "--chromium", str(broken), expect_ok=False)
        assert failed.returncode == 1 and "exit 3" in failed.stderr and "cannot open display" in failed.stderr, failed.stderr
        assert not (tmp_path / "y.pdf").exists()
        unknown = vbt(bus, "report", "nobody", expect_ok=False)
        assert unknown.returncode == 1 and "no sets recorded for athlete 'nobody'" in unknown.stderr, unknown.stderr
    finally:
        recorder.close()
