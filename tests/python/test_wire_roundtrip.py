"""Every proto/ schema against the Swift code that speaks it.

Each message schema carries `examples`: whole JSON frames as a program would
publish them. `vbt wire` decodes each one as a receiving program would and
encodes it again as a sending program would; the test holds the result to
the schema (so Swift's encoding of every message type is validated here, in
Python, with jsonschema) and to the example (nothing lost or changed on the
way through). The message types the build speaks and the schemas in proto/
must be the same set.

Run from the repository root:  python3 -m pytest -q tests/python
"""

from __future__ import annotations

import json
import math
import subprocess
from typing import Any

import pytest

from test_wire import BIN_DIR, SCHEMAS, VALIDATORS

MESSAGE_SCHEMAS = sorted(name for name in SCHEMAS if name != "envelope")
# Assigned by whoever publishes: the checker's own, not the example's.
STAMPED = {"src", "seq"}


def vbt_wire(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    binary = BIN_DIR / "vbt"
    assert binary.exists(), f"{binary} is missing: run `swift build` first"
    return subprocess.run([str(binary), "wire", *args], input=stdin, capture_output=True, text=True, timeout=60)


def errors(kind: str, message: dict) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in VALIDATORS[kind].iter_errors(message)
    ]


def as_json(text: Any) -> Any:
    """A string holding a JSON object (calibration's `json`) as that object; anything else as it is."""
    if isinstance(text, str) and text.startswith("{"):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Where `actual` differs from `expected`; numbers within the wire's 6 decimals;
    a JSON object carried as text compared as the object; a command's absent
    `args` is its empty one (proto/cmd.schema.json)."""
    expected, actual = as_json(expected), as_json(actual)
    if not path and isinstance(expected, dict) and expected.get("type") == "cmd" and "args" not in expected:
        expected = {**expected, "args": {}}
    if isinstance(expected, dict) and isinstance(actual, dict):
        found = []
        for key in sorted(set(expected) | set(actual)):
            if not path and key in STAMPED:
                continue
            if key not in actual:
                found.append(f"{path}{key}: dropped")
            elif key not in expected:
                found.append(f"{path}{key}: added ({json.dumps(actual[key])})")
            else:
                found += differences(expected[key], actual[key], f"{path}{key}.")
        return found
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path[:-1]}: {len(expected)} items became {len(actual)}"]
        found = []
        for index, (e, a) in enumerate(zip(expected, actual)):
            found += differences(e, a, f"{path}{index}.")
        return found
    numbers = (int, float)
    if isinstance(expected, numbers) and isinstance(actual, numbers) and not isinstance(expected, bool) and not isinstance(actual, bool):
        return [] if math.isclose(expected, actual, rel_tol=1e-9, abs_tol=1e-6) else [f"{path[:-1]}: {expected} became {actual}"]
    return [] if expected == actual else [f"{path[:-1]}: {json.dumps(expected)} became {json.dumps(actual)}"]


def test_the_build_speaks_exactly_the_types_proto_describes():
    result = vbt_wire("--types")
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split()) == MESSAGE_SCHEMAS


@pytest.mark.parametrize("kind", MESSAGE_SCHEMAS)
def test_every_schema_example_survives_the_swift_decoder_and_encoder(kind: str):
    examples = SCHEMAS[kind].get("examples")
    assert examples, f"proto/{kind}.schema.json has no examples"
    for example in examples:
        assert not errors(kind, example), f"proto/{kind}.schema.json's own example is invalid: {errors(kind, example)}"
    result = vbt_wire(stdin="\n".join(json.dumps(example) for example in examples) + "\n")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == len(examples), result.stdout + result.stderr
    for example, line in zip(examples, lines):
        assert line["ok"], f"Swift rejected a {kind} example: {line.get('error')}\nexample: {json.dumps(example)}"
        encoded = line["message"]
        assert not errors(kind, encoded), f"Swift's {kind} does not match its schema: {errors(kind, encoded)}\nmessage: {json.dumps(encoded)}"
        assert not differences(example, encoded), f"{kind} changed on the way through: {differences(example, encoded)}"
    assert result.returncode == 0


def test_a_bad_message_is_reported_by_line_and_the_exit_status_says_so():
    good = json.dumps(SCHEMAS["rep"]["examples"][0])
    bad = dict(SCHEMAS["rep"]["examples"][0])
    del bad["mean_velocity_mps"]
    result = vbt_wire(stdin=good + "\n" + json.dumps(bad) + "\n" + "not json\n")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["ok"] for line in lines] == [True, False, False]
    assert lines[1]["line"] == 2 and "mean_velocity_mps" in lines[1]["error"]
    assert lines[2]["line"] == 3
    assert result.returncode == 1
