"""An exported CSV opened by a spreadsheet shows text, not formulas: athletes
named like formulas (`=HYPERLINK(...)`, `+cmd|...`, `-2+3`, `@SUM(...)`) and one with
non-ASCII letters are exported by `vbt export --format csv --bom` from a real recorder, then
read by Python's csv module and by LibreOffice Calc (headless, converted to flat ODS: every
cell's type and formula are in its XML). The same rows written without vbt's protection
become formulas in the same LibreOffice: the check can fail."""

from __future__ import annotations

import csv
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from test_recorder import Recorder, vbt
from test_wire import Bus, bus  # noqa: F401 (fixture)

NAMES = {
    "hyper": '=HYPERLINK("http://evil.example/","click me")',
    "dde": "+cmd|' /C calc'!A0",
    "minus": "-2+3",
    "at": "@SUM(1+1)",
    "zoe": "Zoë Ødegård-Łukasiewicz",
}
TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"


def calc_cells(csv_file: Path, tmp_path: Path) -> list[dict]:
    """Every non-empty cell of `csv_file` as LibreOffice Calc imports it: its text and its formula."""
    soffice = shutil.which("soffice")
    if soffice is None:
        pytest.fail("soffice is missing: make deps installs libreoffice-calc-nogui")
    out = tmp_path / f"{csv_file.stem}-calc"
    out.mkdir()
    # Comma, double quote, UTF-8 (76), from line 1: the CSV as vbt writes it.
    result = subprocess.run([soffice, f"-env:UserInstallation=file://{tmp_path / 'lo-profile'}", "--headless",
                             "--infilter=CSV:44,34,76,1", "--convert-to", "fods", "--outdir", str(out), str(csv_file)],
                            capture_output=True, text=True, timeout=180)
    converted = out / f"{csv_file.stem}.fods"
    assert result.returncode == 0 and converted.exists(), (result.stdout, result.stderr)
    cells = []
    for cell in ET.parse(converted).iter(f"{{{TABLE}}}table-cell"):
        text = "".join(p.text or "" for p in cell.iter(f"{{{TEXT}}}p"))
        formula = cell.get(f"{{{TABLE}}}formula")
        if text or formula:
            cells.append({"text": text, "formula": formula})
    return cells


def test_exported_names_stay_text_in_python_and_libreoffice(bus: Bus, tmp_path: Path):
    recorder = Recorder(bus, tmp_path / "vbt.sqlite")
    try:
        for athlete, name in NAMES.items():
            vbt(bus, "athlete", "add", athlete, f"--name={name}")  # = keeps "-2+3" a value, not an option
        vbt(bus, "export", "--format", "csv", "--bom", "--out", str(tmp_path / "export"), "--tables", "athletes")
    finally:
        recorder.close()
    exported = tmp_path / "export" / "athletes.csv"
    assert exported.read_bytes().startswith(b"\xef\xbb\xbf"), "the UTF-8 byte order mark"

    with open(exported, newline="", encoding="utf-8-sig") as handle:
        rows = {row["id"]: row["name"] for row in csv.DictReader(handle)}
    for athlete, name in NAMES.items():
        expected = name if athlete == "zoe" else "'" + name
        assert rows[athlete] == expected, (athlete, rows[athlete])

    cells = calc_cells(exported, tmp_path)
    assert [c for c in cells if c["formula"]] == [], "no cell is a formula"
    texts = {c["text"] for c in cells}
    assert NAMES["zoe"] in texts, "non-ASCII letters read as UTF-8"
    for athlete in ("hyper", "dde", "minus", "at"):
        assert any(NAMES[athlete] in text for text in texts), (athlete, texts)

    # The control: the same names without the apostrophe are formulas to the same LibreOffice.
    control = tmp_path / "control.csv"
    with open(control, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "name"])
        writer.writerows(NAMES.items())
    formulas = [c["formula"] for c in calc_cells(control, tmp_path) if c["formula"]]
    assert any("HYPERLINK" in f for f in formulas), formulas
