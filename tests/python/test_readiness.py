"""Readiness, stored per session and shown the same everywhere (docs/detection.md, "Readiness").

The real session-recorder stores a history of squat sessions on earlier days, as a detector
would publish them. Each day's velocities are a known line times that day's own factor. Then
comes today's session, a bad day. The test recomputes readiness from the stored sets with numpy
on its own: the profile over the last 10 earlier sessions, the mean of each session's fastest set
per load, the score of the first 3 loaded sets, and the leave-one-out typical error. The
recorder's stored figure, the `readiness` query, `vbt readiness` (JSON and table), `vbt stats
week --athlete`, the coach console's board (the athlete card and the rack display read its
station line) and its athlete page must all give that figure. An athlete with two earlier
sessions gets "too little history" and no number.

Run from the repository root:  python3 -m pytest -q tests/python/test_readiness.py
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import time
from pathlib import Path

import numpy as np

from test_e1rm import page, session_cookie
from test_recorder import RawPublisher, Recorder, vbt
from test_wire import BIN_DIR, Bus, bus, free_port, wait_until  # noqa: F401 (fixture)

LOADS = [40.0, 60.0, 80.0, 100.0, 100.0]
# Each earlier day's factor on the true line v = 1.30 - 0.008 x load (the athlete's own variation).
ANA_DAYS = [1.02, 0.97, 1.01, 0.99, 1.03, 0.98, 1.00, 1.02, 0.97, 1.01]
TODAY = 0.92  # a bad day: 8 % slow, far beyond a ~2 % typical error


def velocity(load: float, factor: float, index: int) -> float:
    # A small scatter per set so sets differ; the same numbers on every run.
    return round((1.30 - 0.008 * load) * factor * (1 + 0.004 * ((index * 7) % 3 - 1)), 4)


def publish_session(publisher: RawPublisher, athlete: str, station: str, day_ts: float, factor: float, tag: str) -> int:
    """One session's sets (one rep each) starting at `day_ts`; returns the sets sent."""
    for number, load in enumerate(LOADS, 1):
        set_id = f"{athlete}-{tag}-set-{number}"
        ts = day_ts + 120 * number
        v = velocity(load, factor, number)
        base = {"exercise": "squat", "load_kg": load}
        for kind, fields, at in [
            ("set", {"set_id": set_id, "event": "start", **base}, ts),
            ("rep", {"set_id": set_id, "rep_id": f"{set_id}-r1", "index": 1, "mean_velocity_mps": v, "peak_velocity_mps": v * 1.5,
                     "mean_propulsive_velocity_mps": v * 1.05, "rom_mm": 600.0, "concentric_s": 0.6 / v, "time_to_peak_s": 0.25,
                     "velocity_loss_pct": 0.0, "t_end": 10.0 * number, "detector": "rep-detector-0000beef", **base}, ts + 5),
            ("set", {"set_id": set_id, "event": "end", "reps": 1, "reason": "idle", "best_mean_velocity_mps": v,
                     "velocity_loss_pct": 0.0, **base}, ts + 30),
        ]:
            message = publisher.message(kind, station, fields, athlete=athlete)
            message["ts"] = at
            publisher.send(message)
    return len(LOADS)


