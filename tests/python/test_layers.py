"""The module layers hold: the wire alone, the store only in the recorder.

- VBTWire (the wire: codec, envelope, every payload, the tables of types and
  commands) imports nothing, not even Foundation, so any program, test or
  port can speak the wire without pulling in anything else.
- Every bus payload type is declared in VBTWire and nowhere else.
- Only the session-recorder links SQLite: `vbt`, the daemons and the bus do
  not (their binaries hold no `sqlite3_` symbol). `vbt-uplink`, which reads a
  gym's store read-only for the chain, is the one other program that does.
- Only vbt-bus links the forwarder (VBTForwarder): no consumer carries the
  bus's own loop.
- The detection domain (VBTDetection) imports no I/O module, and only the
  rep-detector links its role (VBTDetectorRole): `vbt` and the console use
  the domain alone.

Run from the repository root:  python3 -m pytest -q tests/python
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from test_wire import BIN_DIR

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "Sources"
PROGRAMS_WITHOUT_STORE = ["vbt", "vbt-bus", "sensor-bridge", "rep-detector", "posture-evaluator", "notifier", "coach-console"]


def test_the_wire_module_imports_nothing() -> None:
    files = sorted((SOURCES / "VBTWire").glob("*.swift"))
    assert files, "Sources/VBTWire is empty"
    imports = [f"{f.name}: {line.strip()}" for f in files for line in f.read_text().splitlines()
               if re.match(r"\s*(@\w+\s+)?import\s", line)]
    assert imports == [], f"VBTWire must stay free of imports: {imports}"


def test_bus_payloads_are_declared_only_in_the_wire_module() -> None:
    elsewhere = [str(f.relative_to(ROOT)) for f in SOURCES.rglob("*.swift")
                 if "VBTWire" not in f.parts and re.search(r"(struct|enum|class)\s+\w+\s*:[^{]*\bBusPayload\b", f.read_text())]
    assert elsewhere == [], f"bus payload types outside VBTWire: {elsewhere}"


@pytest.mark.parametrize("program", PROGRAMS_WITHOUT_STORE)
def test_only_the_recorder_links_sqlite(program: str) -> None:
    nm = shutil.which("nm")
    assert nm, "nm is missing: `make deps` installs binutils"
    binary = BIN_DIR / program
    assert binary.exists(), f"{binary} is missing: run `swift build` first"
    symbols = subprocess.run([nm, str(binary)], capture_output=True, text=True, check=True).stdout
    linked = sorted({line.split()[-1] for line in symbols.splitlines() if "sqlite3_" in line})
    assert linked == [], f"{program} links SQLite ({len(linked)} symbols, e.g. {linked[:3]})"


def linked_symbols(program: str) -> str:
    binary = BIN_DIR / program
    assert binary.exists(), f"{binary} is missing: run `swift build` first"
    return subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True).stdout


# Swift mangles a module's name into every symbol it defines as <length><name>.
FORWARDER_MODULE = "12VBTForwarder"


@pytest.mark.parametrize("program", [p for p in PROGRAMS_WITHOUT_STORE if p != "vbt-bus"] + ["session-recorder", "vbt-uplink"])
def test_only_the_bus_links_the_forwarder(program: str) -> None:
    linked = [line for line in linked_symbols(program).splitlines() if FORWARDER_MODULE in line]
    assert linked == [], f"{program} links the bus's forwarder ({len(linked)} symbols, e.g. {linked[:2]})"


def test_the_bus_does_link_the_forwarder() -> None:
    """The check above can fail: vbt-bus's binary does hold the forwarder's symbols."""
    assert FORWARDER_MODULE in linked_symbols("vbt-bus")


def test_the_recorder_does_link_sqlite() -> None:
    """The check above can fail: the recorder's binary does hold the symbols."""
    symbols = subprocess.run(["nm", str(BIN_DIR / "session-recorder")], capture_output=True, text=True, check=True).stdout
    assert "sqlite3_open" in symbols


DETECTION_IMPORTS = {"Foundation", "VBTWire", "VBTQuery"}
ROLE_MODULE = "15VBTDetectorRole"


def test_the_detection_domain_imports_no_io_module() -> None:
    files = sorted((SOURCES / "VBTDetection").glob("*.swift"))
    assert files, "Sources/VBTDetection is empty"
    imports = {f"{f.name}: {m.group(2)}" for f in files for line in f.read_text().splitlines()
               if (m := re.match(r"\s*(@\w+\s+)?import\s+(\w+)", line)) and m.group(2) not in DETECTION_IMPORTS}
    assert imports == set(), f"VBTDetection imports beyond {sorted(DETECTION_IMPORTS)}: {sorted(imports)}"


@pytest.mark.parametrize("program", ["vbt", "coach-console", "sensor-bridge", "posture-evaluator", "notifier"])
def test_only_the_rep_detector_links_its_role(program: str) -> None:
    linked = [line for line in linked_symbols(program).splitlines() if ROLE_MODULE in line]
    assert linked == [], f"{program} links the rep-detector's role ({len(linked)} symbols, e.g. {linked[:2]})"


def test_the_rep_detector_does_link_its_role() -> None:
    """The check above can fail: the rep-detector's binary does hold its role's symbols."""
    assert ROLE_MODULE in linked_symbols("rep-detector")
