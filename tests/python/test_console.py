"""coach-console end to end in a real headless Chromium (Debian's chromium and
chromium-driver, driven by selenium): a simulated station, the real rep-detector,
notifier and posture-evaluator on a real bus, and the console between them and the
browser. Logged out, only the login page is reachable; a coach logs in and sees the
reps with the values on the bus, a set summary, a rest countdown, and sends each
command from the station page and sees it take effect (and the command on the bus);
a viewer sees the same but cannot send commands; the console shows a bus that went
away and recovers when it is back. Screenshots of every page go to
artifacts/console/ (CONSOLE_ARTIFACTS overrides) to be looked at."""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bus_tap import BusLog
from test_recorder import Recorder
from test_wire import Bus, binary, free_port, wait_until

selenium = pytest.importorskip("selenium")
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

STATION = "rack-01"
ARTIFACTS = Path(os.environ.get("CONSOLE_ARTIFACTS", Path(__file__).resolve().parents[2] / "artifacts" / "console"))
COACH = ("coach-ana", "squat-heavy-1")
VIEWER = ("viewer-tv", "just-looking-2")


def browser() -> webdriver.Chrome:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.fail("chromium and chromium-driver are needed (make deps installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000",
                     "--disable-gpu", "--no-first-run"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(driver_path), options=options)


