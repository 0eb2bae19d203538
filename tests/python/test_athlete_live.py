"""An athlete sees her own station live on her page, in a real headless Chromium, on the rack
display's gym (test_rack_display.py's fixture: a bus, the recorder, detector and notifier, a
simulated rack-01 where Ana lifts).

While Ana is the athlete at rack-01, her page (her account's, or her paired phone's) has a "Now"
section with rack-01's card, fed over the WebSocket with the values on the bus, its sound off
until she turns it on. Ben lifts on rack-02 meanwhile: the server sends her socket nothing of
him (every frame her page received is checked), and once rack-01 is assigned to Ben her page
says "not at a station now" and is sent nothing of rack-01 any more. The rest of the gym stays
refused to her."""

from __future__ import annotations

import json

import pytest

from test_console import ARTIFACTS, browser, field
from test_phone_pairing import add_phone, pair
from test_rack_display import ATHLETE, STATION, RackGym, coach_board, gym  # noqa: F401 (gym: the fixture, for this module too)
from test_wire import wait_until

selenium = pytest.importorskip("selenium")
from selenium.webdriver.common.by import By  # noqa: E402

OTHER = "rack-02"
# Ben's velocities: three decimals, so no value of Ana's (two on the page) can be mistaken for them.
BEN_MPS = (1.234, 1.187, 1.141)
# Every frame the page's WebSockets receive, kept before any of the page's scripts run.
FRAMES = """
window.vbtFrames = [];
const Native = window.WebSocket;
window.WebSocket = class extends Native {
  constructor(...args) { super(...args); this.addEventListener('message', e => window.vbtFrames.push(e.data)); }
};
"""


def ben_lifts(gym: RackGym, set_id: str) -> None:
    """A set of Ben's on rack-02, as a detector would publish it."""
    def pub(topic: str, fields: dict) -> None:
        gym.bus.run(["vbt", "pub", topic, json.dumps(fields), "--rate", "0", "--athlete", "ben"])
    pub(f"set.{OTHER}", {"set_id": set_id, "event": "start", "exercise": "bench", "load_kg": 80})
    for index, mps in enumerate(BEN_MPS, 1):
        pub(f"rep.{OTHER}", {
            "set_id": set_id, "rep_id": f"{set_id}-{index}", "index": index, "mean_velocity_mps": mps, "peak_velocity_mps": mps * 1.6,
            "mean_propulsive_velocity_mps": mps * 1.1, "rom_mm": 400, "concentric_s": 0.5, "time_to_peak_s": 0.2,
            "velocity_loss_pct": round((BEN_MPS[0] - mps) / BEN_MPS[0] * 100, 3), "t_end": 1.0 + index, "detector": "test",
            "exercise": "bench", "load_kg": 80})


def frames(driver) -> list[dict]:
    return [json.loads(f) for f in driver.execute_script("return window.vbtFrames")]


def sent_stations(updates: list[dict]) -> list[tuple[str, str | None]]:
    return [(s["station"], s.get("athlete")) for u in updates for s in u["stations"]]


def now_shows_a_rep_of_the_bus(gym: RackGym, driver) -> list[dict]:
    mv, count = field(driver, "last-mv"), field(driver, "rep-count")
    return bool(mv and count) and [r for r in gym.tap.of("rep", athlete="ana") if r["index"] == int(count)
                                   and f"{r['mean_velocity_mps']:.2f}" == mv]


@pytest.fixture(scope="module")
def ana(gym: RackGym):
    """Ana's account logged in, in a phone-sized browser that keeps every WebSocket frame."""
    driver = browser()
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": FRAMES})
    driver.set_window_size(412, 915)
    driver.get(gym.base + "/login")
    driver.find_element(By.NAME, "username").send_keys(ATHLETE[0])
    driver.find_element(By.NAME, "password").send_keys(ATHLETE[1])
    driver.find_element(By.CSS_SELECTOR, "form.login button").click()
    wait_until(lambda: driver.current_url == gym.base + "/athlete/ana", "Ana's own page after logging in")
    try:
        yield driver
    finally:
        driver.quit()


