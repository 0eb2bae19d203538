"""The command-line reference in docs/programs/ says what the programs take.

For every program, the long options its `--help` declares (the OPTIONS
section of swift-argument-parser's help) and the long options the "## Options"
section of docs/programs/<program>.md names must be the same set:

- an option the program takes but the page does not name is missing from the
  reference;
- an option the page names but the program does not take is stale.

`--help` and `--version`, which every program and subcommand takes, are
documented once in docs/programs/README.md and need not be repeated.

For `vbt` the same holds per command: the subcommands are found from the
help's SUBCOMMANDS listings (nested ones too, e.g. `vbt keys add`,
`vbt console user add`), and each command that takes options of its own has a
`### \\`vbt <command>\\`` heading in vbt.md's Options section listing them.
Options many commands take are listed once under "### Shared options".

Run from the repository root:  python3 -m pytest -q tests/python/test_docs.py
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from test_wire import BIN_DIR

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "programs"
DAEMONS = ["vbt-bus", "sensor-bridge", "rep-detector", "posture-evaluator", "session-recorder", "notifier", "coach-console",
           "vbt-uplink"]
EVERYWHERE = {"--help", "--version"}
SHARED_HEADING = "Shared options"

LONG_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
# An option line of swift-argument-parser's help: "  --name <value>  ..." or "  -h, --help  ...".
HELP_OPTION_LINE = re.compile(r"^  (?:-\w, )?(--[a-z][a-z0-9-]*)")
# A subcommand line: "  name   description" or "  name (default)   description".
HELP_SUBCOMMAND_LINE = re.compile(r"^  ([a-z][a-z0-9-]*)(?: \(default\))?(?:\s|$)")
# A command heading in vbt.md's Options section: "### `vbt keys add`" (arguments may follow in the backticks).
COMMAND_HEADING = re.compile(r"^### `(vbt(?: [a-z][a-z0-9-]*)*)")


def run_help(program: str, *words: str) -> str:
    path = BIN_DIR / program
    assert path.exists(), f"{path} is missing: build it with `swift build`, or set VBT_BIN_DIR"
    result = subprocess.run([str(path), *words, "--help"], capture_output=True, text=True, timeout=60)
    command = " ".join([program, *words, "--help"])
    assert result.returncode == 0, f"`{command}` exited {result.returncode}: {result.stderr.strip()}"
    return result.stdout


def help_section(text: str, title: str) -> list[str]:
    """The lines of one section (e.g. OPTIONS:) of a help text, up to the next section."""
    lines: list[str] = []
    inside = False
    for line in text.splitlines():
        if re.match(r"^[A-Z][A-Z ]*:$", line):
            inside = line == f"{title}:"
            continue
        if inside:
            lines.append(line)
    return lines


def help_options(text: str) -> set[str]:
    return {m.group(1) for line in help_section(text, "OPTIONS") if (m := HELP_OPTION_LINE.match(line))}


def help_subcommands(text: str) -> list[str]:
    return [m.group(1) for line in help_section(text, "SUBCOMMANDS") if (m := HELP_SUBCOMMAND_LINE.match(line))]


def markdown_section(text: str, heading: str, level: int) -> str | None:
    """The body under a heading of the given level, up to the next heading of that level or higher."""
    marks = "#" * level
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.strip() == f"{marks} {heading}":
            body = []
            for following in lines[index + 1:]:
                hashes = re.match(r"^(#+) ", following)
                if hashes and len(hashes.group(1)) <= level:
                    break
                body.append(following)
            return "\n".join(body)
    return None


def options_named(text: str) -> set[str]:
    return set(LONG_OPTION.findall(text))


def page(program: str) -> str:
    path = DOCS / f"{program}.md"
    assert path.exists(), f"docs/programs/{program}.md is missing: write the page for {program}"
    return path.read_text()


def compare(what: str, page_name: str, in_help: set[str], in_docs: set[str], shared: set[str] = frozenset()) -> list[str]:
    problems = []
    for option in sorted(in_help - in_docs - shared - EVERYWHERE):
        problems.append(f"{what} takes {option}, which docs/programs/{page_name} does not name: add it to docs/programs/{page_name}")
    for option in sorted(in_docs - in_help):
        problems.append(f"docs/programs/{page_name} names {option} for {what}, which `{what} --help` does not list: remove it")
    return problems


@pytest.mark.parametrize("program", DAEMONS)
def test_the_options_section_matches_the_help(program: str) -> None:
    options = markdown_section(page(program), "Options", 2)
    assert options is not None, f"docs/programs/{program}.md has no '## Options' section: add one listing {program}'s options"
    problems = compare(program, f"{program}.md", help_options(run_help(program)), options_named(options))
    assert not problems, "\n".join(problems)


def vbt_commands() -> dict[str, set[str]]:
    """Every vbt command reachable through the SUBCOMMANDS listings, with the long options it takes."""
    commands: dict[str, set[str]] = {}
    pending: list[tuple[str, ...]] = [()]
    while pending:
        words = pending.pop(0)
        text = run_help("vbt", *words)
        commands[" ".join(("vbt", *words))] = help_options(text)
        pending.extend((*words, sub) for sub in help_subcommands(text))
    return commands


def vbt_documented() -> tuple[set[str], dict[str, set[str]]]:
    """The shared options and, per command heading, the options vbt.md's Options section names."""
    options = markdown_section(page("vbt"), "Options", 2)
    assert options is not None, "docs/programs/vbt.md has no '## Options' section: add one listing every command's options"
    shared: set[str] = set()
    per_command: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in options.splitlines():
        if line.startswith("### "):
            heading = COMMAND_HEADING.match(line)
            if line.strip() == f"### {SHARED_HEADING}":
                current = shared
            elif heading:
                current = per_command.setdefault(heading.group(1), set())
            else:
                current = None
            continue
        if current is not None:
            current |= options_named(line)
    return shared, per_command


