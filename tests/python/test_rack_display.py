"""The rack display end to end in a real headless Chromium: a simulated station, the real
rep-detector and notifier on a real bus, and the console between them and the browser.

`vbt console display add rack-01` prints a code and a URL; the display pairs with it (no
password) and shows rack-01's reps with the values on the bus, each against the target band
of the athlete's zone, and calls the page's audio entry point (`window.vbtCue`) once per rep
with the band the rep falls in, once when velocity loss ends the set and once when the rest
is over. The display's session reaches nothing but its own station: another station's
display, `/`, an athlete page, `/metrics`, `/api/command` and other stations' updates are
refused or never sent. It survives a console restart; `vbt console display remove rack-01`
logs it out within 2 s. A coach's pages carry the zone legend, and the velocity-loss label
sits clear of the bars. Screenshots (1920x1080, 800x1280) go to artifacts/console/."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from bus_tap import BusLog
from test_console import ARTIFACTS, browser, fetch, field, log_in, scrape
from test_recorder import Recorder
from test_wire import Bus, binary, free_port, wait_until

selenium = pytest.importorskip("selenium")
from selenium.webdriver.common.by import By  # noqa: E402

STATION = "rack-01"
COACH = ("coach-rack", "squat-heavy-7")
ATHLETE = ("ana-login", "ana-lifts-light")
# The athlete trains in the strength-speed zone (0.50-0.75 m/s): the band every rep is held against.
ZONE = ("strength-speed", 0.50, 0.75)
# Sound hook, installed before any of the page's scripts: whatever the page makes window.vbtCue,
# every call is recorded, then passed on (so the page's own sound still runs).
HOOK = """
window.vbtCues = [];
let page = null;
Object.defineProperty(window, 'vbtCue', {
  configurable: true,
  get() { return (kind, detail) => { window.vbtCues.push({kind, detail: JSON.parse(JSON.stringify(detail || {}))}); if (page) page(kind, detail); }; },
  set(f) { page = f; },
});
"""


def expected_band(mv: float) -> str:
    return "below" if mv < ZONE[1] else ("above" if mv >= ZONE[2] else "in")


class RackGym:
    def __init__(self, bus: Bus, tmp_path: Path):
        self.bus = bus
        self.tmp_path = tmp_path
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.users = tmp_path / "console-users"
        for (name, password), role in ((COACH, ["coach"]), (ATHLETE, ["athlete", "--athlete", "ana"])):
            added = subprocess.run([binary("vbt"), "console", "user", "add", name, "--role", *role, "--users", str(self.users)],
                                   input=password + "\n", text=True, capture_output=True, env=bus.env, timeout=30)
            assert added.returncode == 0, added.stderr
        self.tap = BusLog(bus.sub_endpoint, default_station=STATION)
        self.recorder = Recorder(bus, tmp_path / "vbt.sqlite")  # sets VBT_QUERY_ENDPOINT for the console too
        bus.run(["vbt", "athlete", "add", "ana", "--name", "Ana"])
        bus.run(["vbt", "athlete", "add", "ben", "--name", "Ben"])
        self.console = self.start_console("coach-console")
        bus.spawn("rep-detector", ["rep-detector"]).wait_for_log("bus connected")
        # A short rest, over well before the simulated athlete's next set: the rest-over cue is heard.
        bus.spawn("notifier", ["notifier", "--state", str(tmp_path / "notifier.json"), "--default-rest", "6"]).wait_for_log("bus connected")
        # The athlete's zone, and a velocity-loss threshold the simulated sets reach.
        bus.run(["vbt", "pub", f"cmd.{STATION}", json.dumps({"id": "assign-1", "command": "athlete.assign", "target": "*", "args": {
            "athlete": "ana", "exercise": "squat", "load_kg": 100, "target_zone": ZONE[0], "vl_threshold_pct": 8}}), "--rate", "0"])
        bus.spawn("bridge", ["sensor-bridge", "--simulate", "--loop", "--station", STATION, "--exercise", "squat",
                             "--load-kg", "100", "--sets", "2", "--reps", "6", "--rest", "20", "--seed", "4", "--athlete", "ana"])

    def start_console(self, name: str):
        console = self.bus.spawn(name, ["coach-console", "--users", str(self.users), "--listen", f"127.0.0.1:{self.port}"])
        console.wait_for_log("console listening")
        return console

    def display(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([binary("vbt"), "console", "display", *args, "--users", str(self.users)],
                              text=True, capture_output=True, env=self.bus.env, timeout=30)


@pytest.fixture(scope="module")
def gym(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("rack")
    bus = Bus(tmp_path)
    gym = None
    try:
        bus.start(heartbeat_interval=1)
        gym = RackGym(bus, tmp_path)
        yield gym
    finally:
        if gym:
            gym.tap.close()
        bus.stop_all()


@pytest.fixture(scope="module")
def display(gym: RackGym):
    """A browser paired as rack-01's display (the hook on the sound), shared by the tests in order."""
    added = gym.display("add", STATION)
    assert added.returncode == 0, added.stderr
    code = re.search(r"^code: ([0-9A-Z]{4}-[0-9A-Z]{4})$", added.stdout, re.M).group(1)
    url = re.search(r"^url: (/pair\?code=\S+)$", added.stdout, re.M).group(1)
    assert url == f"/pair?code={code}"
    driver = browser()
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HOOK})
    driver.set_window_size(1920, 1080)
    driver.get(gym.base + url)
    wait_until(lambda: driver.current_url == f"{gym.base}/rack/{STATION}", "the pairing to land on the rack page")
    driver.code = code
    try:
        yield driver
    finally:
        driver.quit()