def shot(driver: webdriver.Chrome, name: str) -> None:
    """The whole page (the window is made as tall as the page for the picture)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, max(1000, min(int(height), 6000)))
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))
    driver.set_window_size(1280, 1000)


def field(driver: webdriver.Chrome, name: str, station: str = STATION) -> str:
    """A data-field's text in a station's card ('' when the card is not drawn yet)."""
    found = driver.find_elements(By.CSS_SELECTOR, f'[data-station="{station}"] [data-field="{name}"]')
    return found[0].text if found else ""


def log_in(driver: webdriver.Chrome, base: str, account: tuple[str, str]) -> None:
    driver.get(base + "/login")
    driver.find_element(By.NAME, "username").send_keys(account[0])
    driver.find_element(By.NAME, "password").send_keys(account[1])
    driver.find_element(By.CSS_SELECTOR, "form.login button").click()
    wait_until(lambda: driver.current_url.rstrip("/") == base, "the board after logging in")


class Gym:
    def __init__(self, bus: Bus, tmp_path: Path):
        self.bus = bus
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        users = tmp_path / "console-users"
        for (name, password), role in ((COACH, "coach"), (VIEWER, "viewer")):
            added = subprocess.run([binary("vbt"), "console", "user", "add", name, "--role", role, "--users", str(users)],
                                   input=password + "\n", text=True, capture_output=True, env=bus.env, timeout=30)
            assert added.returncode == 0, added.stderr
        self.tap = BusLog(bus.sub_endpoint, default_station=STATION)
        self.recorder = Recorder(bus, tmp_path / "vbt.sqlite")  # sets VBT_QUERY_ENDPOINT for the console too
        bus.run(["vbt", "athlete", "add", "ana", "--name", "Ana"])
        bus.run(["vbt", "plan", "create", "ana-power", "--athlete", "ana", "--item", "deadlift:2x3@140kg/60s", "--item", "bench:3x5@70kg"])
        self.console = bus.spawn("coach-console", ["coach-console", "--users", str(users), "--listen", f"127.0.0.1:{self.port}"])
        self.console.wait_for_log("console listening")
        bus.spawn("rep-detector", ["rep-detector"]).wait_for_log("bus connected")
        bus.spawn("notifier", ["notifier", "--state", str(tmp_path / "notifier.json"), "--default-rest", "45"]).wait_for_log("bus connected")
        bus.spawn("posture-evaluator", ["posture-evaluator"]).wait_for_log("bus connected")
        # Who lifts what at the station, as `vbt station assign` says it.
        bus.run(["vbt", "pub", f"cmd.{STATION}", json.dumps({"id": "assign-1", "command": "athlete.assign", "target": "*",
                 "args": {"athlete": "ana", "exercise": "squat", "load_kg": 100}}), "--rate", "0"])
        # A set of 5 reps, 90 s of rest (the window the rest commands are tried in), another set, again.
        bus.spawn("bridge", ["sensor-bridge", "--simulate", "--loop", "--station", STATION, "--exercise", "squat",
                             "--load-kg", "100", "--sets", "2", "--reps", "5", "--rest", "90", "--seed", "4",
                             "--athlete", "ana", "--posture-rate", "20"])


@pytest.fixture(scope="module")
def gym(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("console")
    bus = Bus(tmp_path)
    gym = None
    try:
        bus.start(heartbeat_interval=1)
        gym = Gym(bus, tmp_path)
        yield gym
    finally:
        if gym:
            gym.tap.close()
        bus.stop_all()


def fetch(base: str, method: str, path: str, headers: dict | None = None, body: str | None = None) -> tuple[int, str]:
    """One request without a browser: the status and the body."""
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    status, text = response.status, response.read().decode(errors="replace")
    connection.close()
    return status, text


def http_status(base: str, method: str, path: str, headers: dict | None = None, body: str | None = None) -> int:
    return fetch(base, method, path, headers, body)[0]


def session_cookie(base: str, account: tuple[str, str]) -> str:
    """Logs in without a browser; the session cookie as a Cookie header."""
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("POST", "/login", body=f"username={account[0]}&password={account[1]}",
                       headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": base})
    response = connection.getresponse()
    assert response.status == 303 and response.getheader("Location") == "/", response.status
    cookie = response.getheader("Set-Cookie")
    connection.close()
    assert cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie, cookie
    return cookie.split(";")[0]


def test_logged_out_sees_only_the_login_page(gym: Gym):
    driver = browser()
    try:
        for path in ("/assets/console.js", "/", f"/station/{STATION}"):
            driver.get(gym.base + path)
            if path.startswith("/assets"):
                assert "log in first" in driver.page_source, "a script is served only to a session"
                continue
            assert driver.current_url == gym.base + "/login", path
            assert driver.find_elements(By.NAME, "username") and driver.find_elements(By.NAME, "password")
            assert not driver.find_elements(By.CSS_SELECTOR, "[data-station]")
        shot(driver, "login")
        # A wrong password: back to the form, with the reason, and still no session.
        driver.find_element(By.NAME, "username").send_keys(COACH[0])
        driver.find_element(By.NAME, "password").send_keys("not-the-password")
        driver.find_element(By.CSS_SELECTOR, "form.login button").click()
        wait_until(lambda: "failed" in driver.current_url, "the refusal")
        assert "Wrong name or password" in driver.find_element(By.CSS_SELECTOR, ".notice").text
        driver.get(gym.base + "/")
        assert driver.current_url == gym.base + "/login"
    finally:
        driver.quit()
    # Without a session cookie: the data, the commands and the push are all refused.
    assert http_status(gym.base, "GET", "/api/board") == 401
    assert http_status(gym.base, "POST", "/api/command", {"Content-Type": "application/json"},
                       json.dumps({"station": STATION, "command": "rest.skip"})) == 401
    upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Origin": gym.base}
    assert http_status(gym.base, "GET", "/ws", upgrade) in (400, 401), "no WebSocket without a session"
    # The same handshake with a session is upgraded (101), so the refusal above is the missing session's.
    cookie = session_cookie(gym.base, COACH)
    assert http_status(gym.base, "GET", "/ws", {**upgrade, "Cookie": cookie}) == 101
    # ...but not from another site's page (cross-site WebSocket hijacking).
    assert http_status(gym.base, "GET", "/ws", {**upgrade, "Cookie": cookie, "Origin": "http://evil.example"}) in (400, 405)


def test_coach_sees_reps_set_summary_rest_and_commands_work(gym: Gym):
    driver = browser()
    try:
        log_in(driver, gym.base, COACH)
        # The board: the station's last rep and rep count are those of a rep on the bus.
        def rep_shown():
            mv, count = field(driver, "last-mv"), field(driver, "rep-count")
            return mv and count and [r for r in gym.tap.of("rep") if r["index"] == int(count) and f"{r['mean_velocity_mps']:.2f}" == mv]
        wait_until(rep_shown, "a rep on the board with the bus's values", timeout=60, detail=gym.bus.describe)
        assert field(driver, "athlete") == "ana"
        assert field(driver, "link") == "live"
        shot(driver, "board")

        driver.get(f"{gym.base}/station/{STATION}")
        wait_until(lambda: field(driver, "athlete") == "ana", "the station page")
        # End the set from the page while it goes on: the detector ends it for the command.
        wait_until(lambda: [s for s in gym.tap.of("set", event="start") if s["set_id"] not in
                            {e["set_id"] for e in gym.tap.of("set", event="end")}] and gym.tap.of("rep"),
                   "a set going on", timeout=150, detail=gym.bus.describe)
        # No rest runs during a set: the notifier refuses a pause, and the page says why.
        driver.find_element(By.CSS_SELECTOR, 'button[data-command="rest.pause"]').click()
        wait_until(lambda: "rest.pause: refused by notifier: no rest timer at rack-01" in driver.find_element(By.ID, "command-log").text,
                   "the notifier's refusal on the page", detail=lambda: driver.find_element(By.ID, "command-log").text)
        refusal = [a for a in gym.tap.of("ack") if a["command"] == "rest.pause"][-1]
        assert refusal["state"] == "refused" and refusal["program"] == "notifier" and refusal["cmd_id"].startswith("console-")
        driver.find_element(By.CSS_SELECTOR, 'button[data-command="set.end"]').click()
        ended = wait_until(lambda: gym.tap.of("set", event="end", reason="command"), "the set ended by the command",
                           detail=gym.bus.describe)[-1]
        assert [c for c in gym.tap.of("cmd") if c["command"] == "set.end" and c["src"].startswith("coach-console")]
        wait_until(lambda: "set.end: done (rep-detector)" in driver.find_element(By.ID, "command-log").text, "the page to confirm set.end")
        wait_until(lambda: f"Set ended: {ended['reps']} reps" in driver.find_element(By.ID, "summary").text
                   or gym.tap.of("set", event="start") and driver.find_element(By.ID, "summary").text == "Set in progress",
                   "the summary of the ended set")

        # The rest of the simulated set is a set of its own; at its end the notifier's rest runs.
        last_end = wait_until(lambda: [s for s in gym.tap.of("set", event="end") if s.get("reason") == "idle"],
                              "the set's end by idle", timeout=60, detail=gym.bus.describe)[-1]
        summary = wait_until(lambda: driver.find_element(By.ID, "summary").text.startswith("Set ended") and
                             driver.find_element(By.ID, "summary").text, "a set summary")
        assert f"Set ended: {last_end['reps']} reps" in summary and "(idle)" in summary, summary
        assert f"best {last_end['best_mean_velocity_mps']:.2f} m/s" in summary, summary
        first = int(wait_until(lambda: field(driver, "rest"), "a rest countdown", detail=gym.bus.describe))
        assert 0 < first <= 45
        wait_until(lambda: field(driver, "rest") and int(field(driver, "rest")) < first, "the countdown to go down")
        shot(driver, "station")

        def click(command: str) -> None:
            driver.find_element(By.CSS_SELECTOR, f'button[data-command="{command}"]').click()
            wait_until(lambda: [c for c in gym.tap.of("cmd") if c["command"] == command and c["src"].startswith("coach-console")],
                       f"{command} on the bus", detail=gym.bus.describe)
            wait_until(lambda: f"{command}: done" in driver.find_element(By.ID, "command-log").text,
                       f"the page to confirm {command}", detail=lambda: driver.find_element(By.ID, "command-log").text)

        calibrations = len(gym.tap.of("calibration"))
        click("posture.calibrate")  # started (its answer); the calibration itself comes 10 s later
        click("rest.pause")
        assert field(driver, "rest-state") == "paused"
        held = field(driver, "rest")
        wait_until(lambda: len(gym.tap.of("timer", state="paused")) >= 2, "a second paused tick")
        assert field(driver, "rest") == held, "a paused rest does not count down"
        click("rest.resume")
        before = int(field(driver, "rest"))
        click("rest.extend")
        wait_until(lambda: int(field(driver, "rest") or 0) > before + 20, "30 s more rest")
        click("rest.skip")
        wait_until(lambda: field(driver, "rest") == "", "no rest once skipped")
        driver.find_element(By.NAME, "athlete").send_keys("ben")
        driver.find_element(By.NAME, "exercise").send_keys("front-squat")
        driver.find_element(By.NAME, "load_kg").send_keys("80")
        driver.find_element(By.CSS_SELECTOR, "#assign button").click()
        wait_until(lambda: field(driver, "athlete") == "ben" and field(driver, "exercise") == "front-squat"
                   and field(driver, "load") == "80 kg", "the assignment on the page", detail=gym.bus.describe)
        assign = [c for c in gym.tap.of("cmd") if c["command"] == "athlete.assign" and c["src"].startswith("coach-console")][-1]
        assert assign["args"] == {"athlete": "ben", "exercise": "front-squat", "load_kg": 80}
        wait_until(lambda: "athlete.assign: done" in driver.find_element(By.ID, "command-log").text, "the page to confirm the assignment")
        # A plan from the recorder's list, for its own athlete: the notifier runs it, the card shows its first exercise.
        wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, '#plan option[value="ana-power"]'), "the plans in the list")
        driver.find_element(By.CSS_SELECTOR, '#plan option[value="ana-power"]').click()
        driver.find_element(By.CSS_SELECTOR, "#plan button").click()
        wait_until(lambda: "plan.assign ana-power: done" in driver.find_element(By.ID, "command-log").text, "the page to confirm the plan",
                   detail=gym.bus.describe)
        started = [c for c in gym.tap.of("cmd") if c["command"] == "plan.assign" and c["src"].startswith("coach-console")][-1]
        assert started["args"]["plan"] == "ana-power" and started["args"]["athlete"] == "ana"
        assert [e["exercise"] for e in started["args"]["exercises"]] == ["deadlift", "bench"]
        wait_until(lambda: field(driver, "athlete") == "ana" and field(driver, "exercise") == "deadlift" and field(driver, "load") == "140 kg"
                   and field(driver, "sets") == "/2", "the plan's first exercise on the card", detail=gym.bus.describe)
        assert "posture.calibrate: done (posture-evaluator: calibrating ana for 10 s)" in driver.find_element(By.ID, "command-log").text
        wait_until(lambda: len(gym.tap.of("calibration")) > calibrations, "the calibration to finish", timeout=30, detail=gym.bus.describe)
        shot(driver, "station-commands")
        # Logging out ends the session: the board is out of reach again.
        driver.find_element(By.CSS_SELECTOR, "header.top form button").click()
        wait_until(lambda: driver.current_url == gym.base + "/login", "the login page after logging out")
        driver.get(gym.base + "/")
        assert driver.current_url == gym.base + "/login"
    finally:
        driver.quit()


def test_viewer_cannot_send_commands(gym: Gym):
    driver = browser()
    try:
        log_in(driver, gym.base, VIEWER)
        wait_until(lambda: field(driver, "athlete"), "the board for the viewer")
        driver.get(f"{gym.base}/station/{STATION}")
        wait_until(lambda: field(driver, "athlete"), "the station page for the viewer")
        assert not driver.find_elements(By.CSS_SELECTOR, "button[data-command]"), "a viewer's page has no command buttons"
        shot(driver, "station-viewer")
        # Even sent by hand with the page's own token, the command is refused and never reaches the bus.
        sent_before = len(gym.tap.of("cmd"))
        status = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            fetch('/api/command', {method: 'POST', credentials: 'same-origin', headers: {'Content-Type': 'application/json',
              'X-CSRF-Token': document.querySelector('meta[name="csrf"]').content},
              body: JSON.stringify({station: 'rack-01', command: 'rest.skip'})}).then(r => done(r.status), () => done(0));""")
        assert status == 403
        assert len(gym.tap.of("cmd")) == sent_before
    finally:
        driver.quit()


