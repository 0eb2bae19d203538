"""One e1RM, the same number everywhere (docs/detection.md, "e1RM").

Sets at several loads are stored by the real session-recorder; the test reads the stored reps
from SQLite and recomputes each day's e1RM on its own with numpy's least squares (the fastest
rep at each load that day, mean velocity on load, read at the exercise's MVT from the
exercises table). The recorder's `progress`, `vbt progress` (JSON and table), the coach
console's athlete page and its leaderboard must all show that number, with the same loads and
the same reliability. A detector's profile message claiming another e1RM changes none of them.

Run from the repository root:  python3 -m pytest -q tests/python/test_e1rm.py
"""

from __future__ import annotations

import http.client
import json
import re
import sqlite3
import subprocess
import time
from pathlib import Path

import numpy as np

from test_recorder import RawPublisher, Recorder, vbt
from test_wire import BIN_DIR, Bus, bus, free_port, wait_until  # noqa: F401 (fixture)

COACH = ("coach-e1rm", "heavy-squats-9")
# ana: three loads spanning 40 kg, on a line but for a little scatter: reliable.
# ben: two loads: an e1RM, flagged for too few loads.
SETS = {
    "ana": [(60.0, [1.03, 0.99, 0.95]), (80.0, [0.80, 0.77]), (100.0, [0.57, 0.55, 0.52]), (60.0, [0.98, 0.96])],
    "ben": [(70.0, [0.90, 0.86]), (110.0, [0.45, 0.43])],
}


def publish_sets(publisher: RawPublisher, athlete: str, station: str) -> int:
    """Every set of `athlete` as a detector would publish it; the number of reps."""
    count = 0
    for number, (load, velocities) in enumerate(SETS[athlete], 1):
        set_id = f"{athlete}-set-{number}"
        base = {"exercise": "squat", "load_kg": load}
        publisher.send(publisher.message("set", station, {"set_id": set_id, "event": "start", **base}, athlete=athlete))
        for index, v in enumerate(velocities, 1):
            publisher.send(publisher.message("rep", station, {
                "set_id": set_id, "rep_id": f"{set_id}-r{index}", "index": index, "mean_velocity_mps": v,
                "peak_velocity_mps": v * 1.5, "mean_propulsive_velocity_mps": v * 1.05, "rom_mm": 600.0, "concentric_s": 0.6 / v,
                "time_to_peak_s": 0.25, "velocity_loss_pct": round((velocities[0] - v) / velocities[0] * 100, 3),
                "t_end": 10.0 * number + index, "detector": "rep-detector-0000e1e1", **base}, athlete=athlete))
            count += 1
        publisher.send(publisher.message("set", station, {
            "set_id": set_id, "event": "end", "reps": len(velocities), "reason": "idle", "best_mean_velocity_mps": velocities[0],
            "velocity_loss_pct": round((velocities[0] - velocities[-1]) / velocities[0] * 100, 3), **base}, athlete=athlete))
    return count


