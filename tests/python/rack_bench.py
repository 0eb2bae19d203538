"""The rack display end to end (`make bench`): how long after the bridge stamped the reading
that completed a rep the athlete sees it on the rack display and hears its sound, with N
stations live against a whole installation, beside a raw pyzmq subscriber on the same bus.

The installation: vbt-bus, session-recorder, rep-detector, posture-evaluator, notifier and
coach-console, each with the arguments, journal and priority of its systemd unit (as
loadtest_bench.py starts them), and N `sensor-bridge --simulate` processes at speed 1, one a
station (a bridge simulates one station), each its own seed and exercise, sets of 6 and 10 s
rests (see start_bridges for their sensors and priority). The bridges keep no journal: a
hundred journals on this one disk would time this machine's disk, not a station computer's. A
simulated reading's `t` is the moment the bridge's schedule samples it, so a bridge that runs
late shows in the figures.

With `--others replay` the displayed stations keep their simulated bridges and the other
stations are one `sensor-bridge --replay` of a recording made here in real time from `make
run`'s three stations with the bridge's own batching (a message a reading while its socket is
free): the server sees the same streams, message for message, as from that many bridges at
their racks, while the bridges' own work, which in a gym runs on each station's computer, stays
off the server's two cores (a hundred bridge processes took 70-85 % of a core here).

Per displayed station (`--displays`, the first K stations) a rack display in headless Chromium,
paired with a real code from `vbt console display add`, with autoplay allowed and one key
press (an athlete's first touch), so the page's AudioContext runs. A script injected before
the page's own records, on performance.timeOrigin + now (the wall clock, as time.time(): the
page measures the difference against Date.now() before and after the window, and it is
reported):
- the rep on the page: a MutationObserver on the rack card, when `[data-field="last-mv"]` or
  the rep count changes (two reps of the same two-decimal velocity change only the count),
  with both texts. The observer runs at the end of the page's task that drew the update, so
  this is when the script is done with it, before the frame is painted;
- the sound: every `window.vbtCue` call, and for each the first
  AudioScheduledSourceNode.start() it makes: the wall time at which that tone is scheduled to
  begin (now + max(0, when - currentTime); the page asks for currentTime + 10 ms). The
  context's output latency (reported) comes on top.

Each rep on the bus (`t_input`: the last reading of the sample message that let the detector
count it; `t_end`: the lockout reading) of a displayed station is matched to the page's first
change after its reading, within MATCH_WITHIN_S, that shows its count and velocity, and to the
page's cue of its set and index; a rep with neither is reported unmatched. Reported per N: p50
/ p99 / max of reading -> bus (the raw subscriber, over the displayed stations and over all),
-> DOM, -> sound start, lockout (t_end) -> DOM and bus -> DOM; the reps matched and unmatched;
each program's CPU in the window, the machine's, and its load average. Printed, and written
to report.json in the folder printed first.

Run from the repository root (about 3 minutes):
    VBT_BIN_DIR=$(swift build -c release --show-bin-path) python3 tests/python/rack_bench.py \\
        [--stations 1 100] [--seconds 60] [--displays 1] [--others laser|full|replay] [--batch-delay S] [--folder DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fault_run  # noqa: E402
import loadtest_bench  # noqa: E402
from bus_tap import BusTap  # noqa: E402
from console_bench import cpu_seconds, percentile  # noqa: E402
from test_wire import binary, free_port, wait_until  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402

GOAL_MS = 50.0
# A page change more than this after the rep's reading is not taken for it: the same count and
# velocity come back only in a later set (about 30 s on), so a rep the page skipped stays unmatched.
MATCH_WITHIN_S = 10.0
EXERCISES = ["squat", "bench", "deadlift"]

# Installed before any of the page's scripts. It keeps the page's own behaviour: vbtCue passes
# every call on to whatever the page set, and start() still starts the tone.
HOOK = """
(() => {
  const wall = () => performance.timeOrigin + performance.now();
  const rack = window.__rack = {dom: [], cues: [], contexts: []};
  const Context = window.AudioContext;
  if (Context) {
    window.AudioContext = class extends Context {
      constructor(...args) { super(...args); rack.contexts.push(this); }
    };
  }
  let cueing = null;
  const start = AudioScheduledSourceNode.prototype.start;
  AudioScheduledSourceNode.prototype.start = function (when) {
    if (cueing && cueing.sound == null) {
      const ctx = this.context;
      const ahead = Math.max(0, (when || 0) - ctx.currentTime);
      cueing.sound = wall() + ahead * 1000;
      cueing.state = ctx.state;
    }
    return start.apply(this, arguments);
  };
  let page = null;
  Object.defineProperty(window, 'vbtCue', {
    configurable: true,
    get() {
      return (kind, detail) => {
        const entry = {kind, detail: JSON.parse(JSON.stringify(detail || {})), at: wall(), sound: null, state: null};
        rack.cues.push(entry);
        cueing = entry;
        try { if (page) return page(kind, detail); } finally { cueing = null; }
      };
    },
    set(f) { page = f; },
  });
  document.addEventListener('DOMContentLoaded', () => {
    const card = document.querySelector('[data-station]');
    const text = name => { const e = card.querySelector('[data-field="' + name + '"]'); return e ? e.textContent : null; };
    new MutationObserver(records => {
      const at = wall();
      for (const r of records) {
        const e = r.target.nodeType === 3 ? r.target.parentElement : r.target;
        const name = e && e.dataset ? e.dataset.field : null;
        if (name === 'last-mv' || name === 'rep-count') { rack.dom.push([text('last-mv'), text('rep-count'), at]); return; }
      }
    }).observe(card, {subtree: true, childList: true, characterData: true});
  });
})();
"""


def display_browser():
    """Headless Chromium as test_console.browser() starts it, with sound allowed to start
    without a gesture (else the page's AudioContext stays suspended and no tone is scheduled)."""
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800",
                     "--disable-gpu", "--no-first-run", "--autoplay-policy=no-user-gesture-required"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=options)


