"""Every command's arguments, held together in the four places they appear.

proto/cmd.schema.json declares each command vbt's programs act on (`$defs`,
one per command, with `x-programs`: who acts on it). The same commands live in
Swift as `CommandName.specs` (printed by `vbt wire --commands`), are read by
the typed decoders every program uses, are listed in each program's `--help`,
and are written about in the docs. This test holds them together:

- the Swift declaration and the schema name the same commands, arguments,
  types, bounds and required arguments;
- the decoders behave as the schema says: for every command a valid message
  is accepted by both, and every way of breaking it (an unknown argument, a
  wrong type, a value out of bounds, a required argument left out, an unknown
  choice) is refused by both, as `vbt wire` decodes it the way a program does;
- each program's `--help` lists exactly the commands the schema says it acts
  on, each with exactly its arguments;
- no Markdown page spells out a command's arguments (`athlete.assign {a, b}`)
  with one the schema does not declare.

Run from the repository root:  python3 -m pytest -q tests/python/test_commands.py
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from test_wire import BIN_DIR, SCHEMAS, VALIDATORS

REPO = Path(__file__).resolve().parents[2]
SCHEMA = SCHEMAS["cmd"]
DEFS = {name: d for name, d in SCHEMA["$defs"].items() if "x-programs" in d}


def run(program: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    binary = BIN_DIR / program
    assert binary.exists(), f"{binary} is missing: run `swift build` first"
    return subprocess.run([str(binary), *args], input=stdin, capture_output=True, text=True, timeout=60)


def swift_commands() -> dict[str, dict]:
    result = run("vbt", "wire", "--commands")
    assert result.returncode == 0, result.stderr
    return {spec["name"]: spec for spec in json.loads(result.stdout)}


def resolve(node: dict) -> dict:
    ref = node.get("$ref")
    return SCHEMA["$defs"][ref.split("/")[-1]] if ref else node


def schema_argument(name: str, node: dict, required: bool) -> dict:
    """A schema property in the shape `vbt wire --commands` prints an argument."""
    types = node["type"] if isinstance(node["type"], list) else [node["type"]]
    json_type = [t for t in types if t != "null"]
    assert len(json_type) == 1, f"{name}: one JSON type besides null, not {types}"
    argument: dict[str, Any] = {"name": name, "required": required, "type": json_type[0]}
    bounds = node
    if "enum" in node:
        argument["enum"] = [value for value in node["enum"] if value is not None]
    if json_type[0] == "array":
        items = resolve(node["items"])
        if items.get("type") == "object":
            argument["items"] = arguments_of(items)
        else:
            argument["items"] = {"type": items["type"]}
            bounds = items
    if json_type[0] in ("number", "integer", "array") and "minimum" in bounds:
        argument["minimum"], argument["maximum"] = bounds["minimum"], bounds["maximum"]
    # null is the same as absent: an optional argument may be null, a required one never.
    assert ("null" in types) == (not required), f"{name}: a required argument is never null, an optional one may be"
    return argument


def arguments_of(definition: dict) -> list[dict]:
    required = set(definition.get("required", []))
    assert definition.get("additionalProperties") is False, "a command's arguments are closed: additionalProperties false"
    return [schema_argument(name, node, name in required) for name, node in definition["properties"].items()]


def comparable(argument: dict) -> dict:
    """An argument without its prose; nested items compared the same way."""
    kept = {k: v for k, v in argument.items() if k != "summary"}
    if isinstance(kept.get("items"), list):
        kept["items"] = sorted((comparable(a) for a in kept["items"]), key=lambda a: a["name"])
    return kept


# --------------------------------------------------------------------------
# The declaration


def test_swift_and_proto_declare_the_same_commands_and_arguments():
    swift = swift_commands()
    assert sorted(swift) == sorted(DEFS), "vbt wire --commands and proto/cmd.schema.json's $defs must name the same commands"
    for name, definition in DEFS.items():
        assert swift[name]["programs"] == definition["x-programs"], f"{name}: who acts on it differs"
        ours = sorted((comparable(a) for a in swift[name]["arguments"]), key=lambda a: a["name"])
        theirs = sorted((comparable(a) for a in arguments_of(definition)), key=lambda a: a["name"])
        assert ours == theirs, f"{name}: Sources/VBTWire/CommandSpecs.swift and proto/cmd.schema.json differ"


def test_the_schema_routes_every_command_to_its_arguments():
    routed = {branch["if"]["properties"]["command"]["const"]: branch["then"]["properties"]["args"]["$ref"]
              for branch in SCHEMA["allOf"] if "if" in branch}
    assert routed == {name: f"#/$defs/{name}" for name in DEFS}


# --------------------------------------------------------------------------
# The decoders against the schema, by behaviour


def valid_value(node: dict) -> Any:
    node = resolve(node)
    types = node["type"] if isinstance(node["type"], list) else [node["type"]]
    kind = next(t for t in types if t != "null")
    if "enum" in node:
        return next(v for v in node["enum"] if v is not None)
    if kind == "string":
        return "ana"
    if kind in ("number", "integer"):
        low, high = node.get("minimum", 0), node.get("maximum", 100)
        middle = (low + high) / 2
        return int(middle) if kind == "integer" else middle
    if kind == "array":
        items = resolve(node["items"])
        if items.get("type") == "object":
            return [valid_object(items)]
        return [valid_value(items)]
    raise AssertionError(f"no valid value for {node}")


def valid_object(definition: dict) -> dict:
    return {name: valid_value(node) for name, node in definition["properties"].items()}


def message(command: str, args: dict) -> dict:
    return {"v": 1, "type": "cmd", "station": "rack-01", "src": "test/cmd.rack-01", "seq": 1, "ts": 1763812101.5,
            "id": "c1", "command": command, "target": "*", "args": args}


def breakages(definition: dict, args: dict, path: tuple = ()) -> list[tuple[str, tuple, Any]]:
    """Every way to make `args` wrong, as (what, path, value or a marker to delete)."""
    found: list[tuple[str, tuple, Any]] = [("an unknown argument", path + ("no_such_argument",), 1)]
    required = set(definition.get("required", []))
    for name, raw in definition["properties"].items():
        node = resolve(raw)
        where = path + (name,)
        types = node["type"] if isinstance(node["type"], list) else [node["type"]]
        kind = next(t for t in types if t != "null")
        found.append((f"{name} of the wrong type", where, {"wrong": True} if kind != "array" else "not an array"))
        if kind in ("number", "integer"):
            found.append((f"{name} as text", where, "12"))
            if "minimum" in node:
                found.append((f"{name} under its minimum", where, node["minimum"] - 0.001 if kind == "number" else node["minimum"] - 1))
                found.append((f"{name} over its maximum", where, node["maximum"] + 0.001 if kind == "number" else node["maximum"] + 1))
        if kind == "integer":
            found.append((f"{name} not whole", where, node["minimum"] + 0.5))
        if "enum" in node:
            found.append((f"{name} not one of its choices", where, "neither"))
        if name in required:
            found.append((f"{name} left out", where, DELETE))
        if kind == "array":
            items = resolve(node["items"])
            if items.get("type") == "object":
                found.append((f"{name} empty", where, []))
                found += breakages(items, args[name][0], where + (0,))
            else:
                found.append((f"{name} holding text", where + (0,), "x"))
                if "minimum" in items:
                    found.append((f"{name} holding a value under its minimum", where + (0,), items["minimum"] - 1))
    return found


DELETE = object()


def broken(args: dict, where: tuple, value: Any) -> dict:
    copied = copy.deepcopy(args)
    target = copied
    for step in where[:-1]:
        target = target[step]
    if value is DELETE:
        del target[where[-1]]
    else:
        target[where[-1]] = value
    return copied


def wire(messages: list[dict]) -> list[dict]:
    result = run("vbt", "wire", stdin="\n".join(json.dumps(m) for m in messages) + "\n")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == len(messages), result.stdout + result.stderr
    return lines


def schema_errors(msg: dict) -> list[str]:
    return [e.message for e in VALIDATORS["cmd"].iter_errors(msg)]


@pytest.mark.parametrize("command", sorted(DEFS))
def test_the_decoders_accept_and_refuse_what_the_schema_does(command: str):
    definition = DEFS[command]
    args = valid_object(definition)
    cases = [("every argument valid", args), ("only what is required", {k: v for k, v in args.items() if k in definition.get("required", [])})]
    # Each bound itself is allowed.
    for name, raw in definition["properties"].items():
        node = resolve(raw)
        for bound in ("minimum", "maximum"):
            if bound in node:
                cases.append((f"{name} at its {bound}", {**args, name: node[bound]}))
    for what, good in cases:
        msg = message(command, good)
        assert not schema_errors(msg), f"{command}, {what}: the schema refuses {good}: {schema_errors(msg)}"
    answers = wire([message(command, good) for _, good in cases])
    for (what, good), answer in zip(cases, answers):
        assert answer["ok"], f"{command}, {what}: the decoders refuse what proto/cmd.schema.json accepts: {answer.get('error')}\nargs: {good}"

    bad = [(what, broken(args, where, value)) for what, where, value in breakages(definition, args)]
    assert len(bad) >= 1 + len(definition["properties"]), "every argument can be broken at least one way"
    for what, args_bad in bad:
        assert schema_errors(message(command, args_bad)), f"{command}, {what}: proto/cmd.schema.json accepts {args_bad}"
    answers = wire([message(command, args_bad) for _, args_bad in bad])
    for (what, args_bad), answer in zip(bad, answers):
        assert not answer["ok"], f"{command}, {what}: the decoders accept what proto/cmd.schema.json refuses\nargs: {args_bad}"


def test_a_refusal_names_the_argument_and_what_it_takes():
    [unknown, wrong] = wire([message("athlete.assign", {"athlete": "ana", "colour": "red"}),
                             message("rest.extend", {"seconds": 7200})])
    assert "colour" in unknown["error"] and "vl_threshold_pct" in unknown["error"], unknown
    assert "seconds" in wrong["error"] and "3600" in wrong["error"], wrong


def test_a_command_no_program_acts_on_is_left_to_whoever_knows_it():
    # Programs ignore commands they do not know (proto/cmd.schema.json): their arguments are not ours to judge.
    [answer] = wire([message("lights.dim", {"level": 3})])
    assert answer["ok"], answer


# --------------------------------------------------------------------------
# --help and the docs


PROGRAMS = sorted({program for d in DEFS.values() for program in d["x-programs"]})


@pytest.mark.parametrize("program", PROGRAMS)
def test_each_program_lists_exactly_the_commands_it_acts_on_with_their_arguments(program: str):
    result = run(program, "--help")
    assert result.returncode == 0, result.stderr
    # A command a line, indented by two spaces; its arguments in braces, continued on lines
    # indented by six.
    listed: dict[str, list[str]] = {}
    entries: list[str] = []
    for line in result.stdout.splitlines():
        if re.match(r"^  [a-z]+\.[a-z]+( \{.*)?$", line):
            entries.append(line.strip())
        elif line.startswith("      ") and entries and "{" in entries[-1] and not entries[-1].endswith("}"):
            entries[-1] += " " + line.strip()
    for entry in entries:
        match = re.fullmatch(r"([a-z]+\.[a-z]+)(?: \{(.*)\})?", entry)
        assert match, f"{program} --help: cannot read the command line {entry!r}"
        listed[match.group(1)] = [a.strip() for a in match.group(2).split(",")] if match.group(2) else []
    expected = {name: [arg + ("" if arg in d.get("required", []) else "?") for arg in d["properties"]]
                for name, d in DEFS.items() if program in d["x-programs"]}
    assert listed == expected, f"{program} --help lists {listed}; proto/cmd.schema.json says {expected}"


def markdown_files() -> list[Path]:
    files = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *sorted((REPO / "proto").glob("*.md")),
             *sorted((REPO / "deploy").glob("*.md"))]
    return [f for f in files if f.exists()]


def test_no_page_names_an_argument_a_command_does_not_take():
    wrong = []
    for path in markdown_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in re.finditer(r"`?([a-z]+\.[a-z]+)`? \{([a-z_, ?]+)\}", line):
                command, names = match.group(1), [n.strip(" ?") for n in match.group(2).split(",")]
                if command not in DEFS:
                    continue
                unknown = [n for n in names if n and n not in DEFS[command]["properties"]]
                if unknown:
                    wrong.append(f"{path.relative_to(REPO)}:{number}: {command} takes no {', '.join(unknown)}")
    assert not wrong, "pages that describe arguments proto/cmd.schema.json does not declare:\n" + "\n".join(wrong)
