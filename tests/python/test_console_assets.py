"""The console's script and style sheet: files in Sources/coach-console/Assets/, compiled into the
program at build time (the EmbedAssets plugin), served from the binary.

- What the console serves at /assets/console.js and /assets/console.css is, byte for byte, its
  file's text (without the newline ending the last line), with its type: the binary carries the
  files as they are in the tree, no resource folder beside it.
- Every declaration of every style sheet is one Chromium accepts (CSS.supports): a misspelt
  property or a value that does not suit it would be dropped in silence by the browser.
  `make lint` (scripts/lint_css.py) checks the syntax; this checks the meaning.
- The plugin's tool, embed-assets, keeps any text verbatim (compiled with swiftc and printed back)
  and refuses, naming the file, what it cannot keep.
"""

from __future__ import annotations

import http.client
import shutil
import subprocess
from pathlib import Path

import pytest

from test_console import browser, session_cookie
from test_wire import Bus, binary, free_port

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / "Sources" / "coach-console" / "Assets"
TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
COACH = ("coach-assets", "asset-check-7")


def get(base: str, path: str, cookie: str) -> tuple[int, str, bytes]:
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("GET", path, headers={"Cookie": cookie})
    response = connection.getresponse()
    result = response.status, response.getheader("Content-Type") or "", response.read()
    connection.close()
    return result


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("assets")
    bus = Bus(tmp_path)
    try:
        bus.start()
        users = tmp_path / "console-users"
        added = subprocess.run([binary("vbt"), "console", "user", "add", COACH[0], "--role", "coach", "--users", str(users)],
                               input=COACH[1] + "\n", text=True, capture_output=True, env=bus.env, timeout=30)
        assert added.returncode == 0, added.stderr
        port = free_port()
        bus.spawn("coach-console", ["coach-console", "--users", str(users), "--listen", f"127.0.0.1:{port}"]) \
            .wait_for_log("console listening")
        yield f"http://127.0.0.1:{port}"
    finally:
        bus.stop_all()


def test_every_asset_file_is_served_byte_for_byte(console: str):
    files = sorted(p for p in ASSETS.iterdir() if p.suffix in TYPES)
    assert {p.name for p in files} >= {"console.js", "console.css"}, f"{ASSETS} lost the console's assets"
    cookie = session_cookie(console, COACH)
    for path in files:
        text = path.read_bytes()
        assert text.endswith(b"\n"), f"{path.name}: end its last line with a newline"
        status, content_type, body = get(console, f"/assets/{path.name}", cookie)
        assert status == 200, f"/assets/{path.name} answered {status}"
        assert content_type == TYPES[path.suffix], f"/assets/{path.name} is served as {content_type}"
        expected = text[:-1]
        if body != expected:
            at = next((i for i, (a, b) in enumerate(zip(body, expected)) if a != b), min(len(body), len(expected)))
            line = expected[:at].count(b"\n") + 1
            pytest.fail(f"/assets/{path.name} differs from {path.relative_to(ROOT)} from line {line} "
                        f"({len(body)} bytes served, {len(expected)} in the file): rebuild the console")


def declarations(sheet: Path) -> list[tuple[int, str, str]]:
    """(line, property, value) of every declaration, in rules and in @media/@supports blocks."""
    try:
        import tinycss2
    except ImportError:
        pytest.fail("tinycss2 is missing: run make deps (or python3 -m pip install tinycss2)")
    found: list[tuple[int, str, str]] = []

    def walk(rules) -> None:
        for rule in rules:
            if rule.type == "at-rule" and rule.content is not None and rule.lower_at_keyword in ("media", "supports"):
                walk(tinycss2.parse_rule_list(rule.content, skip_comments=True, skip_whitespace=True))
            elif rule.type == "qualified-rule":
                for item in tinycss2.parse_declaration_list(rule.content, skip_comments=True, skip_whitespace=True):
                    if item.type == "declaration":
                        value = tinycss2.serialize(item.value).strip()
                        found.append((item.source_line, item.name, value + (" !important" if item.important else "")))

    walk(tinycss2.parse_stylesheet(sheet.read_text(), skip_comments=True, skip_whitespace=True))
    return found