def bridge_default_batch_delay() -> str:
    """The bridge's own --batch-delay default, as its --help says it."""
    text = subprocess.run([binary("sensor-bridge"), "--help"], capture_output=True, text=True, timeout=30).stdout
    found = re.search(r"--batch-delay <batch-delay>.*?\(default: ([0-9.]+)\)", text, re.S)
    return found.group(1) if found else "?"


@dataclass
class BusRep:
    station: str
    set_id: str
    index: int
    mv: float
    t_input: float | None
    t_end: float
    received: float


@dataclass
class Display:
    station: str
    driver: object
    clock_offset_ms: list[float] = field(default_factory=list)
    state: dict = field(default_factory=dict)

    def read(self) -> dict:
        return self.driver.execute_script(
            "const r = window.__rack; return {dom: r.dom, cues: r.cues.filter(c => c.kind === 'rep'),"
            " contexts: r.contexts.map(c => ({state: c.state, base: c.baseLatency, output: c.outputLatency}))};")


def pair(base: str, users: Path, env: dict, station: str) -> Display:
    added = subprocess.run([binary("vbt"), "console", "display", "add", station, "--users", str(users)],
                           capture_output=True, text=True, env=env, timeout=30)
    assert added.returncode == 0, added.stderr
    url = re.search(r"^url: (/pair\?code=\S+)$", added.stdout, re.M).group(1)
    driver = display_browser()
    try:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HOOK})
        driver.get(base + url)
        wait_until(lambda: driver.current_url == f"{base}/rack/{station}", f"{station}'s display to pair")
        wait_until(lambda: driver.execute_script("const l = document.getElementById('link'); return !!l && l.textContent === 'live'"),
                   f"{station}'s display live")
        # The athlete's first touch: the page makes its AudioContext and resumes it.
        ActionChains(driver).send_keys(" ").perform()
        wait_until(lambda: driver.execute_script("return window.__rack.contexts.some(c => c.state === 'running')"),
                   f"{station}'s display's sound running")
        display = Display(station, driver)
        display.clock_offset_ms = [clock_offset(driver)]
        return display
    except BaseException:
        driver.quit()
        raise