def test_ana_sees_her_station_live_and_nothing_of_ben(gym: RackGym, ana):
    driver = ana
    ben_lifts(gym, "ben-1")
    assert driver.find_elements(By.CSS_SELECTOR, 'h1[data-athlete="ana"]'), "her page, with its history"
    # rack-01's card, with a rep of hers as the bus carried it.
    wait_until(lambda: field(driver, "station") == STATION, "rack-01 in the Now section", timeout=30, detail=gym.bus.describe)
    assert not driver.find_element(By.CSS_SELECTOR, '[data-field="not-here"]').is_displayed()
    wait_until(lambda: now_shows_a_rep_of_the_bus(gym, driver), "Ana's last rep on her page with the bus's values", timeout=120,
               detail=gym.bus.describe)
    assert field(driver, "athlete") == "ana"
    # The card moves with her reps: a later rep of hers is drawn too.
    drawn = (field(driver, "last-mv"), field(driver, "rep-count"))
    wait_until(lambda: (field(driver, "last-mv"), field(driver, "rep-count")) != drawn and now_shows_a_rep_of_the_bus(gym, driver),
               "the next rep of Ana's on her page", timeout=120, detail=gym.bus.describe)
    assert field(driver, "velocity-loss") != "" and field(driver, "vl-threshold") == "8"
    # Sound is off until she turns it on, with the rack's controls.
    mute = driver.find_element(By.ID, "mute")
    assert mute.text == "Sound off" and mute.get_attribute("aria-pressed") == "true"
    assert driver.find_elements(By.ID, "volume") and driver.find_elements(By.ID, "speak")
    # Ben lifts again while her page is open; the coach's board has his set.
    ben_lifts(gym, "ben-2")
    wait_until(lambda: (board := coach_board(gym)) and [s for s in board["stations"] if s["station"] == OTHER and s["set_id"] == "ben-2"
                                                        and len(s["reps"]) == len(BEN_MPS)], "Ben's second set on the coach's board")
    # A rep of Ana's after Ben's: her socket has been sent what came since.
    count = len(gym.tap.of("rep", athlete="ana"))
    wait_until(lambda: len(gym.tap.of("rep", athlete="ana")) > count and now_shows_a_rep_of_the_bus(gym, driver)
               and field(driver, "rep-count") == str(gym.tap.of("rep", athlete="ana")[-1]["index"]),
               "a rep of Ana's after Ben's set", timeout=120, detail=gym.bus.describe)
    updates = frames(driver)
    assert updates and updates[0]["full"], updates[:1]
    assert set(sent_stations(updates)) == {(STATION, "ana")}, set(sent_stations(updates))
    raw = "".join(driver.execute_script("return window.vbtFrames"))
    for trace in ("ben", OTHER, "bench", *(str(mps) for mps in BEN_MPS)):
        assert trace not in raw, f"{trace!r} reached Ana's socket"
    assert OTHER not in driver.page_source and "1.23" not in driver.find_element(By.CSS_SELECTOR, ".now").text
    assert all(u.get("gym_alerts") is None for u in updates) and all(s["acks"] == [] for u in updates for s in u["stations"])
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / "athlete-now.png"))


def test_the_rest_of_the_gym_stays_refused(gym: RackGym, ana):
    driver = ana
    statuses = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const paths = ['/rack/rack-01', '/rack/rack-02', '/station/rack-01', '/station/rack-02', '/athlete/ben', '/metrics', '/api/board', '/ws'];
        Promise.all(paths.map(p => fetch(p, {credentials: 'same-origin', redirect: 'manual'}).then(r => r.status))).then(done, () => done(null));""")
    assert statuses == [403] * 8, statuses
    status = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch('/api/command', {method: 'POST', credentials: 'same-origin', headers: {'Content-Type': 'application/json',
          'X-CSRF-Token': document.querySelector('meta[name="csrf"]').content},
          body: JSON.stringify({station: 'rack-01', command: 'set.end'})}).then(r => done(r.status), () => done(0));""")
    assert status == 403
    driver.get(gym.base + "/")
    assert driver.current_url == gym.base + "/athlete/ana"


def test_her_phone_sees_the_same(gym: RackGym):
    _, url = add_phone(gym)
    driver = pair(gym, url)
    try:
        wait_until(lambda: field(driver, "station") == STATION and now_shows_a_rep_of_the_bus(gym, driver),
                   "rack-01 live on Ana's phone", timeout=120, detail=gym.bus.describe)
        first = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            const ws = new WebSocket('ws://' + location.host + '/ws');
            ws.onmessage = e => { ws.close(); done(e.data); };
            ws.onerror = () => done(null);""")
        update = json.loads(first)
        assert update["full"] and [(s["station"], s["athlete"]) for s in update["stations"]] == [(STATION, "ana")], update
        assert driver.find_element(By.ID, "mute").text == "Sound off"
    finally:
        driver.quit()


def test_when_rack_01_is_assigned_to_ben_she_is_at_no_station(gym: RackGym, ana):
    driver = ana
    before = len(frames(driver))
    gym.bus.run(["vbt", "pub", f"cmd.{STATION}", json.dumps({"id": "assign-ben", "command": "athlete.assign", "target": "*", "args": {
        "athlete": "ben", "exercise": "squat", "load_kg": 120}}), "--rate", "0"])
    wait_until(lambda: driver.find_element(By.CSS_SELECTOR, '[data-field="not-here"]').is_displayed(), "not at a station now",
               timeout=30, detail=gym.bus.describe)
    assert driver.find_element(By.CSS_SELECTOR, '[data-field="not-here"]').text == "not at a station now"
    assert not driver.find_element(By.CSS_SELECTOR, ".now-live").is_displayed()
    # Ben's reps at rack-01 come, and her socket is sent nothing of them: a full update with no
    # station said she left, and nothing since.
    count = len(gym.tap.of("rep", athlete="ben"))
    wait_until(lambda: len(gym.tap.of("rep", athlete="ben")) > count + 1, "two of Ben's reps at rack-01", timeout=120,
               detail=gym.bus.describe)
    wait_until(lambda: (board := coach_board(gym)) and [s for s in board["stations"] if s["station"] == STATION and s["athlete"] == "ben"
                                                        and s["reps"]], "Ben at rack-01 on the coach's board")
    since = frames(driver)[before:]
    assert since and since[0]["full"] and since[0]["stations"] == [], since[:1]
    assert sent_stations(since) == [], sent_stations(since)
    raw = "".join(driver.execute_script("return window.vbtFrames")[before:])
    assert "ben" not in raw and "squat" not in raw
    assert driver.find_element(By.CSS_SELECTOR, '[data-field="not-here"]').is_displayed()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / "athlete-not-at-a-station.png"))
