"""An athlete's phone paired without a password, in a real headless Chromium, on the rack
display's gym (test_rack_display.py's fixture: a bus, the recorder, detector and notifier, a
simulated rack-01 where Ana lifts).

`vbt console display add --athlete ana` prints a code and a URL; the phone that opens it lands
on Ana's own page and is what Ana's athlete account is, without a password: another athlete's
page, the board, any station's or rack page (rack-01's too, where she lifts), `/metrics`, the
API, the WebSocket and commands are refused with the same statuses as the account gets. It is
listed by `display list`, survives a console restart, and `display remove --athlete ana` logs it
out within 2 s (its next request is refused). Its own "Log out" unpairs it."""

from __future__ import annotations

import json
import re
import time

import pytest

from test_console import ARTIFACTS, browser, fetch, session_cookie
from test_rack_display import ATHLETE, STATION, RackGym, gym  # noqa: F401 (gym: the fixture, for this module too)
from test_wire import wait_until

selenium = pytest.importorskip("selenium")
from selenium.webdriver.common.by import By  # noqa: E402

# What Ana's phone must not reach (and her account does not either), as GET paths.
FORBIDDEN = ("/athlete/ben", "/athletes", "/leaders", f"/station/{STATION}", f"/rack/{STATION}", "/rack/rack-02", "/metrics",
             "/api/board", "/api/plans", "/ws")


def add_phone(gym: RackGym, athlete: str = "ana") -> tuple[str, str]:
    """`vbt console display add --athlete ATHLETE`: its code and URL."""
    added = gym.display("add", "--athlete", athlete)
    assert added.returncode == 0, added.stderr
    code = re.search(r"^code: ([0-9A-Z]{4}-[0-9A-Z]{4})$", added.stdout, re.M).group(1)
    url = re.search(r"^url: (/pair\?code=\S+)$", added.stdout, re.M).group(1)
    assert url == f"/pair?code={code}" and f"{athlete}'s phone" in added.stderr, (added.stdout, added.stderr)
    return code, url


def pair(gym: RackGym, url: str):
    """A browser that opened the pairing URL and landed on Ana's page."""
    driver = browser()
    driver.set_window_size(412, 915)  # a phone's viewport
    driver.get(gym.base + url)
    wait_until(lambda: driver.current_url == f"{gym.base}/athlete/ana", "the pairing to land on Ana's page",
               detail=lambda: f"{driver.current_url}\n{gym.console.describe()}")
    return driver


def phone_cookie(driver) -> str:
    cookie = driver.get_cookie("vbt_display")
    assert cookie and cookie["httpOnly"] and cookie.get("sameSite") == "Strict", cookie
    return f"vbt_display={cookie['value']}"


def anas_page(driver) -> bool:
    return bool(driver.find_elements(By.CSS_SELECTOR, 'h1[data-athlete="ana"]'))


@pytest.fixture(scope="module")
def phone(gym: RackGym):
    code, url = add_phone(gym)
    driver = pair(gym, url)
    driver.code = code
    try:
        yield driver
    finally:
        driver.quit()


def test_a_phone_pairs_with_its_code_and_sees_anas_own_page(gym: RackGym, phone):
    driver = phone
    assert anas_page(driver), driver.page_source[:500]
    # Her page as her account shows it: no way to the rest of the gym, her station now (test_athlete_live.py).
    assert not driver.find_elements(By.CSS_SELECTOR, "header.top nav")
    assert driver.find_elements(By.CSS_SELECTOR, 'section.now article[data-station]')
    assert "ana's phone (athlete)" in driver.find_element(By.CSS_SELECTOR, "header.top .who").text
    # Her sets, once the recorder has them (the simulated rack-01 is hers).
    def sets_shown():
        driver.get(gym.base + "/athlete/ana")
        return driver.find_elements(By.CSS_SELECTOR, 'section[data-exercise="squat"]')
    wait_until(sets_shown, "Ana's squats on her phone", timeout=90, interval=1, detail=gym.bus.describe)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / "athlete-phone.png"))
    listed = gym.display("list")
    assert listed.returncode == 0 and re.search(r"^[0-9a-f]{8}\tphone of ana\tpaired ", listed.stdout, re.M), listed.stdout
    kept = (gym.users.parent / "console-users.displays").read_text()
    assert driver.code not in kept and phone_cookie(driver).split(".")[1] not in kept, "the code and the secret are kept hashed"
    assert re.search(r"^phone:[0-9a-f]{8}:ana:\$2", kept, re.M), kept
    # A used code pairs nothing more.
    assert fetch(gym.base, "GET", f"/pair?code={driver.code}")[0] == 403