def test_console_shows_the_bus_going_away_and_recovers(gym: Gym):
    driver = browser()
    try:
        log_in(driver, gym.base, COACH)
        wait_until(lambda: driver.find_element(By.ID, "link").text == "live", "the bus link live")
        gym.bus.process.kill()
        wait_until(lambda: "bus unreachable" in driver.find_element(By.ID, "link").text, "the page to show the bus gone",
                   timeout=15)
        shot(driver, "bus-down")
        again = gym.bus.spawn("vbt-bus-again", ["vbt-bus", "--heartbeat-interval", "1"])
        again.wait_for_log("bus forwarding")
        gym.bus.process = again
        wait_until(lambda: driver.find_element(By.ID, "link").text == "live", "the page to show the bus back", timeout=30,
                   detail=gym.bus.describe)
        heard = len(gym.tap.of("heartbeat", station="coach-console"))
        wait_until(lambda: len(gym.tap.of("heartbeat", station="coach-console")) > heard, "the console publishing again",
                   detail=gym.bus.describe)
        assert gym.console.proc.poll() is None
    finally:
        driver.quit()


def scrape(base: str, account: tuple[str, str] | None) -> tuple[int, str]:
    """/metrics as a Prometheus server asks for it (HTTP Basic)."""
    credentials = base64.b64encode(f"{account[0]}:{account[1]}".encode()).decode() if account else None
    return fetch(base, "GET", "/metrics", {"Authorization": f"Basic {credentials}"} if credentials else {})