def cues(driver, kind: str) -> list[dict]:
    return [c["detail"] for c in driver.execute_script("return window.vbtCues") if c["kind"] == kind]


def cookie_header(driver) -> str:
    cookie = driver.get_cookie("vbt_display")
    assert cookie and cookie["httpOnly"] and cookie.get("sameSite") == "Strict", cookie
    return f"vbt_display={cookie['value']}"


def screen(driver, name: str, width: int, height: int) -> None:
    """The rack page at a screen's size: the last velocity at least a quarter of its height, and a picture."""
    driver.set_window_size(width, height)
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    driver.set_window_size(2 * width - inner[0], 2 * height - inner[1])  # the viewport itself at width x height
    assert driver.execute_script("return [window.innerWidth, window.innerHeight]") == [width, height]
    box = driver.execute_script("""const r = document.querySelector('[data-field="last-mv"]').getBoundingClientRect();
        return {height: r.height, right: r.right, bottom: r.bottom};""")
    assert box["height"] >= 0.25 * height, (name, box)
    assert box["right"] <= width and box["bottom"] <= height, (name, box)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def test_display_shows_the_reps_on_the_bus_with_their_band_and_a_cue_for_each(gym: RackGym, display):
    driver = display
    assert driver.find_elements(By.CSS_SELECTOR, f'[data-station="{STATION}"]')
    assert not driver.find_elements(By.CSS_SELECTOR, "button[data-command], #command-log"), "a display gives no commands"
    # Reps while the page is open: each cued once, with the band its velocity falls in.
    wait_until(lambda: len(cues(driver, "rep")) >= 4, "four reps cued on the display", timeout=120, detail=gym.bus.describe)
    reps = gym.tap.of("rep")
    by_key = {(r["set_id"], r["index"]): r for r in reps}
    heard = cues(driver, "rep")
    keys = [(c["set_id"], c["index"]) for c in heard]
    assert len(keys) == len(set(keys)), f"a rep cued twice: {keys}"
    for cue in heard:
        rep = by_key[(cue["set_id"], cue["index"])]
        assert cue["mv"] == rep["mean_velocity_mps"], (cue, rep)
        assert cue["band"] == expected_band(rep["mean_velocity_mps"]), (cue, rep)
    # No rep on the bus since the first cued one went without its cue.
    order = [(r["set_id"], r["index"]) for r in reps]
    first, last = order.index(keys[0]), order.index(keys[-1])
    assert order[first:last + 1] == keys, (order, keys)
    # The page shows a rep of the bus: velocity (two decimals), count and band.
    def shown():
        mv, count, band = field(driver, "last-mv"), field(driver, "rep-count"), field(driver, "band")
        return mv and count and [r for r in gym.tap.of("rep") if r["index"] == int(count) and f"{r['mean_velocity_mps']:.2f}" == mv
                                 and band == expected_band(r["mean_velocity_mps"])]
    wait_until(shown, "the last rep on the display with the bus's values", timeout=30, detail=gym.bus.describe)
    assert field(driver, "athlete") == "ana"
    assert "strength-speed 0.50–0.75 m/s" in field(driver, "target")
    # Velocity loss reaches the athlete's 8 %: the detector ends the set, the page says stop and cues it.
    wait_until(lambda: gym.tap.of("set", event="end", reason="velocity-loss"), "a set ended by velocity loss",
               timeout=120, detail=gym.bus.describe)
    wait_until(lambda: field(driver, "vl-stop") == "stop: velocity loss reached" or cues(driver, "vl-stop"), "the stop on the page")
    wait_until(lambda: cues(driver, "vl-stop"), "the velocity-loss cue")
    stops = [c["set_id"] for c in cues(driver, "vl-stop")]
    assert len(stops) == len(set(stops)) and set(stops) <= {s["set_id"] for s in gym.tap.of("set", event="end", reason="velocity-loss")}
    screen(driver, "rack-1920x1080", 1920, 1080)
    # A rest runs (the countdown), and its end is cued.
    wait_until(lambda: field(driver, "rest"), "a rest countdown on the display", timeout=60, detail=gym.bus.describe)
    wait_until(lambda: gym.tap.of("timer", state="over"), "a rest over on the bus", timeout=30, detail=gym.bus.describe)
    wait_until(lambda: cues(driver, "rest-over"), "the rest-over cue")
    # Bad posture for long enough (as the posture-evaluator says it): a warning the athlete sees.
    gym.bus.run(["vbt", "pub", f"posture.{STATION}", json.dumps({
        "correct": False, "changed": True, "acc_density": 0.1, "mag_density": 0.0001, "acc_threshold": 4.6, "mag_threshold": 0.001,
        "bad_for_s": 4.2, "sustained_bad": True, "t": time.time()}), "--rate", "0", "--athlete", "ana"])
    wait_until(lambda: field(driver, "posture-warning") == "Posture! Straighten up", "the posture warning on the display")
    screen(driver, "rack-800x1280", 800, 1280)
    driver.set_window_size(1920, 1080)