# The page's clock (timeOrigin + now, what the hooks record) against the system's wall clock
# (Date.now(), as time.time()), read just as Date.now() turns to the next millisecond: the
# median of 9 such reads, good to a few tenths of a millisecond.
CLOCK = """
const reads = [];
for (let i = 0; i < 9; i++) {
  const from = Date.now();
  let now = from;
  while (now === from) now = Date.now();
  reads.push(performance.timeOrigin + performance.now() - now);
}
reads.sort((a, b) => a - b);
return reads[4];
"""


def clock_offset(driver) -> float:
    """The page's clock less the wall clock, in ms."""
    return driver.execute_script(CLOCK)


def start_installation(node: fault_run.Node, folder: Path, users: Path, port: int) -> None:
    """The daemons as loadtest_bench starts them (each unit's arguments and priority), then the console."""
    db = folder / "vbt.sqlite"
    journal = folder / "journal"
    query = node.env["VBT_QUERY_ENDPOINT"]
    commands = {
        "vbt-bus": ["vbt-bus", *loadtest_bench.unit_option("vbt-bus", "--memory-budget-mb")],
        "session-recorder": ["session-recorder", "--db", str(db), "--query-endpoint", query],
        "rep-detector": ["rep-detector", "--patterns", str(folder / "patterns.json"), "--journal", str(journal / "rep-detector")],
        "posture-evaluator": ["posture-evaluator", "--calibrations", str(folder / "calibrations.json"),
                              "--journal", str(journal / "posture-evaluator")],
        "notifier": ["notifier", "--state", str(folder / "notifier.json"), "--journal", str(journal / "notifier")],
    }
    for name in loadtest_bench.DAEMONS:
        nice, rr = loadtest_bench.unit_scheduling(name)
        node.spawn(name, commands[name], nice, rr)
        for needle in fault_run.Installation.READY[name]:
            node.current[name].wait_for_log(needle, timeout=60)
    nice, rr = loadtest_bench.unit_scheduling("coach-console")
    node.spawn("coach-console", ["coach-console", "--users", str(users), "--listen", f"127.0.0.1:{port}"], nice, rr)
    node.current["coach-console"].wait_for_log("console listening", timeout=60)


def start_bridges(node: fault_run.Node, stations: list[str], shown: list[str], seconds: float, batch_delay: float | None,
                  others: str = "laser", nice: int = 0) -> None:
    """A simulated bridge a station, under the normal scheduler: the sensor-bridge@ unit's real-time
    priority is a station computer's, where the bridge runs alone; here a hundred of them beside
    the server's programs would hold the console and the browser off the two cores. A displayed
    station has the bridge's default sensors (laser 50 Hz and bar IMU 100 Hz); the others too with
    `others` "full", or the laser alone with "laser" (a bridge process costs about 1.5 % of a core
    with both, 0.7 % with the laser: a hundred with both would take most of this machine). Sets of
    6 (about 20 s) and 10 s rests, enough sets for the window and the start (a bridge computes its
    whole session before its first reading: no more than needed). `nice` above 0 lets the server's
    programs and the browser go first: what the bridges then lose shows as readings sent late."""
    sets = max(3, math.ceil((seconds + 120) / 30))
    for number, station in enumerate(stations):
        node.spawn(f"bridge-{station}", [
            "sensor-bridge", "--station", station, "--simulate", "--speed", "1", "--exercise", EXERCISES[number % len(EXERCISES)],
            "--seed", str(number + 1), "--sets", str(sets), "--reps", "6", "--rest", "10", "--athlete", f"athlete-{number + 1}",
            *(["--imu-rate", "0"] if others == "laser" and station not in shown else []),
            *(["--batch-delay", f"{batch_delay:g}"] if batch_delay is not None else [])], nice)


