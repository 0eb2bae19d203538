"""The operator tools on a live bus: `vbt echo` and `vbt hz` show what flows,
with per-src rates and gap counts; every program answers --help and refuses
bad flags with a non-zero exit."""

import json
import os
import re
import subprocess
import threading
from pathlib import Path

from test_wire import Bus, binary, bus, free_port, wait_until  # noqa: F401 (fixture)

SAMPLE = {"sensor": "distance", "samples": [{"t": 1763812345.5, "distance_mm": 512}]}


def test_echo_and_hz(bus: Bus, tmp_path: Path):
    hz = bus.spawn("hz", ["vbt", "hz", "--window", "0.5", "--reports", "4", "sample."])
    echo = bus.spawn("echo", ["vbt", "echo", "--count", "5", "sample."])
    hz.wait_for_log("bus connected")
    echo.wait_for_log("bus connected")
    bus.run(["vbt", "pub", "sample.cli-1", json.dumps(SAMPLE), "--count", "40", "--rate", "40"], timeout=60)
    assert echo.proc.wait(timeout=30) == 0, echo.describe()
    lines = echo.stdout().splitlines()
    assert len(lines) == 5 and all(line.startswith("sample.cli-1 {") for line in lines), lines
    assert all(json.loads(line.split(" ", 1)[1])["sensor"] == "distance" for line in lines)
    assert hz.proc.wait(timeout=30) == 0, hz.describe()
    table = hz.stdout()
    rows = [line for line in table.splitlines() if line.startswith("sample.cli-1")]
    assert rows, table
    last = rows[-1].split()
    # topic, src, msg/s, received, gaps, missing, dups
    assert last[1].startswith("vbt-pub-") and last[1].endswith("/sample.cli-1"), last
    assert int(last[3]) > 0 and last[4:7] == ["0", "0", "0"], last
    assert any(float(row.split()[2]) > 0 for row in rows), rows
    assert "malformed: 0" in table