def test_chromium_accepts_every_declaration_of_the_style_sheets():
    sheets = sorted(ASSETS.glob("*.css"))
    assert sheets, f"no style sheet in {ASSETS}"
    driver = browser()
    try:
        driver.get("about:blank")
        for sheet in sheets:
            found = declarations(sheet)
            assert found, f"{sheet.name}: no declaration read"
            refused = driver.execute_script(
                "return arguments[0].filter(([line, name, value]) => !CSS.supports(name, value.replace(/ !important$/, '')))",
                [list(d) for d in found])
            assert refused == [], f"{sheet.name}: Chromium drops these declarations (line, property, value): {refused}"
            # The check can fail: a misspelt property and a value of the wrong kind are refused.
            assert driver.execute_script("return [CSS.supports('colr', 'red'), CSS.supports('width', 'red')]") == [False, False]
    finally:
        driver.quit()


def test_embed_assets_keeps_any_text_verbatim_and_refuses_what_it_cannot(tmp_path: Path):
    """The plugin's tool, on text a Swift literal would misread: quotes and `#`s that close a raw
    string, backslashes that start an escape or an interpolation, an empty file, blank last lines.
    The generated file is compiled (swiftc) and prints each string back."""
    swiftc = shutil.which("swiftc")
    assert swiftc, "swiftc is missing: the Swift toolchain builds vbt"
    texts = {
        "closers.js": b'const a = `"""#` + "\\"##" + \'"""##\';\n// ### and \\(x) and \\#(y) and \\n\n',
        "tabs-and-unicode.css": b'.a::before { content: "\xc2\xb7 \xe2\x80\x93"; }\n\t.b { color: #abcdef; }\n\n',
        "empty.css": b"",
        "no-final-newline.js": b"x",
    }
    for name, text in texts.items():
        (tmp_path / name).write_bytes(text)
    generated = tmp_path / "Assets.swift"
    made = subprocess.run([binary("embed-assets"), str(generated), *(str(tmp_path / n) for n in texts)],
                          capture_output=True, text=True, timeout=30)
    assert made.returncode == 0, made.stderr
    names = {"closers.js": "closersJS", "tabs-and-unicode.css": "tabsAndUnicodeCSS", "empty.css": "emptyCSS",
             "no-final-newline.js": "noFinalNewlineJS"}
    main = tmp_path / "main.swift"
    main.write_text("".join(f'print(Assets.{names[n]}.utf8.count, terminator: " ")\nprint(Assets.{names[n]}, terminator: "")\n'
                            for n in texts))
    program = tmp_path / "print-assets"
    built = subprocess.run([swiftc, "-o", str(program), str(generated), str(main)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    printed = subprocess.run([str(program)], capture_output=True, timeout=30, check=True).stdout
    expected = b"".join(b"%d %s" % (len(t[:-1] if t.endswith(b"\n") else t), t[:-1] if t.endswith(b"\n") else t)
                        for t in texts.values())
    assert printed == expected
    # Refused, naming the file and what to do.
    for name, text, says in (("crlf.js", b"a;\r\nb;\r\n", "LF line endings"), ("latin1.css", b"a { content: '\xe9'; }\n", "UTF-8"),
                             ("9lives.js", b"a;\n", "starting with a letter")):
        (tmp_path / name).write_bytes(text)
        refused = subprocess.run([binary("embed-assets"), str(tmp_path / "out.swift"), str(tmp_path / name)],
                                 capture_output=True, text=True, timeout=30)
        assert refused.returncode != 0 and name in refused.stderr and says in refused.stderr, refused.stderr
    assert not (tmp_path / "out.swift").exists(), "nothing written when a file is refused"
