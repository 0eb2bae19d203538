"""`vbt watch` in a real terminal: tmux (installed by `make deps`) runs it, send-keys
types, capture-pane reads the screen. It shows the live notifier's stations, rest timer
and alerts, and quits on q, Ctrl-C and SIGTERM with exit 0 and the terminal restored
(normal screen, cursor shown, line mode and echo back on)."""

from __future__ import annotations

import json
import secrets
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from test_notifier import pub, set_end, start, STATION
from test_wire import Bus, binary, bus, wait_until  # noqa: F401 (fixture)


class Tmux:
    """A private tmux server (its own socket) with one 110 x 30 window."""

    def __init__(self, tmp_path: Path):
        assert shutil.which("tmux"), "tmux is missing: run `make deps` (it installs tmux)"
        self.socket = f"vbt-test-{secrets.token_hex(4)}"
        self.tmp_path = tmp_path

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args], check=True,
                              capture_output=True, text=True, timeout=10).stdout

    def start(self, bus: Bus, name: str) -> None:
        env = " ".join(f"{k}={shlex.quote(bus.env[k])}" for k in ("VBT_PUB_ENDPOINT", "VBT_SUB_ENDPOINT"))
        # The shell reports the exit code and the terminal's modes after vbt watch ends.
        script = (f"trap true INT; env {env} {shlex.quote(binary('vbt'))} watch --refresh 0.2; echo exit=$?; "
                  f"stty -a | tr ' ;' '\\n\\n' | grep -x -e '-\\?icanon' -e '-\\?echo'; sleep 120")
        self.tmux("new-session", "-d", "-s", name, "-x", "110", "-y", "30", "sh", "-c", script)

    def screen(self, name: str) -> str:
        return self.tmux("capture-pane", "-p", "-t", name)

    def info(self, name: str, fmt: str) -> str:
        return self.tmux("display-message", "-p", "-t", name, fmt).strip()

    def watch_pid(self, name: str) -> int:
        shell = self.info(name, "#{pane_pid}")
        children = subprocess.run(["ps", "-o", "pid=", "--ppid", shell], capture_output=True, text=True).stdout.split()
        assert children, f"no child of the pane's shell {shell}"
        return int(children[0])

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10)


@pytest.fixture
def tmux(tmp_path: Path):
    session = Tmux(tmp_path)
    try:
        yield session
    finally:
        session.close()


def restored(tmux: Tmux, name: str) -> str:
    screen = wait_until(lambda: (s := tmux.screen(name)) and "exit=" in s and "echo" in s and s,
                        "vbt watch to exit and the shell to report", detail=lambda: tmux.screen(name))
    assert "exit=0" in screen, screen
    assert "\nicanon" in "\n" + screen and "\necho" in "\n" + screen, f"line mode and echo must be back on:\n{screen}"
    assert "ALERTS" not in screen, f"the normal screen must be back:\n{screen}"
    assert tmux.info(name, "#{alternate_on}") == "0"
    assert tmux.info(name, "#{cursor_flag}") == "1", "the cursor must be visible again"
    return screen


def test_watch_shows_stations_and_quits_cleanly(bus: Bus, tmp_path: Path, tmux: Tmux):
    notifier, rec = start(bus, tmp_path)
    tmux.start(bus, "w1")
    wait_until(lambda: "vbt watch" in tmux.screen("w1"), "the board", detail=lambda: tmux.screen("w1"))
    assert tmux.info("w1", "#{alternate_on}") == "1" and tmux.info("w1", "#{cursor_flag}") == "0"

    pub(bus, f"cmd.{STATION}", {"id": "p", "command": "plan.assign", "target": "*", "args": {
        "athlete": "ana", "plan": "p", "exercises": [{"exercise": "squat", "sets": 3, "reps": 5, "rest_s": 90, "load_kg": 100}]}})
    set_end(bus, "s1")
    pub(bus, f"rep.{STATION}", {"set_id": "s2", "rep_id": "r1", "index": 1, "mean_velocity_mps": 0.71, "peak_velocity_mps": 1.1,
                                "mean_propulsive_velocity_mps": 0.75, "rom_mm": 500, "concentric_s": 0.7, "time_to_peak_s": 0.3,
                                "velocity_loss_pct": 0, "t_end": 1763812345.0, "detector": "py"}, athlete="ana")
    pub(bus, "status.rack-02", {"state": "disconnected", "sensor": "imu", "device": "sim", "reason": "link lost; retrying"})

    def board() -> str | None:
        screen = tmux.screen("w1")
        row = next((line for line in screen.splitlines() if line.startswith("rack-01")), "")
        ok = ("ana" in row and "squat 100kg" in row and "1/3" in row and "0.71" in row and "1:2" in row
              and "CRIT rack-02: imu sensor disconnected" in screen)
        return screen if ok else None
    screen = wait_until(board, "the board to show rack-01 resting and rack-02's alert", detail=lambda: tmux.screen("w1"))
    assert "rack-02" in screen
    # The rest counts down on screen.
    first = next(line for line in screen.splitlines() if line.startswith("rack-01"))
    wait_until(lambda: next(line for line in tmux.screen("w1").splitlines() if line.startswith("rack-01")) != first,
               "the countdown to move", detail=lambda: tmux.screen("w1"))

    tmux.tmux("send-keys", "-t", "w1", "q")
    restored(tmux, "w1")
    assert notifier.terminate() == 0


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_watch_exits_on_ctrl_c_and_sigterm(bus: Bus, tmux: Tmux, how: str):
    tmux.start(bus, "w2")
    wait_until(lambda: "vbt watch" in tmux.screen("w2"), "the board", detail=lambda: tmux.screen("w2"))
    if how == "ctrl-c":
        tmux.tmux("send-keys", "-t", "w2", "C-c")
    else:
        subprocess.run(["kill", "-TERM", str(tmux.watch_pid("w2"))], check=True)
    restored(tmux, "w2")