def test_display_reaches_its_own_station_and_nothing_else(gym: RackGym, display):
    driver = display
    # Another station on the bus, which the display must never be sent.
    gym.bus.run(["vbt", "pub", "set.rack-02", json.dumps({"set_id": "other", "event": "start"}), "--rate", "0", "--athlete", "ben"])
    cookie = cookie_header(driver)
    base = gym.base
    for method, path in (("GET", "/rack/rack-02"), ("GET", "/"), ("GET", "/athlete/ana"), ("GET", "/athletes"), ("GET", "/metrics"),
                         ("GET", "/api/board"), ("GET", f"/station/{STATION}"), ("GET", "/leaders"), ("GET", "/api/plans")):
        status, body = fetch(base, method, path, {"Cookie": cookie})
        assert status == 403, (path, status, body[:200])
        assert "own station only" in body, (path, body[:200])
    sent = len(gym.tap.of("cmd"))
    status, _ = fetch(base, "POST", "/api/command", {"Cookie": cookie, "Origin": base, "Content-Type": "application/json"},
                      json.dumps({"station": STATION, "command": "set.end"}))
    assert status == 403
    assert len(gym.tap.of("cmd")) == sent, "a display's command never reaches the bus"
    assert fetch(base, "GET", f"/rack/{STATION}", {"Cookie": cookie})[0] == 200
    # In the page itself, with its own cookie: the same refusals, and a WebSocket with rack-01 alone.
    statuses = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        Promise.all(['/', '/rack/rack-02', '/metrics', '/athlete/ana'].map(p => fetch(p, {credentials: 'same-origin', redirect: 'manual'}).then(r => r.status)))
          .then(done, () => done(null));""")
    assert statuses == [403, 403, 403, 403]
    first = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const ws = new WebSocket('ws://' + location.host + '/ws');
        ws.onmessage = e => { ws.close(); done(e.data); };
        ws.onerror = () => done(null);""")
    update = json.loads(first)
    assert update["full"] and [s["station"] for s in update["stations"]] == [STATION], update["stations"]
    assert update["stations"][0]["acks"] == [] and "gym_alerts" not in update and update["bus"]["messages"] == 0
    # A coach sees the whole board, rack-02 too: the display's update was narrowed by the server.
    board = wait_until(lambda: coach_board(gym), "rack-02 on the coach's board")
    assert {STATION, "rack-02"} <= {s["station"] for s in board["stations"]}
    # A used code pairs nothing more; a wrong one neither.
    assert fetch(base, "GET", f"/pair?code={driver.code}")[0] == 403
    assert fetch(base, "GET", "/pair?code=0000-0000")[0] == 403