# `make run`'s stations with the bridge's own batching (loadtest_bench's, without its 20 ms).
REPLAY_STATIONS = [fault_run.SimStation(s.station, s.exercise, s.load_kg, s.one_rep_max_kg, s.seed, s.athlete,
                                        tuple(a for a in s.sensors if a not in loadtest_bench.BATCHED), s.assign)
                   for s in loadtest_bench.MAKE_RUN_STATIONS]


def start_replay(node: fault_run.Node, recording: Path, others: int) -> int:
    """One replay at speed 1, looped, publishing at least `others` stations (whole copies of the
    recording's stations, starts spread over 2 s); returns how many."""
    copies = math.ceil(others / len(REPLAY_STATIONS))
    node.spawn("replay", ["sensor-bridge", "--replay", str(recording), "--stations", str(copies),
                          *(["--stagger", "2"] if copies > 1 else []), "--speed", "1", "--loop", "--no-journal"])
    return copies * len(REPLAY_STATIONS)


def match(reps: list[BusRep], seen: dict) -> list[dict]:
    """Each displayed station's reps, in the order they came off the bus, matched to the page's
    first later change showing the rep's count and velocity (each change used once) and to the
    page's cue of the rep's set and index."""
    rows = []
    pointer = 0
    dom = seen["dom"]
    cues = {(c["detail"].get("set_id"), c["detail"].get("index")): c for c in seen["cues"]}
    for rep in reps:
        completing = rep.t_input if rep.t_input is not None else rep.t_end
        shown = None
        for at in range(pointer, len(dom)):
            mv, count, when = dom[at]
            if mv == f"{rep.mv:.2f}" and count == str(rep.index) and completing <= when / 1000 <= completing + MATCH_WITHIN_S:
                shown, pointer = when / 1000, at + 1
                break
        cue = cues.get((rep.set_id, rep.index))
        sound = cue["sound"] / 1000 if cue and cue.get("sound") is not None else None
        rows.append({
            "station": rep.station, "set_id": rep.set_id, "index": rep.index, "mv": rep.mv,
            "t_input": rep.t_input, "t_end": rep.t_end, "bus": rep.received, "dom": shown,
            "cue": cue["at"] / 1000 if cue else None, "sound": sound, "audio_state": cue.get("state") if cue else None,
        })
    return rows


def machine_ticks() -> tuple[int, int]:
    """The machine's busy and total CPU ticks so far, all cores (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields[:8]) - idle, sum(fields[:8])


def own_cpu() -> dict[int, float]:
    """CPU seconds so far of this process and all its descendants (the installation, the bridges,
    chromedriver and Chromium), by pid: what this run itself costs the machine."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(text[text.rindex(")") + 2:].split()[1])
    ours, frontier = {os.getpid()}, [os.getpid()]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in ours]
        ours.update(children)
        frontier.extend(children)
    use = {}
    for pid in ours:
        try:
            use[pid] = cpu_seconds(pid)
        except (OSError, ValueError):
            continue
    return use


def cpu_use(node: fault_run.Node) -> dict[str, float]:
    """CPU seconds so far of each program of the run, the bridges summed."""
    use: dict[str, float] = {}
    for name, program in node.current.items():
        try:
            seconds = cpu_seconds(program.proc.pid)
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        key = "sensor-bridges" if name.startswith("bridge-") else "sensor-bridge (replay)" if name == "replay" else name
        use[key] = use.get(key, 0.0) + seconds
    return use