def metric(text: str, name: str, labels: str = "") -> float | None:
    for line in text.splitlines():
        if line.startswith(f"{name}{{{labels}}} " if labels else f"{name} "):
            return float(line.split()[-1])
    return None


def test_metrics_need_an_account_and_show_the_whole_gym(gym: Gym):
    assert scrape(gym.base, None)[0] == 401
    assert scrape(gym.base, (VIEWER[0], "wrong password"))[0] == 401
    # Every program's heartbeat, and the station's reps as the bus carried them.
    def agreed():
        status, text = scrape(gym.base, VIEWER)
        assert status == 200
        reps = metric(text, "vbt_station_reps_total", f'station="{STATION}"')
        up = [metric(text, "vbt_program_up", f'program="{p}"') for p in ("rep-detector", "notifier", "posture-evaluator", "bus")]
        return reps is not None and reps == len(gym.tap.of("rep")) and up == [1, 1, 1, 1] and text
    text = wait_until(agreed, "/metrics to agree with the bus", timeout=30, detail=gym.bus.describe)
    assert metric(text, "vbt_bus_messages_in_total", 'program="bus"') > 0
    assert metric(text, "vbt_program_received_total", 'program="rep-detector"') > 0
    assert metric(text, "vbt_sensor_rate_hz", f'sensor="imu",station="{STATION}"') > 0
    # The Grafana dashboard in deploy/ asks only for metrics the console exports.
    dashboard = json.loads((Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "vbt-gym.json").read_text())
    asked = {name for panel in dashboard["panels"] for target in panel.get("targets", [])
             for name in re.findall(r"vbt_[a-z_]+", target["expr"])}
    exported = {line.split("{")[0].split()[0] for line in text.splitlines() if line.startswith("vbt_")}
    assert asked and asked <= exported, asked - exported