def coach_board(gym: RackGym) -> dict | None:
    host, port = gym.base.removeprefix("http://").split(":")
    import http.client
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("POST", "/login", body=f"username={COACH[0]}&password={COACH[1]}",
                       headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": gym.base})
    response = connection.getresponse()
    cookie = response.getheader("Set-Cookie").split(";")[0]
    connection.close()
    status, body = fetch(gym.base, "GET", "/api/board", {"Cookie": cookie})
    board = json.loads(body) if status == 200 else None
    return board if board and "rack-02" in {s["station"] for s in board["stations"]} else None


def test_coach_pages_have_a_zone_legend_and_a_threshold_label_clear_of_the_bars(gym: RackGym):
    driver = browser()
    try:
        log_in(driver, gym.base, COACH)
        legend = wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, ".legend li[data-zone]"), "the zone legend on the board")
        assert [li.text for li in legend][:2] == ["max-strength < 0.30 m/s", "strength 0.30–0.50 m/s"]
        assert len(legend) == 5
        driver.get(f"{gym.base}/station/{STATION}")
        wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, "#bars .threshold-label") and
                   len(driver.find_elements(By.CSS_SELECTOR, "#bars rect.bar")) >= 3, "a set's bars with the threshold",
                   timeout=120, detail=gym.bus.describe)
        assert driver.find_elements(By.CSS_SELECTOR, ".set-view .legend li[data-zone]")
        overlaps = driver.execute_script("""
            const box = e => e.getBoundingClientRect();
            const label = box(document.querySelector('#bars .threshold-label'));
            const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
            return [...document.querySelectorAll('#bars rect.bar, #bars .bar-value')].filter(e => hit(box(e), label)).length;""")
        assert overlaps == 0
        driver.set_window_size(1280, 1000)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "station-legend.png"))
        # A coach may look at any station's rack page too.
        driver.get(f"{gym.base}/rack/{STATION}")
        wait_until(lambda: field(driver, "athlete") == "ana", "the rack page for a coach")
    finally:
        driver.quit()