def stats(values: list[float]) -> dict:
    if not values:
        return {"count": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    return {"count": len(values), "p50_ms": round(percentile(values, 50), 2), "p99_ms": round(percentile(values, 99), 2),
            "max_ms": round(max(values), 2)}


def one(stations: int, seconds: float, folder: Path, displays: int = 1, batch_delay: float | None = None,
        others: str = "laser", bridge_nice: int = 0, recording: Path | None = None) -> dict:
    """A whole run at `stations` stations: the installation, the bridges (the displayed ones' only
    with `recording`, the others replayed from it), `displays` rack displays, a window of `seconds`;
    returns the figures and every displayed rep's times."""
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"rack-{i:03d}" for i in range(1, stations + 1)]
    shown_names = names[:max(1, min(displays, stations))]
    node = fault_run.Node(folder, {"VBT_QUERY_ENDPOINT": f"tcp://127.0.0.1:{free_port()}", "VBT_DB": str(folder / "vbt.sqlite")})
    users = folder / "console-users"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    received: list[BusRep] = []
    lock = threading.Lock()

    def keep(message: dict) -> None:
        at = time.time()
        if message.get("type") != "rep":
            return
        with lock:
            received.append(BusRep(message["station"], message["set_id"], message["index"], message["mean_velocity_mps"],
                                   message.get("t_input"), message["t_end"], at))

    tap = None
    shown: list[Display] = []
    try:
        start_installation(node, folder, users, port)
        tap = BusTap(node.sub_endpoint, keep, b"rep.")
        replayed = 0
        if recording is not None:
            start_bridges(node, shown_names, shown_names, seconds, batch_delay, others, bridge_nice)
            if stations > len(shown_names):
                replayed = start_replay(node, recording, stations - len(shown_names))
        else:
            start_bridges(node, names, shown_names, seconds, batch_delay, others, bridge_nice)
        for name in shown_names:
            shown.append(pair(base, users, node.env, name))
        fault_run.log(f"{stations} stations live, {len(shown)} display(s) paired; measuring {seconds:.0f} s")
        started, cpu_before, own_before, machine_before = time.time(), cpu_use(node), own_cpu(), machine_ticks()
        load_before = os.getloadavg()[0]
        time.sleep(seconds)  # the measurement window, not a wait for a condition
        ended, cpu_after, own_after, machine_after = time.time(), cpu_use(node), own_cpu(), machine_ticks()
        load_after = os.getloadavg()[0]
        if replayed and node.current["replay"].proc.poll() is not None:
            raise RuntimeError(f"the replay of the other stations stopped: {node.current['replay'].describe()}")
        wall = ended - started
        cpu = {name: round(100 * (cpu_after[name] - cpu_before[name]) / wall, 1) for name in cpu_after if name in cpu_before}
        # The machine's busy share of all its cores, and how much of that was this run's own.
        cores = os.cpu_count() or 1
        machine = round(100 * (machine_after[0] - machine_before[0]) / max(1, machine_after[1] - machine_before[1]), 1)
        own = round(sum(own_after[pid] - own_before[pid] for pid in own_after if pid in own_before) / wall / cores * 100, 1)
        with lock:
            window = [r for r in received if started <= r.received < ended]
        on_shown = [r for r in window if r.station in shown_names]

        # What left the bus inside the window has its time to reach the pages (bounded).
        def caught_up() -> bool:
            for display in shown:
                display.state = display.read()
            rows = [row for d in shown for row in match([r for r in on_shown if r.station == d.station], d.state)]
            return all(row["dom"] is not None and row["sound"] is not None for row in rows)
        try:
            wait_until(caught_up, "the displays to show the window's reps", timeout=5, interval=0.2)
        except AssertionError:
            pass  # reported below as unmatched
        rows = [row for d in shown for row in match([r for r in on_shown if r.station == d.station], d.state)]
        for display in shown:
            display.clock_offset_ms.append(clock_offset(display.driver))
    finally:
        for display in shown:
            display.driver.quit()
        if tap:
            tap.close()
        node.stop_all()

    def ms(rows_: list[dict], start: str, end: str) -> list[float]:
        return [(row[end] - row[start]) * 1000 for row in rows_ if row[start] is not None and row[end] is not None]

    complete = [dict(row, t_input=row["t_input"] if row["t_input"] is not None else row["t_end"]) for row in rows]
    every = [{"t_input": r.t_input if r.t_input is not None else r.t_end, "bus": r.received} for r in window]
    result = {
        "stations": stations, "displays": shown_names, "replayed_stations": replayed, "seconds": seconds, "other_stations_sensors": others, "bridge_nice": bridge_nice,
        "batch_delay": f"{batch_delay:g}" if batch_delay is not None else f"{bridge_default_batch_delay()} (the bridge's default)",
        "reps_on_bus_all_stations": len(window),
        "reps_on_bus_displayed": len(rows),
        "reps_without_t_input": sum(1 for row in rows if row["t_input"] is None),
        "matched_dom": sum(1 for row in rows if row["dom"] is not None),
        "matched_sound": sum(1 for row in rows if row["sound"] is not None),
        "unmatched_dom": [f"{row['station']} {row['set_id']} #{row['index']} {row['mv']:.2f}" for row in rows if row["dom"] is None],
        "unmatched_sound": [f"{row['station']} {row['set_id']} #{row['index']}" for row in rows if row["sound"] is None],
        "sound_not_running": sum(1 for row in rows if row["audio_state"] not in (None, "running")),
        "latency": {
            "reading_to_bus": stats(ms(complete, "t_input", "bus")),
            "reading_to_bus_all_stations": stats(ms(every, "t_input", "bus")),
            "reading_to_dom": stats(ms(complete, "t_input", "dom")),
            "reading_to_sound": stats(ms(complete, "t_input", "sound")),
            "lockout_to_dom": stats(ms(complete, "t_end", "dom")),
            "bus_to_dom": stats(ms(complete, "bus", "dom")),
        },
        "cpu_pct_of_a_core": cpu, "machine_busy_pct": machine, "this_run_pct_of_machine": own, "load_average": [round(load_before, 2), round(load_after, 2)],
        "clock_offset_ms": {d.station: [round(x, 3) for x in d.clock_offset_ms] for d in shown},
        "audio_contexts": {d.station: d.state.get("contexts") for d in shown},
        "reps": rows,
    }
    return result