def test_the_phone_is_refused_what_anas_account_is_refused(gym: RackGym, phone):
    driver = phone
    cookie = phone_cookie(driver)
    account = session_cookie(gym.base, ATHLETE)
    for path in FORBIDDEN:
        status, body = fetch(gym.base, "GET", path, {"Cookie": cookie})
        assert status == 403, (path, status, body[:200])
        assert "an athlete's phone sees its own page only: /athlete/ana" in body, (path, body[:200])
        assert fetch(gym.base, "GET", path, {"Cookie": account})[0] == 403, f"{path}: the account is refused it too"
    # `/` leads to her own page, as for her account: never the board.
    for who in (cookie, account):
        status, body = fetch(gym.base, "GET", "/", {"Cookie": who})
        assert status == 303 and 'id="stations"' not in body, (status, body[:200])
    assert fetch(gym.base, "GET", "/athlete/ana", {"Cookie": cookie})[0] == 200
    assert fetch(gym.base, "GET", "/athlete/ana", {"Cookie": account})[0] == 200
    # No command reaches the bus, even with the page's own token and a same-origin Origin.
    token = driver.find_element(By.CSS_SELECTOR, 'meta[name="csrf"]').get_attribute("content")
    assert len(token) == 64
    sent = len(gym.tap.of("cmd"))
    for path, body in (("/api/command", {"station": STATION, "command": "set.end"}), ("/api/plan", {"station": STATION, "plan": "x"})):
        status, _ = fetch(gym.base, "POST", path, {"Cookie": cookie, "Origin": gym.base, "Content-Type": "application/json",
                                                   "X-CSRF-Token": token}, json.dumps(body))
        assert status == 403, (path, status)
    assert len(gym.tap.of("cmd")) == sent, "a phone's command never reaches the bus"
    # In the phone's browser itself, with its own cookie: the same.
    statuses = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const paths = arguments[0];
        Promise.all(paths.map(p => fetch(p, {credentials: 'same-origin', redirect: 'manual'}).then(r => r.status))).then(done, () => done(null));""",
        list(FORBIDDEN))
    assert statuses == [403] * len(FORBIDDEN), statuses
    status = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch('/api/command', {method: 'POST', credentials: 'same-origin', headers: {'Content-Type': 'application/json',
          'X-CSRF-Token': document.querySelector('meta[name="csrf"]').content},
          body: JSON.stringify({station: 'rack-01', command: 'set.end'})}).then(r => done(r.status), () => done(0));""")
    assert status == 403
    assert len(gym.tap.of("cmd")) == sent
    driver.get(gym.base + "/")
    assert driver.current_url == gym.base + "/athlete/ana"


def test_logging_out_on_the_phone_unpairs_it(gym: RackGym):
    _, url = add_phone(gym)
    driver = pair(gym, url)
    try:
        cookie = phone_cookie(driver)
        phone_id = cookie.removeprefix("vbt_display=").split(".")[0]
        assert f"{phone_id}\tphone of ana\tpaired" in gym.display("list").stdout
        driver.find_element(By.CSS_SELECTOR, 'header.top form[action="/logout"] button').click()
        wait_until(lambda: driver.current_url == gym.base + "/pair", "the pairing form after logging out")
        assert driver.get_cookie("vbt_display") is None
        assert phone_id not in gym.display("list").stdout, "logging out unpaired it"
        assert fetch(gym.base, "GET", "/athlete/ana", {"Cookie": cookie})[0] == 401
        # Her other phone (the module's) stays paired: a phone logs out itself alone.
        assert "phone of ana\tpaired" in gym.display("list").stdout
    finally:
        driver.quit()


def test_the_phone_survives_a_console_restart_and_removal_logs_it_out_within_2_s(gym: RackGym, phone):
    driver = phone
    cookie = phone_cookie(driver)
    gym.console.terminate()
    gym.console = gym.start_console("coach-console-phone")
    # The same phone, no new code.
    driver.get(gym.base + "/athlete/ana")
    assert anas_page(driver), driver.page_source[:500]
    assert fetch(gym.base, "GET", "/rack/rack-01", {"Cookie": cookie})[0] == 403, "still kept to Ana's page"
    removed = gym.display("remove", "--athlete", "ana")
    assert removed.returncode == 0 and re.search(r"^removed phone of ana \([0-9a-f]{8}\)$", removed.stdout, re.M), removed
    at = time.monotonic()

    def logged_out() -> bool:
        driver.get(gym.base + "/athlete/ana")
        return bool(driver.find_elements(By.CSS_SELECTOR, 'form[action="/pair"]')) and not anas_page(driver)
    wait_until(logged_out, "the phone logged out", timeout=2, interval=0.05, detail=gym.console.describe)
    elapsed = time.monotonic() - at
    assert elapsed <= 2
    (ARTIFACTS / "phone-logout.json").write_text(json.dumps({"removed_to_logged_out_s": round(elapsed, 3)}))
    assert "removed" in driver.find_element(By.CSS_SELECTOR, ".notice").text
    assert driver.get_cookie("vbt_display") is None, "the refusal cleared the cookie"
    status, _ = fetch(gym.base, "GET", "/athlete/ana", {"Cookie": cookie})
    assert status == 401
    assert fetch(gym.base, "GET", "/", {"Cookie": cookie})[0] == 401
    assert gym.display("remove", "--athlete", "ana").returncode != 0, "nothing left to remove"