def test_an_athlete_account_sees_only_its_own_page(gym: RackGym):
    driver = browser()
    try:
        driver.get(gym.base + "/login")
        driver.find_element(By.NAME, "username").send_keys(ATHLETE[0])
        driver.find_element(By.NAME, "password").send_keys(ATHLETE[1])
        driver.find_element(By.CSS_SELECTOR, "form.login button").click()
        wait_until(lambda: driver.current_url == gym.base + "/athlete/ana", "ana's own page after logging in")
        def sets_shown():
            driver.get(gym.base + "/athlete/ana")
            return driver.find_elements(By.CSS_SELECTOR, 'section[data-exercise="squat"]')
        wait_until(sets_shown, "ana's squats on her page", timeout=60, interval=1, detail=gym.bus.describe)
        assert not driver.find_elements(By.CSS_SELECTOR, "header.top nav"), "no way to the rest of the gym"
        statuses = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            const paths = ['/athlete/ben', '/athletes', '/leaders', '/station/rack-01', '/rack/rack-01', '/metrics', '/api/board', '/api/plans', '/ws'];
            Promise.all(paths.map(p => fetch(p, {credentials: 'same-origin', redirect: 'manual'}).then(r => r.status))).then(done, () => done(null));""")
        assert statuses == [403] * 9, statuses
        status = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            fetch('/api/command', {method: 'POST', credentials: 'same-origin', headers: {'Content-Type': 'application/json',
              'X-CSRF-Token': document.querySelector('meta[name="csrf"]').content},
              body: JSON.stringify({station: 'rack-01', command: 'set.end'})}).then(r => done(r.status), () => done(0));""")
        assert status == 403
        assert scrape(gym.base, ATHLETE)[0] == 401, "nor /metrics with HTTP Basic"
        driver.get(gym.base + "/")
        assert driver.current_url == gym.base + "/athlete/ana"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "athlete-account.png"))
    finally:
        driver.quit()


def test_display_survives_a_console_restart_and_removal_logs_it_out_within_2_s(gym: RackGym, display):
    driver = display
    cookie = cookie_header(driver)
    gym.console.terminate()
    gym.console = gym.start_console("coach-console-again")
    # The same display, no new code: its page is served and its live updates come again.
    assert fetch(gym.base, "GET", f"/rack/{STATION}", {"Cookie": cookie})[0] == 200
    def page() -> str:
        link = driver.execute_script("const l = document.getElementById('link'); return l ? l.outerHTML : 'no link'")
        logs = driver.get_log("browser") if hasattr(driver, "get_log") else []
        return f"{gym.console.describe()}\npage {driver.current_url}: link {link}; console {logs[-10:]}"
    wait_until(lambda: [e for e in driver.find_elements(By.ID, "link") if e.text == "live"], "the display live again", timeout=30,
               detail=page)
    count = len(cues(driver, "rep"))
    wait_until(lambda: len(cues(driver, "rep")) > count, "a rep cued after the restart", timeout=120,
               detail=lambda: gym.bus.describe() + page())
    listed = gym.display("list")
    assert listed.returncode == 0 and re.search(rf"^[0-9a-f]{{8}}\t{STATION}\tpaired ", listed.stdout, re.M), listed.stdout
    assert driver.code not in (gym.users.parent / "console-users.displays").read_text(), "codes are kept hashed"
    removed = gym.display("remove", STATION)
    assert removed.returncode == 0, removed.stderr
    at = time.monotonic()
    wait_until(lambda: "unpaired" in driver.find_element(By.TAG_NAME, "body").get_attribute("class"), "the display logged out",
               timeout=2, detail=gym.console.describe)
    elapsed = time.monotonic() - at
    assert elapsed <= 2
    (ARTIFACTS / "rack-logout.json").write_text(json.dumps({"removed_to_logged_out_s": round(elapsed, 3)}))
    assert driver.find_element(By.ID, "unpaired").is_displayed()
    status, _ = fetch(gym.base, "GET", f"/rack/{STATION}", {"Cookie": cookie})
    assert status == 401
    assert fetch(gym.base, "GET", "/ws", {"Cookie": cookie})[0] in (400, 401)
    assert gym.display("remove", STATION).returncode != 0, "nothing left to remove"