def independent_e1rm(db: Path, athlete: str, offset: int) -> list[dict]:
    """Each local day's e1RM from the stored reps alone: numpy least squares of the fastest rep
    at each load that day, v = a + b x load, e1RM = (MVT - a) / b."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        mvt = conn.execute("SELECT mvt_mps FROM exercises WHERE id = 'squat'").fetchone()[0]
        reps = conn.execute("SELECT load_kg, mean_velocity_mps, ts FROM reps WHERE athlete = ? AND exercise = 'squat' "
                            "AND load_kg IS NOT NULL", (athlete,)).fetchall()
    days: dict[int, list[tuple[float, float, float]]] = {}
    for load, v, ts in reps:
        days.setdefault(int((ts + offset) // 86_400), []).append((load, v, ts))
    out = []
    for day in sorted(days):
        best: dict[float, float] = {}
        for load, v, _ in days[day]:
            best[load] = max(best.get(load, 0.0), v)
        if len(best) < 2:
            continue
        loads = np.array(sorted(best))
        velocities = np.array([best[x] for x in loads])
        (a, b), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(loads), loads]), velocities, rcond=None)
        r2 = 1 - np.sum((velocities - (a + b * loads)) ** 2) / np.sum((velocities - velocities.mean()) ** 2)
        if b >= 0 or a <= mvt:
            continue
        e1rm = (mvt - a) / b
        warnings = []
        if len(loads) < 3:
            warnings.append("few-loads")
        if loads[-1] - loads[0] < 0.2 * e1rm:
            warnings.append("narrow-range")
        if r2 < 0.9:
            warnings.append("poor-fit")
        out.append({"day": time.strftime("%Y-%m-%d", time.gmtime(day * 86_400)), "e1rm_kg": float(e1rm), "r2": float(r2),
                    "loads_kg": [float(x) for x in loads], "warnings": warnings, "mvt_mps": mvt})
    return out


def session_cookie(base: str, account: tuple[str, str]) -> str:
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("POST", "/login", body=f"username={account[0]}&password={account[1]}",
                       headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": base})
    response = connection.getresponse()
    assert response.status == 303, response.status
    cookie = response.getheader("Set-Cookie")
    connection.close()
    return cookie.split(";")[0]


def page(base: str, path: str, cookie: str) -> str:
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("GET", path, headers={"Cookie": cookie})
    response = connection.getresponse()
    text = response.read().decode()
    connection.close()
    assert response.status == 200, (path, response.status, text[:300])
    return text


def test_every_place_shows_the_e1rm_numpy_computes_from_the_stored_reps(bus: Bus, tmp_path: Path):
    db = tmp_path / "vbt.sqlite"
    recorder = Recorder(bus, db)
    try:
        for athlete in SETS:
            vbt(bus, "athlete", "add", athlete, "--name", athlete.title())
        publisher = RawPublisher(bus, "rep.")
        reps = publish_sets(publisher, "ana", "rack-21") + publish_sets(publisher, "ben", "rack-22")
        # What a detector would have said for ana after two sets: another number, which no page may show.
        publisher.send(publisher.message("profile", "rack-21", {
            "exercise": "squat", "loads_kg": [60, 80], "mean_velocities_mps": [1.03, 0.80], "intercept_mps": 1.756,
            "slope_mps_per_kg": -0.0104, "r2": 1.0, "mvt_mps": 0.3, "e1rm_kg": 140.0}, athlete="ana"))
        wait_until(lambda: recorder.rows("reps") >= reps and recorder.rows("profiles") >= 1, "every rep and the profile stored",
                   detail=bus.describe)
        publisher.close()

        offset = time.localtime().tm_gmtoff  # the asker's zone, as vbt and the console use it
        expected = {athlete: independent_e1rm(db, athlete, offset) for athlete in SETS}
        assert [e["warnings"] for e in expected["ana"]] == [[]] * len(expected["ana"]) and expected["ana"], expected
        assert all(e["warnings"] == ["few-loads"] for e in expected["ben"]) and expected["ben"], expected
        assert all(abs(e["e1rm_kg"] - 140) > 1 for e in expected["ana"]), "the profile message's figure must differ"

        # The recorder's progress and `vbt progress`, JSON and table.
        for athlete, days in expected.items():
            answer = recorder.result("progress", {"athlete": athlete, "utc_offset_s": offset})["exercises"][0]["e1rm"]
            printed = json.loads(vbt(bus, "progress", "--athlete", athlete, "--json").stdout)["exercises"][0]["e1rm"]
            table = vbt(bus, "progress", "--athlete", athlete).stdout
            for got in (answer, printed):
                assert [e["day"] for e in got] == [e["day"] for e in days], (got, days)
                for e, want in zip(got, days):
                    assert abs(e["e1rm_kg"] - want["e1rm_kg"]) < 1e-9 * want["e1rm_kg"], (e, want)
                    assert abs(e["r2"] - want["r2"]) < 1e-9 and e["loads_kg"] == want["loads_kg"], (e, want)
                    assert e["warnings"] == want["warnings"] and e["reliable"] == (not want["warnings"]) and e["mvt_mps"] == want["mvt_mps"]
            for want in days:
                row = next(line for line in table.splitlines() if line.startswith(want["day"]) and "kg" not in line.split()[0])
                assert f"{want['e1rm_kg']:.1f}" in row.split() and ("reliable" if not want["warnings"] else "unreliable: fewer than 3 loads") in row, \
                    (row, want)

        # The coach console: the athlete page and the leaderboard, as HTML.
        users = tmp_path / "console-users"
        added = subprocess.run([str(BIN_DIR / "vbt"), "console", "user", "add", COACH[0], "--role", "coach", "--users", str(users)],
                               input=COACH[1] + "\n", text=True, capture_output=True, env=bus.env, timeout=30)
        assert added.returncode == 0, added.stderr
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        bus.spawn("coach-console", ["coach-console", "--users", str(users), "--listen", f"127.0.0.1:{port}"]).wait_for_log("console listening")
        cookie = session_cookie(base, COACH)
        for athlete, days in expected.items():
            latest = days[-1]
            html = page(base, f"/athlete/{athlete}", cookie)
            section = re.search(r'<section class="exercise" data-exercise="squat"[^>]*>', html)
            assert section and f'data-e1rm-kg="{latest["e1rm_kg"]:.1f}"' in section.group(0), (section, latest)
            assert f'data-points="{len(latest["loads_kg"])}"' in section.group(0)
            facts = re.search(r'<p class="facts" data-field="e1rm"[^>]*>(.*?)</p>', html, re.S)
            assert facts, html[:2000]
            assert f"<b>{latest['e1rm_kg']:.1f} kg</b>" in facts.group(1) and latest["day"] in facts.group(1)
            assert ", ".join(f"{x:g}" for x in latest["loads_kg"]) + " kg" in facts.group(1), facts.group(1)
            assert ("unreliable" in facts.group(1)) == bool(latest["warnings"]), facts.group(1)
            assert f"e1RM {latest['e1rm_kg']:.1f} kg" in html and "e1RM 140" not in html and "140.0" not in html

        board = page(base, "/leaders?period=week", cookie)
        squat = re.search(r'<section class="leaders" data-exercise="squat">(.*?)</section>', board, re.S)
        assert squat, board[:2000]
        shown = re.findall(r'<a href="/athlete/(\w+)">\w+</a></td><td class="num" data-field="e1rm">([\d.]+)</td>', squat.group(1))
        best = {athlete: max(days, key=lambda e: e["e1rm_kg"]) for athlete, days in expected.items()}
        assert sorted(shown, key=lambda s: s[0]) == sorted((a, f"{e['e1rm_kg']:.1f}") for a, e in best.items()), (shown, best)
        reliability = dict(re.findall(r'<a href="/athlete/(\w+)">.*?data-reliable="(true|false)"', squat.group(1)))
        assert reliability == {a: "false" if e["warnings"] else "true" for a, e in best.items()}, reliability
    finally:
        recorder.close()