def pub(gym: Gym, topic: str, fields: dict) -> None:
    gym.bus.run(["vbt", "pub", topic, json.dumps(fields), "--rate", "0", "--athlete", "ana"])


def test_athlete_page_leaderboards_and_the_recorder_going_away(gym: Gym):
    # Two sets of ana's squat at lighter loads on another station (as a detector would publish
    # them), so her profile has three loads and a fitted line; and the detector's profile message.
    station = "rack-09"
    for load, velocities in ((60, [1.02, 0.98, 0.95]), (80, [0.81, 0.78, 0.74])):
        set_id = f"synthetic-{load}"
        pub(gym, f"set.{station}", {"set_id": set_id, "event": "start", "exercise": "squat", "load_kg": load})
        for index, velocity in enumerate(velocities, 1):
            pub(gym, f"rep.{station}", {
                "set_id": set_id, "rep_id": f"{set_id}-{index}", "index": index, "mean_velocity_mps": velocity,
                "peak_velocity_mps": velocity * 1.6, "mean_propulsive_velocity_mps": velocity * 1.1, "rom_mm": 600,
                "concentric_s": 0.6, "time_to_peak_s": 0.25, "velocity_loss_pct": round((velocities[0] - velocity) / velocities[0] * 100, 3),
                "t_end": 1.0 + index, "detector": "test", "exercise": "squat", "load_kg": load})
        pub(gym, f"set.{station}", {"set_id": set_id, "event": "end", "reps": 3, "reason": "idle", "exercise": "squat", "load_kg": load,
                                    "best_mean_velocity_mps": velocities[0], "velocity_loss_pct": round((velocities[0] - velocities[-1]) / velocities[0] * 100, 3)})
    pub(gym, f"profile.{station}", {"exercise": "squat", "loads_kg": [60, 80], "mean_velocities_mps": [1.02, 0.81],
                                    "intercept_mps": 1.65, "slope_mps_per_kg": -0.0105, "r2": 1.0, "mvt_mps": 0.3, "e1rm_kg": 128.6})
    # The recorder has the simulated station's sets too (at 100 kg) before the page is looked at.
    progress = wait_until(lambda: [e for e in gym.recorder.result("progress", {"athlete": "ana"})["exercises"]
                                   if e["exercise"] == "squat" and {p["load_kg"] for p in e["best_by_load"]} >= {60, 80, 100} and e["e1rm"]],
                          "ana's squat at three loads in the recorder", timeout=60, detail=gym.bus.describe)[0]
    driver = browser()
    try:
        log_in(driver, gym.base, COACH)
        driver.get(gym.base + "/athlete/ana")
        section = wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, 'section[data-exercise="squat"]'), "ana's squat section")[0]
        points = [(p["load_kg"], p["best_mean_velocity_mps"]) for p in progress["best_by_load"]]
        assert int(section.get_attribute("data-points")) == len(points)
        # The e1RM is where the least-squares line through the best velocity at each load meets the MVT (0.30 m/s for the squat).
        loads, velocities = [p[0] for p in points], [p[1] for p in points]
        n = len(points)
        mean_x, mean_y = sum(loads) / n, sum(velocities) / n
        slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x in loads)
        e1rm = (0.30 - (mean_y - slope * mean_x)) / slope
        assert section.get_attribute("data-e1rm-kg") == f"{e1rm:.1f}"
        assert f"e1RM {e1rm:.1f} kg" in section.get_attribute("innerHTML") and "MVT 0.30 m/s" in section.get_attribute("innerHTML")
        # The simulated station goes on lifting and the page's answers are reused for 10 s: the page
        # shows the recorder's week and sets once it asks again after the last set stored.
        def agrees():
            week = gym.recorder.result("stats.week", {"athlete": "ana"})["totals"]
            history = gym.recorder.result("history", {"athlete": "ana", "limit": 20})
            driver.get(gym.base + "/athlete/ana")
            return (f"{week['sets']} sets · {week['reps']} reps" in driver.find_element(By.CSS_SELECTOR, '[data-field="week"]').text
                    and len(driver.find_elements(By.CSS_SELECTOR, "table.sets tbody tr")) == len(history) and history)
        history = wait_until(agrees, "the athlete page to agree with the recorder", timeout=60, interval=1, detail=gym.bus.describe)
        shot(driver, "athlete")

        driver.get(gym.base + "/leaders?period=today")
        board = wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, 'section.leaders[data-exercise="squat"]'), "the squat leaderboard")[0]
        # The same e1RM as the athlete page (one estimator, docs/detection.md "e1RM"), not the profile message's 128.6.
        assert board.find_element(By.CSS_SELECTOR, '[data-field="e1rm"]').text == f"{e1rm:.1f}"
        fastest_60 = max(s["best_mean_velocity_mps"] for s in history if s["load_kg"] == 60)
        assert f"{fastest_60:.2f}" in [e.text for e in board.find_elements(By.CSS_SELECTOR, '[data-field="velocity"]')]
        shot(driver, "leaders")

        # The recorder goes away: the history says so (503), the live board keeps going.
        gym.recorder.program.kill()
        def unavailable():
            driver.get(gym.base + "/athlete/ana")
            return driver.find_elements(By.CSS_SELECTOR, '[data-field="history-error"]')
        error = wait_until(unavailable, "the athlete page to say the recorder is gone", timeout=40)[0]
        assert "no answer from session-recorder" in error.text
        shot(driver, "history-unavailable")
        driver.get(gym.base + "/")
        wait_until(lambda: field(driver, "link") == "live" and driver.find_element(By.ID, "link").text == "live", "the live board")
        gym.recorder.program = gym.bus.spawn("session-recorder-2", ["session-recorder"])
        gym.recorder.program.wait_for_log("bus connected")
        def back():
            driver.get(gym.base + "/athlete/ana")
            return driver.find_elements(By.CSS_SELECTOR, 'section[data-exercise="squat"]')
        wait_until(back, "the athlete page back with the recorder", timeout=40, detail=gym.bus.describe)
    finally:
        driver.quit()