def test_help_and_bad_flags():
    for program in ["vbt-bus", "vbt", "sensor-bridge", "rep-detector", "posture-evaluator", "notifier", "session-recorder",
                    "coach-console", "vbt-uplink"]:
        result = subprocess.run([binary(program), "--help"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert result.returncode == 0 and "USAGE" in result.stdout.upper(), (program, result.stderr)
        bad = subprocess.run([binary(program), "--no-such-flag"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert bad.returncode != 0 and bad.stderr.strip(), (program, bad.returncode)
        # --version answers without keys or a bus: the program, its version, the wire it speaks, its libzmq.
        env = {k: v for k, v in os.environ.items() if not k.startswith("VBT_")}
        version = subprocess.run([binary(program), "--version"], capture_output=True, text=True, timeout=30,
                                 stdin=subprocess.DEVNULL, env=env)
        assert version.returncode == 0, (program, version.stderr)
        assert re.fullmatch(rf"{program} \d+\.\d+\.\d+ \(wire v1, libzmq \d+\.\d+\.\d+\)\n", version.stdout), version.stdout


def test_record_keeps_an_existing_file(tmp_path: Path):
    kept = tmp_path / "session.jsonl"
    kept.write_text("an earlier recording\n")
    result = subprocess.run([binary("vbt"), "record", "--out", str(kept), "--count", "1"], capture_output=True, text=True,
                            timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode != 0 and "--force" in result.stderr, result.stderr
    assert kept.read_text() == "an earlier recording\n"


def test_training_commands_help_and_a_missing_recorder(tmp_path: Path):
    """Every training command has --help; with no recorder listening, one line and exit 1, never a hang."""
    import os
    from test_wire import free_port
    commands = [["athlete", "add"], ["athlete", "list"], ["athlete", "show"], ["athlete", "weigh-in"], ["exercise", "list"],
                ["exercise", "show"], ["exercise", "add"], ["set", "note"], ["plan", "create"], ["plan", "show"], ["plan", "list"], ["plan", "assign"],
                ["station", "assign"], ["history"], ["progress"], ["stats", "week"], ["export"]]
    for words in commands:
        result = subprocess.run([binary("vbt"), *words, "--help"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert result.returncode == 0 and "--json" in result.stdout, (words, result.stdout, result.stderr)
    env = dict(os.environ, VBT_QUERY_ENDPOINT=f"tcp://127.0.0.1:{free_port()}")
    result = subprocess.run([binary("vbt"), "athlete", "list", "--timeout", "1"], capture_output=True, text=True, timeout=30,
                            stdin=subprocess.DEVNULL, env=env, cwd=tmp_path)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1 and "is it running?" in lines[0], result.stderr
    bad = subprocess.run([binary("vbt"), "export", "--format", "xml", "--out", str(tmp_path)], capture_output=True, text=True,
                         timeout=30, stdin=subprocess.DEVNULL, env=env)
    assert bad.returncode != 0 and "json or csv" in bad.stderr, bad.stderr


def thread_nices(pid: int) -> dict[str, int]:
    """Each thread's name and niceness (/proc/PID/task/TID/stat: field 19, after the parenthesised name)."""
    nices = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        nices[f"{name}/{task.name}"] = int(stat[stat.rindex(")") + 2:].split()[16])
    return nices


def test_every_thread_keeps_the_niceness_the_program_was_started_with(bus: Bus, tmp_path: Path):
    """A unit's Nice= (deploy/README.md, Priorities) reaches the loop, ZeroMQ's threads and the
    Swift runtime's, which libdispatch starts at the niceness of their quality of service."""
    detector = bus.spawn("rep-detector", ["rep-detector", "--patterns", str(tmp_path / "patterns.json")], nice=7)
    detector.wait_for_log("bus connected")
    # A heartbeat (every second) gives threads started since the last one the program's niceness.
    def all_at_seven() -> dict[str, int] | None:
        nices = thread_nices(detector.proc.pid)
        return nices if len(nices) >= 4 and set(nices.values()) == {7} else None
    nices = wait_until(all_at_seven, "every thread of the detector at niceness 7",
                       detail=lambda: f"{thread_nices(detector.proc.pid)}\n{detector.describe()}")
    assert any("ZMQbg/IO" in name for name in nices), nices


def test_status_lists_the_programs(bus: Bus, tmp_path: Path):
    """vbt status: a line per program heard, from its heartbeat; exit 1 and one line when nothing is heard."""
    bus.spawn("rep-detector", ["rep-detector", "--patterns", str(tmp_path / "patterns.json")]).wait_for_log("bus connected")
    def listed() -> str | None:
        result = subprocess.run([binary("vbt"), "status", "--seconds", "1.5"], env=bus.env, capture_output=True, text=True,
                                timeout=30, stdin=subprocess.DEVNULL)
        return result.stdout if result.returncode == 0 and "rep-detector" in result.stdout else None
    table = wait_until(listed, "vbt status to list the detector", detail=bus.describe)
    assert re.search(r"^bus\s+vbt-bus\s+vbt-bus-\w+\s+\d+ s\s+forwarded \d+", table, re.M), table
    assert re.search(r"^rep-detector\s+rep-detector\s+rep-detector-\w+\s+\d+ s\s+received \d+, gaps 0, lost 0, malformed 0", table, re.M), table
    env = dict(bus.env, VBT_SUB_ENDPOINT=f"tcp://127.0.0.1:{free_port()}")
    silent = subprocess.run([binary("vbt"), "status", "--seconds", "0.5"], env=env, capture_output=True, text=True, timeout=30,
                            stdin=subprocess.DEVNULL)
    assert silent.returncode == 1 and "no heartbeat" in silent.stderr, silent.stderr


def test_pub_checks_against_proto():
    """vbt pub refuses what every consumer would refuse, naming what is wrong; --no-check is the way round."""
    for topic, body, says in [("rep.rack-01", '{"foo":1}', "refused by proto/rep.schema.json"),
                              ("cmd.rack-01", '{"id":"c1","command":"athlete.asign","target":"*"}', "no command 'athlete.asign'"),
                              ("zzz.rack-01", "{}", "no message type 'zzz'")]:
        result = subprocess.run([binary("vbt"), "pub", topic, body, "--wait-subscribers", "0"], capture_output=True, text=True,
                                timeout=30, stdin=subprocess.DEVNULL)
        assert result.returncode != 0 and says in result.stderr and "--no-check" in result.stderr, (topic, result.stderr)


def test_console_refuses_a_lan_address_and_a_short_password(tmp_path: Path):
    """The console listens on the network only when told to (passwords would cross it in clear);
    an account's password is checked before anything is written."""
    lan = subprocess.run([binary("coach-console"), "--listen", "0.0.0.0:8080", "--insecure"], capture_output=True, text=True,
                         timeout=30, stdin=subprocess.DEVNULL)
    assert lan.returncode != 0 and "--allow-lan" in lan.stderr, lan.stderr
    users = tmp_path / "users"
    short = subprocess.run([binary("vbt"), "console", "user", "add", "ana", "--role", "coach", "--users", str(users)],
                           input="short\n", capture_output=True, text=True, timeout=30)
    assert short.returncode != 0 and "at least 8" in short.stderr and not users.exists(), short.stderr
    added = subprocess.run([binary("vbt"), "console", "user", "add", "ana", "--role", "viewer", "--users", str(users)],
                           input="long enough\n", capture_output=True, text=True, timeout=30)
    assert added.returncode == 0, added.stderr
    listed = subprocess.run([binary("vbt"), "console", "user", "list", "--users", str(users)], capture_output=True, text=True, timeout=30)
    assert listed.stdout == "ana\tviewer\n" and "long enough" not in users.read_text()


def test_compressed_recording_info_and_replay(bus: Bus, tmp_path: Path):
    """`vbt record --out X.gz` writes gzip; `vbt record info` tells what it holds (counts that
    agree with Python's own reading of it); sensor-bridge replays it like a plain recording."""
    import gzip
    bridge = bus.spawn("bridge", ["sensor-bridge", "--simulate", "--station", "rack-07", "--speed", "4", "--loop", "--posture-rate", "20"])
    out = tmp_path / "session.jsonl.gz"
    bus.run(["vbt", "record", "--out", str(out), "--count", "300", "sample.", "status."], timeout=60)
    assert bridge.terminate() == 0
    with gzip.open(out, "rt") as f:  # real gzip, readable by anyone's tools
        lines = [json.loads(line) for line in f if line.strip()]
    assert len(lines) == 300
    info = json.loads(subprocess.run([binary("vbt"), "record", "info", str(out), "--json"], capture_output=True, text=True,
                                     timeout=30, check=True).stdout)
    types = {}
    for line in lines:
        types[line["msg"]["type"]] = types.get(line["msg"]["type"], 0) + 1
    assert info["compressed"] and info["lines"] == 300 and info["unreadable"] == 0 and info["stations"] == ["rack-07"]
    assert info["types"] == types and info["duration_s"] == max(line["t"] for line in lines)
    readings: dict[str, int] = {}
    for line in lines:
        if line["msg"]["type"] == "sample":
            readings[line["msg"]["sensor"]] = readings.get(line["msg"]["sensor"], 0) + len(line["msg"]["samples"])
    assert info["readings"] == readings and readings["imu"] > 0
    # A recording cut short (a recorder killed mid-write) keeps what came before.
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(out.read_bytes()[: out.stat().st_size // 2])
    partial = json.loads(subprocess.run([binary("vbt"), "record", "info", str(cut), "--json"], capture_output=True, text=True,
                                        timeout=30, check=True).stdout)
    assert 0 < partial["lines"] < 300
    # Replayed from the compressed file.
    copy = tmp_path / "copy.jsonl"
    recorder = bus.spawn("record-copy", ["vbt", "record", "--out", str(copy), "sample.rack-07"])
    recorder.wait_for_log("bus connected")
    bus.run(["sensor-bridge", "--replay", str(out), "--speed", "0"], timeout=60)

    def replayed() -> dict[str, int]:  # a replay batches readings again, as a live bridge does: count readings
        counts: dict[str, int] = {}
        text = copy.read_text() if copy.exists() else ""
        for line in text[: text.rfind("\n") + 1].splitlines():  # whole lines: the copy is being written
            msg = json.loads(line)["msg"]
            counts[msg["sensor"]] = counts.get(msg["sensor"], 0) + len(msg["samples"])
        return counts
    wait_until(lambda: replayed() == readings, "the replayed readings", detail=lambda: f"{replayed()} of {readings}\n{bus.describe()}")


def test_commands_say_the_bus_is_not_reachable(tmp_path: Path):
    """With no vbt-bus at the endpoints, every bus command says so within its timeout and exits 1
    (echo used to wait silently, pub to report "published" into the void)."""
    import time
    env = dict(os.environ, VBT_PUB_ENDPOINT=f"tcp://127.0.0.1:{free_port()}", VBT_SUB_ENDPOINT=f"tcp://127.0.0.1:{free_port()}")
    for args in (["echo"], ["hz"], ["record", "--out", str(tmp_path / "r.jsonl")], ["pub", "rep.rack-01", "{}", "--no-check"],
                 ["posture", "calibrate", "--station", "rack-01", "--athlete", "ana", "--no-check"]):
        started = time.monotonic()
        result = subprocess.run([binary("vbt"), *args], env=env, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert result.returncode == 1 and "vbt-bus is not reachable at tcp://127.0.0.1:" in result.stderr, (args, result.stderr)
        assert time.monotonic() - started < 10, args


def test_json_log_lines(bus: Bus, tmp_path: Path):
    """--log-format json (or VBT_LOG_FORMAT=json): every line a program logs is one JSON object,
    with its time, level, label and metadata (for journald and log shippers)."""
    notifier = bus.spawn("notifier", ["notifier", "--state", str(tmp_path / "n.json"), "--log-format", "json"])
    notifier.wait_for_log('"message":"bus connected"')
    env = dict(bus.env, VBT_LOG_FORMAT="json")
    detector = subprocess.Popen([binary("rep-detector")], env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)
    try:
        first = json.loads(detector.stderr.readline())
        assert first["label"] == "rep-detector" and first["level"] == "info" and first["ts"].endswith("Z"), first
    finally:
        detector.terminate()
        detector.wait(30)
    assert notifier.terminate() == 0
    lines = [line for line in notifier.stderr().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]
    connected = next(r for r in records if r["message"] == "bus connected")
    assert connected["label"] == "notifier" and connected["metadata"]["bus.instance"].startswith("vbt-bus-"), connected
    bad = subprocess.run([binary("notifier"), "--log-format", "xml"], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "log-format" in bad.stderr, bad.stderr


def test_one_shot_commands_print_their_answer_only(bus: Bus, tmp_path: Path):
    """A one-shot command's stderr holds problems, not the bus handshake ("bus connected" used to
    follow every command); VBT_LOG_LEVEL=info brings the log back."""
    quiet = {k: v for k, v in bus.env.items() if k != "VBT_LOG_LEVEL"}  # the tests' programs log at info
    for args in (["pub", "rep.rack-01", "--no-check", "--wait-subscribers", "0", "{}"], ["status"], ["topics", "--seconds", "0.5"]):
        result = subprocess.run([binary("vbt"), *args], env=quiet, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert result.returncode == 0 and result.stderr == "", (args, result.stderr)
    env = dict(quiet, VBT_LOG_LEVEL="info")
    verbose = subprocess.run([binary("vbt"), "status"], env=env, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert verbose.returncode == 0 and "bus connected" in verbose.stderr, verbose.stderr


def test_a_prefix_no_message_can_have_is_refused():
    """`vbt echo reps.` used to wait for ever (the type is `rep`): refused at once, naming the type meant."""
    for args in (["echo", "reps."], ["hz", "posturee."], ["record", "--out", "/tmp/never.jsonl", "reps."]):
        result = subprocess.run([binary("vbt"), *args], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
        assert result.returncode == 64 and "no message type" in result.stderr, (args, result.stderr)
    assert "did you mean rep.?" in subprocess.run([binary("vbt"), "echo", "reps."], capture_output=True, text=True, timeout=10).stderr


def test_a_running_program_that_does_not_answer_fails_the_command(bus: Bus, tmp_path: Path):
    """vbt station assign waits for the answers of the programs that act on athlete.assign and
    run: a rep-detector whose heartbeat is heard but which never answers (a pyzmq stand-in,
    labelled as such) makes the command exit 1 naming it, though the recorder stored it."""
    from test_recorder import RawPublisher, Recorder, vbt
    recorder = Recorder(bus, tmp_path / "vbt.sqlite")
    stand_in = RawPublisher(bus, "heartbeat.rep-detector")
    stop = threading.Event()

    def beat() -> None:
        while not stop.is_set():
            stand_in.send(stand_in.message("heartbeat", "rep-detector", {"role": "rep-detector", "uptime_s": 1, "interval_s": 1},
                                           athlete=None))
            stop.wait(0.3)
    beating = threading.Thread(target=beat, daemon=True)
    beating.start()
    try:
        vbt(bus, "athlete", "add", "ana", "--name", "Ana")
        vbt(bus, "station", "add", "rack-03")
        result = vbt(bus, "station", "assign", "rack-03", "--athlete", "ana", "--exercise", "squat", "--load", "90", expect_ok=False)
        assert result.returncode == 1 and "the rep-detector (running) did not answer within 5 s" in result.stderr, result.stderr
        assert recorder.result("assignment.get", {"station": "rack-03"})["athlete"] == "ana"
    finally:
        stop.set()
        beating.join(5)
        stand_in.close()
        recorder.close()
