"""The units started by a real systemd: a container boots with a server and a
station installed, and systemd runs them.

`deploy/install.sh --root DIR` installs the server and station `rack-01`
(its bridge simulating an athlete: `BRIDGE_ARGS=--simulate --loop` in
/etc/vbt/bridge-rack-01.env, deploy/README.md) into a temporary folder, the
`vbt` user added to a copy of this computer's /etc/passwd. systemd-nspawn
boots this computer's own /usr (`--volatile=yes`: a tmpfs root, nothing
downloaded, nothing of this computer written) with the installed /etc/vbt,
/etc/systemd/system, users and /usr/local bound in, on a private network
(loopback only: the endpoints in vbt.env are 127.0.0.1). Then, in the
container:

- the boot starts vbt.target (install.sh enables it): every unit runs, the
  bus, the rep-detector and the bridge under SCHED_RR 10, each at its unit's
  `Nice=` (the session-recorder -5), and reps reach the recorder's store;
- `systemctl kill --kill-whom=main -s KILL rep-detector.service`: systemd starts it again
  (NRestarts 1, a new MainPID) and reps keep coming; no other unit restarted;
- `systemctl stop vbt.target` stops every unit, none failed;
  `systemctl start vbt.target` brings them back and reps come again;
- the container powers off cleanly;
- with VBT_DETECTOR_SHARDS=2 the boot runs rep-detector@1 and @2 instead, each with its shard,
  journal and priority, and a killed shard is restarted alone.

Needs root and systemd-nspawn (package systemd-container, `make deps`); it
is skipped, saying why, where nspawn cannot boot a container here (a probe
runs /bin/true in one first).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from test_wire import BIN_DIR, binary, wait_until

REPO = Path(__file__).resolve().parents[2]
STATION = "rack-01"
SERVER_UNITS = ["vbt-bus", "session-recorder", "rep-detector", "posture-evaluator", "notifier", "coach-console"]
UNITS = [*(f"{name}.service" for name in SERVER_UNITS), f"sensor-bridge@{STATION}.service"]
REALTIME = {"vbt-bus.service", "rep-detector.service", f"sensor-bridge@{STATION}.service"}


def unit_nice(unit: str) -> int:
    """The `Nice=` of a unit's file in deploy/systemd (0 without): what its processes must run at."""
    name = re.sub(r"@[^.]*", "@", unit)
    for line in (REPO / "deploy" / "systemd" / name).read_text().splitlines():
        if line.startswith("Nice="):
            return int(line.split("=", 1)[1])
    return 0
STORE = "/var/lib/vbt/session-recorder/vbt.sqlite"
BOOT_S = 120.0  # a boot on a busy 2-core machine takes 10-20 s
REPS_S = 90.0  # the simulated athlete's first rep comes within a few seconds of the bridge's start


def library_dirs(bin_dir: Path) -> list[str]:
    """Folders outside /usr the programs load libraries from (a debug build's Swift runtime)."""
    found = subprocess.run(["ldd", str(bin_dir / "vbt-bus")], capture_output=True, text=True, timeout=30).stdout
    paths = {str(Path(p).parent) for p in re.findall(r"=> (/\S+)", found)}
    return sorted(p for p in paths if not re.match(r"/(usr/)?lib(64|x32|32)?(/|$)", p))


def nspawn(*args: str) -> list[str]:
    # --keep-unit and --register=no: no systemd or machined on this side (a plain container or CI runner).
    return ["systemd-nspawn", "--quiet", "--directory=/", "--volatile=yes", "--keep-unit", "--register=no", *args]


def unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root for systemd-nspawn"
    if shutil.which("systemd-nspawn") is None:
        return "needs systemd-nspawn (apt-get install systemd-container)"
    if not Path("/usr/lib/systemd/systemd").exists():
        return "needs systemd in /usr to boot"
    probe = subprocess.run(nspawn("--private-network", "/bin/true"), capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        return f"systemd-nspawn cannot run a container here: {probe.stderr.strip().splitlines()[-1:]}"
    return None


def install(root: Path, detector_shards: int = 1) -> None:
    """A server and station STATION in `root`, as `make install DESTDIR=...` would, plus the simulation;
    the rep-detector split in `detector_shards` units (vbt.env's VBT_DETECTOR_SHARDS)."""
    (root / "etc/vbt").mkdir(parents=True)
    # This computer's users, so the container's own system users exist next to vbt.
    for name in ["passwd", "group", "shadow", "gshadow"]:
        shutil.copy2(f"/etc/{name}", root / "etc" / name)
    # install.sh keeps an existing vbt.env: the container's bus is on its loopback.
    (root / "etc/vbt/vbt.env").write_text("VBT_PUB_ENDPOINT=tcp://127.0.0.1:7701\nVBT_SUB_ENDPOINT=tcp://127.0.0.1:7702\n"
                                          "VBT_QUERY_ENDPOINT=tcp://127.0.0.1:7703\nVBT_LOG_LEVEL=info\n"
                                          f"VBT_DETECTOR_SHARDS={detector_shards}\n")
    for program in ["vbt", "sensor-bridge", *SERVER_UNITS]:
        binary(program)  # built, and not being relinked by a build running beside this test
    script = [str(REPO / "deploy/install.sh"), "--root", str(root), "--bin-dir", str(BIN_DIR)]
    for role in [["server"], ["station", STATION]]:
        result = subprocess.run(["bash", *script, *role], capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
    keys = root / "etc/vbt/keys"
    added = subprocess.run([binary("vbt"), "keys", "add", str(keys), STATION, "--role", "bridge", "--station", STATION],
                           capture_output=True, text=True, timeout=30)
    assert added.returncode == 0, added.stderr
    (root / f"etc/vbt/bridge-{STATION}.env").write_text('BRIDGE_ARGS="--simulate --loop --seed 7"\n')
    uid = next(int(line.split(":")[2]) for line in (root / "etc/passwd").read_text().splitlines() if line.startswith("vbt:"))
    for path in [keys, *keys.rglob("*")]:
        os.chown(path, uid, uid)


class Container:
    """A booted container: this computer's /usr with `root`'s installation bound in."""

    def __init__(self, root: Path, log: Path):
        binds = [f"--bind-ro={root}/etc/{name}:/etc/{name}" for name in ["passwd", "group", "shadow", "gshadow"]]
        binds += [f"--bind-ro={root}/etc/vbt:/etc/vbt", f"--bind-ro={root}/etc/systemd/system:/etc/systemd/system",
                  f"--bind-ro={root}/usr/local:/usr/local", *(f"--bind-ro={d}" for d in library_dirs(BIN_DIR))]
        self.log = log
        self.console = open(log, "w")
        self.process = subprocess.Popen(nspawn(f"--machine=vbt-test-{os.getpid()}", "--private-network", *binds, "--boot"),
                                        stdin=subprocess.DEVNULL, stdout=self.console, stderr=subprocess.STDOUT)
        try:
            # The container's init is nspawn's child; its namespaces are the container's.
            self.leader = wait_until(self.find_leader, "the container's init", timeout=BOOT_S, interval=0.1, detail=self.tail)
            wait_until(lambda: Path(f"/proc/{self.leader}/root/run/systemd/private").exists(), "systemd's socket",
                       timeout=BOOT_S, interval=0.1, detail=self.tail)
        except BaseException:
            self.process.kill()  # nspawn's container dies with it before its init has started
            self.process.wait(timeout=30)
            self.console.close()
            raise

    def find_leader(self) -> int | None:
        if self.process.poll() is not None:
            raise AssertionError(f"systemd-nspawn exited with {self.process.returncode}\n{self.tail()}")
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        return int(children[0]) if children else None

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])

    def run(self, *args: str, check: bool = True) -> str:
        result = subprocess.run(["nsenter", "-t", str(self.leader), "-a", *args], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0 or not check, f"{' '.join(args)}: {result.returncode}\n{result.stdout}{result.stderr}"
        return result.stdout

    def show(self, unit: str) -> dict[str, str]:
        text = self.run("systemctl", "show", unit, "-p", "ActiveState,SubState,Result,NRestarts,MainPID,ExecMainStatus")
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def journal(self, unit: str) -> str:
        return self.run("journalctl", "--no-pager", "-o", "cat", "-n", "30", "-u", unit, check=False)

    def journals(self, units: list[str] = UNITS) -> str:
        return "\n".join(f"--- {unit}: {self.show(unit)}\n{self.journal(unit)}" for unit in units)

    def reps(self) -> int:
        """The reps in the recorder's store (0 before it has one), read in the container: SQLite
        resolves the /proc/PID/root link to this computer's root."""
        query = (f"import sqlite3; print(sqlite3.connect('file:{STORE}?mode=ro', uri=True, timeout=5)"
                 ".execute('SELECT count(*) FROM reps').fetchone()[0])")
        counted = self.run("python3", "-c", query, check=False).strip()  # fails until the recorder has made its tables
        return int(counted) if counted.isdigit() else 0

    def policy(self, pid: str) -> str:
        """`chrt -p`'s policy and priority of a process of the container: 'SCHED_RR 10'."""
        text = self.run("chrt", "-p", pid)
        policy = re.search(r"policy: (\S+)", text)
        priority = re.search(r"priority: (\d+)", text)
        assert policy and priority, text
        return f"{policy.group(1)} {priority.group(1)}"

    def nice(self, pid: str) -> int:
        """The niceness of a process of the container, as `ps` reads it."""
        return int(self.run("ps", "-o", "ni=", "-p", pid).strip())

    def poweroff(self) -> int:
        self.run("systemctl", "poweroff", "--no-block")
        return self.process.wait(timeout=BOOT_S)

    def close(self) -> None:
        if self.process.poll() is None:
            # A container left running by a failed assertion: its init first, then nspawn.
            os.kill(self.leader, signal.SIGKILL)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self.console.close()


def test_systemd_runs_restarts_and_stops_the_units(tmp_path):
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    root = tmp_path / "root"
    install(root)
    container = Container(root, tmp_path / "console.log")
    try:
        booted = container.run("systemctl", "is-system-running", "--wait", check=False).strip()
        assert booted in {"running", "degraded"}, f"{booted}\n{container.tail()}"

        # The boot started vbt.target (install.sh enabled it under multi-user.target).
        assert container.show("vbt.target")["ActiveState"] == "active", container.journals()
        wait_until(lambda: container.reps() > 0, "reps in the store", timeout=REPS_S, interval=0.5, detail=container.journals)
        state = {unit: container.show(unit) for unit in UNITS}
        assert all(s["SubState"] == "running" and s["NRestarts"] == "0" for s in state.values()), container.journals()
        for unit in UNITS:
            expected = "SCHED_RR 10" if unit in REALTIME else "SCHED_OTHER 0"
            assert container.policy(state[unit]["MainPID"]) == expected, unit
            # Under the normal scheduler, the session-recorder ahead of other work (-5), the posture-evaluator
            # behind it (5); `ps` shows no niceness for a real-time process.
            if unit not in REALTIME:
                assert container.nice(state[unit]["MainPID"]) == unit_nice(unit), unit

        # A killed rep-detector is started again by systemd, and reps keep coming.
        before = container.reps()
        # Its main process, as kill -9 would: killing the whole cgroup at once failed once in a container with
        # "Failed to send signal SIGKILL to auxiliary processes: Input/output error" (systemd 252).
        container.run("systemctl", "kill", "--kill-whom=main", "-s", "KILL", "rep-detector.service")
        old = state["rep-detector.service"]["MainPID"]
        wait_until(lambda: (lambda s: s["NRestarts"] == "1" and s["SubState"] == "running" and s["MainPID"] not in {"0", old})(
            container.show("rep-detector.service")), "systemd to restart the rep-detector", timeout=60, interval=0.2,
            detail=container.journals)
        wait_until(lambda: container.reps() > before, "reps after the restart", timeout=REPS_S, interval=0.5,
                   detail=container.journals)
        for unit in UNITS:
            if unit != "rep-detector.service":
                assert container.show(unit)["NRestarts"] == "0", container.journals()

        # Stopping the target stops every unit, none failed. systemctl returns once the target is down: vbt.target
        # is ordered after its units, so it stops first and they after it.
        container.run("systemctl", "stop", "vbt.target")
        wait_until(lambda: all(container.show(unit)["ActiveState"] in {"inactive", "failed"} for unit in UNITS),
                   "every unit to stop", timeout=120, interval=0.2, detail=container.journals)
        for unit in UNITS:
            stopped = container.show(unit)
            assert (stopped["ActiveState"], stopped["Result"]) == ("inactive", "success"), f"{unit}: {stopped}\n{container.journal(unit)}"
        assert container.show("vbt.target")["ActiveState"] == "inactive"

        before = container.reps()
        container.run("systemctl", "start", "vbt.target")
        assert all(container.show(unit)["ActiveState"] == "active" for unit in UNITS), container.journals()
        wait_until(lambda: container.reps() > before, "reps after vbt.target started again", timeout=REPS_S, interval=0.5,
                   detail=container.journals)

        assert container.poweroff() == 0, container.tail()
    finally:
        container.close()


def test_systemd_runs_two_detector_shards(tmp_path):
    """VBT_DETECTOR_SHARDS=2: the boot runs rep-detector@1 and @2 (no rep-detector.service), each with
    `--shard K/2` from vbt.env, its own journal and real-time like the plain unit; reps reach the store
    (rack-01 hashes to shard 1); shard 2 killed is restarted alone."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    root = tmp_path / "root"
    install(root, detector_shards=2)
    shards = ["rep-detector@1.service", "rep-detector@2.service"]
    units = [unit for unit in UNITS if unit != "rep-detector.service"] + shards
    container = Container(root, tmp_path / "console.log")
    try:
        booted = container.run("systemctl", "is-system-running", "--wait", check=False).strip()
        assert booted in {"running", "degraded"}, f"{booted}\n{container.tail()}"
        wait_until(lambda: container.reps() > 0, "reps in the store", timeout=REPS_S, interval=0.5,
                   detail=lambda: container.journals(units))
        assert container.show("rep-detector.service")["ActiveState"] == "inactive"
        state = {unit: container.show(unit) for unit in units}
        assert all(s["SubState"] == "running" and s["NRestarts"] == "0" for s in state.values()), container.journals(units)
        for k, unit in enumerate(shards, start=1):
            pid = state[unit]["MainPID"]
            argv = container.run("cat", f"/proc/{pid}/cmdline").split("\0")
            assert argv[1:3] == ["--shard", f"{k}/2"], argv
            assert f"/var/lib/vbt/rep-detector-{k}/journal" in argv, argv
            assert container.policy(pid) == "SCHED_RR 10", unit
            assert "journalling" in container.journal(unit), container.journal(unit)
        # Each beats under its own name through the secured bus (a service key may beat as its shards).
        status = container.run("env", "VBT_SUB_ENDPOINT=tcp://127.0.0.1:7702", "VBT_PUB_ENDPOINT=tcp://127.0.0.1:7701",
                               "VBT_CERT=/etc/vbt/keys/clients/session-recorder.key_secret", "VBT_BUS_CERT=/etc/vbt/keys/server.key",
                               "/usr/local/bin/vbt", "status", "--seconds", "3", "--json")
        names = {json.loads(line)["station"] for line in status.splitlines() if line.strip()}
        assert {"rep-detector-1", "rep-detector-2"} <= names and "rep-detector" not in names, names

        container.run("systemctl", "kill", "--kill-whom=main", "-s", "KILL", shards[1])
        old = state[shards[1]]["MainPID"]
        wait_until(lambda: (lambda s: s["NRestarts"] == "1" and s["SubState"] == "running" and s["MainPID"] not in {"0", old})(
            container.show(shards[1])), "systemd to restart shard 2", timeout=60, interval=0.2, detail=lambda: container.journals(units))
        assert container.show(shards[0])["NRestarts"] == "0" and container.show(shards[0])["MainPID"] == state[shards[0]]["MainPID"]
        before = container.reps()
        wait_until(lambda: container.reps() > before, "reps after the restart", timeout=REPS_S, interval=0.5,
                   detail=lambda: container.journals(units))
        assert container.poweroff() == 0, container.tail()
    finally:
        container.close()