def test_every_vbt_command_is_documented_with_its_options() -> None:
    commands = vbt_commands()
    assert len(commands) > 1, "`vbt --help` lists no SUBCOMMANDS: the help's format may have changed"
    shared, documented = vbt_documented()
    problems = []
    all_taken = set().union(*commands.values())
    for option in sorted(shared - all_taken):
        problems.append(f"docs/programs/vbt.md's '{SHARED_HEADING}' names {option}, which no vbt command takes: remove it")
    for command, taken in sorted(commands.items()):
        own = taken - shared - EVERYWHERE
        if command not in documented:
            if own:
                problems.append(f"{command} takes {', '.join(sorted(own))} but docs/programs/vbt.md has no '### `{command}`' "
                                f"heading under '## Options': add it to docs/programs/vbt.md")
            continue
        problems += compare(command, "vbt.md", taken, documented[command], shared)
    for command in sorted(set(documented) - set(commands)):
        problems.append(f"docs/programs/vbt.md documents `{command}`, which vbt's help does not list: remove it")
    assert not problems, "\n".join(problems)


def test_the_programs_index_links_every_page_and_the_common_options() -> None:
    index = (DOCS / "README.md").read_text()
    missing = [program for program in [*DAEMONS, "vbt"] if f"({program}.md)" not in index]
    assert not missing, f"docs/programs/README.md links no page for {missing}: add a row for each to its table"
    for option in sorted(EVERYWHERE):
        assert option in index, f"docs/programs/README.md does not mention {option}: add it to the conventions"


def heading_anchors(page: Path) -> set[str]:
    """The anchors a Markdown page's headings make, as GitHub spells them."""
    anchors = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^#+\s+(.*)", line)
        if heading:
            anchors.add(re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-"))
    return anchors


def test_every_link_between_the_pages_reaches_a_file_and_heading():
    root = ROOT
    pages = [root / "README.md", root / "CONTRIBUTING.md", root / "CHANGELOG.md", *sorted((root / "docs").rglob("*.md")),
             *sorted((root / "proto").glob("*.md")), *sorted((root / "deploy").glob("*.md"))]
    broken = []
    for page in pages:
        for link in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if link.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            if not target.exists():
                broken.append(f"{page.relative_to(root)}: {link} (no such file)")
            elif anchor and target.suffix == ".md" and anchor not in heading_anchors(target):
                broken.append(f"{page.relative_to(root)}: {link} (no such heading)")
    assert not broken, "links to fix:\n" + "\n".join(broken)