def independent(db: Path, athlete: str) -> dict:
    """The latest session's readiness from the stored sets alone, with numpy."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT s.session, n.started_ts, s.load_kg, s.best_mean_velocity_mps FROM sets s JOIN sessions n ON n.id = s.session "
            "WHERE s.athlete = ? AND s.exercise = 'squat' AND s.load_kg > 0 ORDER BY s.started_ts, s.id", (athlete,)).fetchall()
    sessions: dict[int, tuple[float, list[tuple[float, float]]]] = {}
    for session, started, load, best in rows:
        sessions.setdefault(session, (started, []))[1].append((load, best))
    ordered = sorted(sessions.values(), key=lambda s: s[0])
    today_start, today = ordered[-1]
    window = [sets for started, sets in ordered[:-1] if started < today_start - 8 * 3600][-10:]

    def profile(group):
        per_load: dict[float, list[float]] = {}
        for sets in group:
            best: dict[float, float] = {}
            for load, v in sets:
                best[load] = max(best.get(load, 0.0), v)
            for load, v in best.items():
                per_load.setdefault(load, []).append(v)
        loads = np.array(sorted(per_load))
        means = np.array([np.mean(per_load[x]) for x in loads])
        (a, b), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(loads), loads]), means, rcond=None)
        return a, b

    def score(sets, a, b):
        return [100 * v / (a + b * load) for load, v in sets[:3]]

    if len(window) < 5:
        return {"verdict": "too-little-history", "past_sessions": len(window)}
    a, b = profile(window)
    past = [np.mean(score(window[i], *profile(window[:i] + window[i + 1:]))) for i in range(len(window))]
    te = float(np.std(past, ddof=1))
    ratios = score(today, a, b)
    pct = float(np.mean(ratios))
    swc = 0.5 * te
    verdict = "better-than-usual" if pct - 100 > swc else "below-usual" if pct - 100 < -swc else "as-usual"
    return {"verdict": verdict, "score_pct": pct, "typical_error_pct": te, "swc_pct": swc, "past_sessions": len(window),
            "intercept_mps": float(a), "slope_mps_per_kg": float(b),
            "standard_error_pct": float(np.std(ratios, ddof=1) / np.sqrt(len(ratios)))}


def test_readiness_is_stored_and_shown_as_numpy_computes_it(bus: Bus, tmp_path: Path):
    db = tmp_path / "vbt.sqlite"
    recorder = Recorder(bus, db)
    try:
        for athlete in ("ana", "ben"):
            vbt(bus, "athlete", "add", athlete, "--name", athlete.title())
        publisher = RawPublisher(bus, "rep.")
        now = time.time()
        # Today's session begins an hour ago; the earlier ones at the same hour on earlier days.
        start = now - 3600
        sent = 0
        # Oldest first, as they happened: a set joins the open session of its station.
        for back, factor in zip(range(len(ANA_DAYS), 0, -1), ANA_DAYS):
            sent += publish_session(publisher, "ana", "rack-31", start - 86_400 * back, factor, f"d{back}")
        for back in (2, 1):
            sent += publish_session(publisher, "ben", "rack-32", start - 86_400 * back, 1.0, f"d{back}")
        wait_until(lambda: recorder.rows("sets") >= sent, "the earlier sessions stored", detail=bus.describe)
        # The coach console, running before today's sets: its board learns readiness as they end.
        users = tmp_path / "console-users"
        added = subprocess.run([str(BIN_DIR / "vbt"), "console", "user", "add", "coach-ready", "--role", "coach", "--users", str(users)],
                               input="ready-steady-9\n", text=True, capture_output=True, env=bus.env, timeout=30)
        assert added.returncode == 0, added.stderr
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        bus.spawn("coach-console", ["coach-console", "--users", str(users), "--listen", f"127.0.0.1:{port}"]).wait_for_log("console listening")
        cookie = session_cookie(base, ("coach-ready", "ready-steady-9"))
        # The console hears the bus (its heartbeats) before today's sets are sent, so it hears them too.
        wait_until(lambda: json.loads(page(base, "/api/board", cookie))["bus"]["connected"], "the console on the bus")
        # Today's session a few seconds old: the console's board takes live messages only.
        start = time.time() - 900
        sent += publish_session(publisher, "ana", "rack-31", start, TODAY, "today")
        sent += publish_session(publisher, "ben", "rack-32", start, 1.0, "today")
        wait_until(lambda: recorder.rows("sets") >= sent and recorder.rows("reps") >= sent, "every set and rep stored", detail=bus.describe)
        publisher.close()

        want = independent(db, "ana")
        assert want["verdict"] == "below-usual" and want["past_sessions"] == 10, want
        assert 1.0 < want["typical_error_pct"] < 4.0 and 90 < want["score_pct"] < 94, want
        # The stored row: computed when today's third set ended, untouched by the later sets.
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            conn.row_factory = sqlite3.Row
            stored = conn.execute("SELECT * FROM readiness WHERE athlete = 'ana' ORDER BY ts DESC LIMIT 1").fetchone()
            last_third = conn.execute("SELECT ended_ts FROM sets WHERE id = 'ana-today-set-3'").fetchone()[0]
        assert stored["verdict"] == want["verdict"] and stored["sets"] == 3 and stored["ts"] == last_third, dict(stored)
        for key in ("score_pct", "typical_error_pct", "swc_pct", "intercept_mps", "slope_mps_per_kg", "standard_error_pct"):
            assert abs(stored[key] - want[key]) < 1e-9 * max(1.0, abs(want[key])), (key, stored[key], want[key])

        text = f"{want['score_pct']:.0f} % (below usual)"
        answer = recorder.result("readiness", {"athlete": "ana", "limit": 1})[0]
        printed = json.loads(vbt(bus, "readiness", "ana", "--json").stdout)[0]
        for got in (answer, printed):
            assert got["text"] == text and got["assessment"]["verdict"] == "below-usual", got
            assert abs(got["assessment"]["score_pct"] - want["score_pct"]) < 1e-9, got
        table = vbt(bus, "readiness", "ana", "--date", time.strftime("%Y-%m-%d", time.localtime(start))).stdout
        assert text in table and "squat" in table, table
        week = vbt(bus, "stats", "week", "--athlete", "ana").stdout
        today_line = next(line for line in week.splitlines() if line.startswith(time.strftime("%Y-%m-%d", time.localtime(start))))
        assert f"squat {text}" in today_line, week
        week_json = json.loads(vbt(bus, "stats", "week", "--athlete", "ana", "--json").stdout)
        assert week_json["readiness"][0]["text"] == text and "days" in week_json, week_json

        # The board's athlete card and the rack display read the station's readiness line.
        def board_line(station: str):
            stations = json.loads(page(base, "/api/board", cookie))["stations"]
            return next((x.get("readiness") for x in stations if x["station"] == station), None)

        wait_until(lambda: board_line("rack-31") is not None and board_line("rack-32") is not None, "readiness on the board",
                   detail=lambda: page(base, "/api/board", cookie))
        assert board_line("rack-31") == {"athlete": "ana", "verdict": "below-usual", "text": text}, board_line("rack-31")
        assert board_line("rack-32") == {"athlete": "ben", "verdict": "too-little-history", "text": "too little history (2 of 5 sessions)"}
        assert 'data-field="readiness"' in page(base, "/rack/rack-31", cookie)

        # The coach console's athlete page.
        line = re.search(r'<p class="facts" data-field="readiness" data-verdict="([a-z-]+)" data-score-pct="([\d.]*)">(.*?)</p>',
                         page(base, "/athlete/ana", cookie), re.S)
        assert line and line.group(1) == "below-usual" and line.group(2) == f"{want['score_pct']:.1f}", line
        assert f"Readiness <b>{text}</b>" in line.group(3) and f"TE {want['typical_error_pct']:.1f} %" in line.group(3), line.group(3)
        ben_line = re.search(r'data-field="readiness"[^>]*>(.*?)</p>', page(base, "/athlete/ben", cookie), re.S)
        assert ben_line and "too little history (2 of 5 sessions)" in ben_line.group(1) and "%" not in ben_line.group(1), ben_line

        # Two earlier sessions: too little history, and no number anywhere.
        assert independent(db, "ben")["verdict"] == "too-little-history"
        ben = recorder.result("readiness", {"athlete": "ben", "limit": 1})[0]
        assert ben["assessment"]["verdict"] == "too-little-history" and ben["assessment"].get("score_pct") is None, ben
        assert ben["text"] == "too little history (2 of 5 sessions)", ben
        assert "too little history (2 of 5 sessions)" in vbt(bus, "readiness", "ben").stdout
    finally:
        recorder.close()
