"""deploy/ installs a hardened installation, checked on a tree
installed into a folder: `deploy/install.sh --root DIR` for a server and a
station, then systemd's own checks of the installed units
(`systemd-analyze verify` and `systemd-analyze security --offline`) and of
what install.sh set up (the vbt user, the keys and their modes).
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from test_wire import BIN_DIR, binary

REPO = Path(__file__).resolve().parents[2]
SERVICES = ["vbt-bus", "session-recorder", "rep-detector", "posture-evaluator", "notifier", "coach-console"]


def install(root: Path, *args: str) -> str:
    binary("vbt")  # built
    result = subprocess.run(["bash", str(REPO / "deploy" / "install.sh"), "--root", str(root), "--bin-dir", str(BIN_DIR), *args],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    if shutil.which("systemd-analyze") is None:
        pytest.fail("systemd-analyze is missing: make deps installs the systemd package")
    root = tmp_path_factory.mktemp("root")
    install(root, "server")
    install(root, "station", "rack-01")
    # systemd's own units (sysinit.target, ...) for the checks to resolve dependencies against.
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    return root


def units(root: Path) -> list[str]:
    return ["vbt.target", *(f"{s}.service" for s in SERVICES), "sensor-bridge@rack-01.service"]


def test_units_verify_clean(installed):
    result = subprocess.run(["systemd-analyze", "verify", f"--root={installed}", "--man=no", *units(installed)],
                            capture_output=True, text=True, timeout=120, cwd=installed / "etc/systemd/system")
    assert result.returncode == 0 and result.stdout.strip() == "" and result.stderr.strip() == "", result.stderr


def test_units_are_hardened(installed):
    exposure = {}
    for unit in units(installed)[1:]:
        result = subprocess.run(["systemd-analyze", "security", f"--root={installed}", "--offline=true", unit],
                                capture_output=True, text=True, timeout=120, cwd=installed / "etc/systemd/system")
        found = re.search(r"Overall exposure level for \S+: ([0-9.]+)", result.stdout + result.stderr)
        assert found, result.stdout + result.stderr
        exposure[unit] = float(found.group(1))
    # systemd rates 0-10, lower is safer; "OK" is below 3.0 (the bridge needs two capabilities for BLE).
    assert all(level <= 2.0 for unit, level in exposure.items() if not unit.startswith("sensor-bridge")), exposure
    assert exposure["sensor-bridge@rack-01.service"] < 3.0, exposure
    for name in [*SERVICES, "sensor-bridge@", "rep-detector@"]:
        text = (installed / "etc/systemd/system" / f"{name}.service").read_text()
        for line in ["Restart=always", "User=vbt", "ProtectSystem=strict", "PrivateTmp=yes",
                     "SystemCallFilter=@system-service", "WantedBy=vbt.target", "PartOf=vbt.target"]:
            assert line in text, f"{name}.service lacks {line}"
        assert re.search(r"^MemoryMax=\d+[MG]$", text, re.M), f"{name}.service has no MemoryMax"
        assert re.search(r"^StateDirectory=vbt/", text, re.M) or name == "vbt-bus", f"{name}.service shares a state folder"
        assert "DynamicUser" not in text
    wants = {p.name for p in (installed / "etc/systemd/system/vbt.target.wants").iterdir()}
    assert wants == {f"{s}.service" for s in SERVICES} | {"sensor-bridge@rack-01.service"}, wants


def test_detector_shards(tmp_path):
    """VBT_DETECTOR_SHARDS=2 in vbt.env: install.sh enables rep-detector@1 and @2 (each its shard, its
    own state folder) instead of rep-detector.service; back at 1, the plain unit again."""
    if shutil.which("systemd-analyze") is None:
        pytest.fail("systemd-analyze is missing: make deps installs the systemd package")
    root = tmp_path / "root"
    env = root / "etc/vbt/vbt.env"
    env.parent.mkdir(parents=True)
    example = (REPO / "deploy/vbt.env.example").read_text()
    assert re.search(r"^VBT_DETECTOR_SHARDS=1$", example, re.M), "vbt.env.example documents the default"
    env.write_text(example.replace("VBT_DETECTOR_SHARDS=1", "VBT_DETECTOR_SHARDS=2"))
    install(root, "server")
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    system = root / "etc/systemd/system"
    detectors = {p.name for p in (system / "vbt.target.wants").iterdir() if p.name.startswith("rep-detector")}
    assert detectors == {"rep-detector@1.service", "rep-detector@2.service"}, detectors
    result = subprocess.run(["systemd-analyze", "verify", f"--root={root}", "--man=no", "rep-detector@1.service", "rep-detector@2.service"],
                            capture_output=True, text=True, timeout=120, cwd=system)
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr
    text = (system / "rep-detector@.service").read_text()
    assert "--shard %i/${VBT_DETECTOR_SHARDS}" in text and "StateDirectory=vbt/rep-detector-%i" in text
    assert "--journal /var/lib/vbt/rep-detector-%i/journal" in text and "--patterns /var/lib/vbt/rep-detector-%i/patterns.json" in text
    security = subprocess.run(["systemd-analyze", "security", f"--root={root}", "--offline=true", "rep-detector@1.service"],
                              capture_output=True, text=True, timeout=120, cwd=system)
    found = re.search(r"Overall exposure level for \S+: ([0-9.]+)", security.stdout + security.stderr)
    assert found and float(found.group(1)) <= 2.0, security.stdout + security.stderr
    env.write_text(example)
    install(root, "server")
    detectors = {p.name for p in (system / "vbt.target.wants").iterdir() if p.name.startswith("rep-detector")}
    assert detectors == {"rep-detector.service"}, detectors
    env.write_text(example.replace("VBT_DETECTOR_SHARDS=1", "VBT_DETECTOR_SHARDS=two"))
    refused = subprocess.run(["bash", str(REPO / "deploy" / "install.sh"), "--root", str(root), "--bin-dir", str(BIN_DIR), "server"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "VBT_DETECTOR_SHARDS" in refused.stderr, refused.stderr


def test_user_and_keys(installed):
    passwd = (installed / "etc/passwd").read_text()
    entry = next(line for line in passwd.splitlines() if line.startswith("vbt:"))
    uid = int(entry.split(":")[2])
    assert entry.endswith(":/usr/sbin/nologin")
    assert re.search(r"^dialout:.*:vbt$", (installed / "etc/group").read_text(), re.M)
    keys = installed / "etc/vbt/keys"
    listed = subprocess.run([binary("vbt"), "keys", "list", str(keys)], capture_output=True, text=True, timeout=30)
    assert listed.returncode == 0, listed.stderr
    for service in SERVICES[1:]:
        assert re.search(rf"^{service}\s+service {service}\s+authorized", listed.stdout, re.M), listed.stdout
    for path in [keys / "server.key_secret", *keys.glob("clients/*.key_secret")]:
        info = path.stat()
        assert info.st_uid == uid and stat.S_IMODE(info.st_mode) & 0o077 == 0, (path, oct(info.st_mode))
    # A second install keeps the keys (every client would otherwise need new ones).
    before = (keys / "server.key").read_text()
    install(installed, "server")
    assert (keys / "server.key").read_text() == before
    assert os.access(installed / "usr/local/bin/vbt-bus", os.X_OK)


def test_shell_completions(installed):
    """vbt's completions are installed where bash-completion, zsh and fish look, and complete."""
    share = installed / "usr/local/share"
    bash = share / "bash-completion/completions/vbt"
    script = (f"source {bash}; COMP_WORDS=(vbt station ''); COMP_CWORD=2; COMP_LINE='vbt station '; COMP_POINT=12; "
              "_vbt vbt '' station; echo \"${COMPREPLY[@]}\"")
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and {"list", "add", "assign", "unassign"} <= set(result.stdout.split()), (result.stdout, result.stderr)
    assert (share / "zsh/site-functions/_vbt").read_text().startswith("#compdef vbt")
    assert "complete -c 'vbt'" in (share / "fish/vendor_completions.d/vbt.fish").read_text()