STAGES = [("reading_to_bus", "reading -> bus (raw pyzmq subscriber)"), ("reading_to_dom", "reading -> DOM (last-mv)"),
          ("reading_to_sound", "reading -> sound start"), ("lockout_to_dom", "lockout (t_end) -> DOM"),
          ("bus_to_dom", "bus -> DOM (console and browser)")]


def report(results: list[dict]) -> str:
    def cell(value: float | None) -> str:
        return f"{value:9.1f}" if value is not None else f"{'-':>9}"

    others = {"laser": "the laser alone", "full": "laser and bar IMU",
              "replay": "one replay of make run's stations (laser, bar IMU, posture), a message a reading"}
    out = ["", "rack display end to end: from the reading that completed a rep (t_input, stamped by the bridge), "
           f"bridge --batch-delay {results[0]['batch_delay']}; a displayed station's bridge: laser and bar IMU, the others': "
           + others[results[0]["other_stations_sensors"]]
           + (f"; bridges at nice {results[0]['bridge_nice']}" if results[0]["bridge_nice"] else ""),
           f"{'stations':>8}  {'stage':<40} {'reps':>5} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}"]
    for r in results:
        stages = STAGES + ([("reading_to_bus_all_stations", f"reading -> bus, all {r['stations']} stations")] if r["stations"] > 1 else [])
        for key, label in stages:
            s = r["latency"][key]
            out.append(f"{r['stations']:>8}  {label:<40} {s['count']:>5} {cell(s['p50_ms'])} {cell(s['p99_ms'])} {cell(s['max_ms'])}")
    out.append("")
    for r in results:
        missing = r["unmatched_dom"] + [f"{x} (no sound)" for x in r["unmatched_sound"]]
        out.append(f"{r['stations']} stations" + (f" ({r['replayed_stations']} replayed)" if r["replayed_stations"] else "")
                   + f", display(s) {', '.join(r['displays'])}: {r['reps_on_bus_displayed']} reps on the bus, "
                   f"{r['matched_dom']} matched on the page, {r['matched_sound']} with their sound; unmatched: "
                   f"{len(r['unmatched_dom'])} on the page, {len(r['unmatched_sound'])} sounds"
                   + (f" ({'; '.join(missing[:6])})" if missing else "")
                   + (f"; {r['sound_not_running']} scheduled on a context not running" if r["sound_not_running"] else "")
                   + (f"; {r['reps_without_t_input']} without t_input (timed from t_end)" if r["reps_without_t_input"] else ""))
        offsets = ", ".join(f"{k} {' then '.join(f'{x:+.2f}' for x in v)} ms" for k, v in r["clock_offset_ms"].items())
        cpu = r["cpu_pct_of_a_core"]
        out.append(f"  CPU in the window, % of a core: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]))
                   + f"; the machine {r['machine_busy_pct']:.0f} % busy ({os.cpu_count()} cores), {r['this_run_pct_of_machine']:.0f} % this run's"
                   f" (browser included), load average {r['load_average'][0]:.1f} then {r['load_average'][1]:.1f}")
        outputs = sorted({c["output"] for contexts in r["audio_contexts"].values() for c in contexts or [] if c.get("output") is not None})
        out.append(f"  the page's clock less the wall clock, before and after the window: {offsets}; the sound's output latency"
                   f" (after its start, not in the figures): {', '.join(f'{x * 1000:.0f} ms' for x in outputs) or 'unknown'}")
    verdicts = []
    for r in results:
        p99 = r["latency"]["reading_to_dom"]["p99_ms"]
        verdicts.append(f"{r['stations']} stations " + ("no rep shown" if p99 is None else
                                                          f"p99 {p99:.1f} ms, {'met' if p99 <= GOAL_MS else 'NOT met'}"))
    out.append(f"goal: completing reading -> display (DOM) p99 <= {GOAL_MS:g} ms, bridge included: {'; '.join(verdicts)}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stations", type=int, nargs="+", default=[1, 100], help="station counts (default 1 100)")
    parser.add_argument("--seconds", type=float, default=60, help="measurement window per count (default 60)")
    parser.add_argument("--displays", type=int, default=1, help="rack displays, each on its own station (default 1)")
    parser.add_argument("--batch-delay", type=float, default=None,
                        help="passed to every sensor-bridge (default: not passed, the bridge's own default)")
    parser.add_argument("--others", choices=["laser", "full", "replay"], default="laser",
                        help="the undisplayed stations: a simulated bridge each with the laser alone (default) or the laser "
                             "and the bar IMU, or one replay of a recording of make run's stations (their bridges off this machine)")
    parser.add_argument("--bridge-nice", type=int, default=0,
                        help="the bridges' niceness (default 0): above 0 the server's programs and the browser go first")
    parser.add_argument("--folder", type=Path, help="where the logs and report.json go (default: a new temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the databases and journals too (removed by default)")
    args = parser.parse_args(argv)
    folder = args.folder or Path(tempfile.mkdtemp(prefix="vbt-rack-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"rack display benchmark: logs and report.json in {folder}", flush=True)
    results = []
    recording = loadtest_bench.recording(folder / "recording", REPLAY_STATIONS, "a message a reading") if args.others == "replay" else None
    for stations in args.stations:
        run = folder / f"n{stations}"
        results.append(one(stations, args.seconds, run, args.displays, args.batch_delay, args.others, args.bridge_nice, recording))
        if not args.keep:
            shutil.rmtree(run / "journal", ignore_errors=True)
            for db in run.glob("vbt.sqlite*"):
                db.unlink()
    (folder / "report.json").write_text(json.dumps({"goal_p99_ms": GOAL_MS, "runs": results}, indent=2), encoding="utf-8")
    print(report(results))
    print(f"report: {folder / 'report.json'}")
    return 0 if all(r["matched_dom"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
