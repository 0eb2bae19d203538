"""Checks style sheets with a real CSS parser (tinycss2, CSS Syntax Level 3, as browsers read it).

    python3 scripts/lint_css.py FILE.css...

Fails, naming the file, line and what to fix, on what a browser would silently drop or
misread: a syntax error (an unclosed block, a stray token, a declaration without a colon),
an at-rule other than @media, @supports, @keyframes and @font-face, a declaration with an
empty value, a block or string left open at the end, a property set twice in one block (the first is dead), and a `var(--name)`
of a custom property that no rule of the file defines (a typo draws nothing). Whether each
value suits its property is checked by a browser: tests/python/test_console_assets.py asks
Chromium with CSS.supports.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import tinycss2
except ImportError:
    sys.exit("lint_css: tinycss2 is missing: run `make deps` (or python3 -m pip install tinycss2)")

GROUPING_AT_RULES = {"media", "supports"}  # hold rules
KNOWN_AT_RULES = GROUPING_AT_RULES | {"keyframes", "font-face"}


def var_references(tokens, found: list) -> None:
    """Every `var(--name)` in a value, however deeply nested (calc(), min(), another var's fallback)."""
    for token in tokens:
        if token.type == "function":
            if token.lower_name == "var":
                names = [t for t in token.arguments if t.type == "ident"]
                if names:
                    found.append((names[0].value, token.source_line))
            var_references(token.arguments, found)
        elif token.type in ("() block", "[] block", "{} block"):
            var_references(token.content, found)


def check_declarations(content, where: str, problems: list, defined: set, used: list) -> None:
    seen: dict[str, int] = {}
    for item in tinycss2.parse_blocks_contents(content, skip_comments=True, skip_whitespace=True):
        if item.type == "error":
            problems.append(f"{where}:{item.source_line}: {item.message.rstrip('.')}: fix the declaration")
            continue
        if item.type != "declaration":
            problems.append(f"{where}:{item.source_line}: a nested rule: write it as a rule of its own")
            continue
        if not [t for t in item.value if t.type not in ("whitespace", "comment")]:
            problems.append(f"{where}:{item.source_line}: `{item.name}` has no value: give it one or remove it")
        if item.name.startswith("--"):
            defined.add(item.name)
        elif item.lower_name in seen:
            problems.append(f"{where}:{item.source_line}: `{item.name}` is set twice in one block "
                            f"(line {seen[item.lower_name]} too): keep one")
        seen.setdefault(item.lower_name, item.source_line)
        var_references(item.value, used)


def check_rules(rules, where: str, problems: list, defined: set, used: list) -> None:
    for rule in rules:
        if rule.type == "error":
            problems.append(f"{where}:{rule.source_line}: {rule.message.rstrip('.')}: fix the syntax")
        elif rule.type == "qualified-rule":
            if not [t for t in rule.prelude if t.type not in ("whitespace", "comment")]:
                problems.append(f"{where}:{rule.source_line}: a rule without a selector: add one")
            check_declarations(rule.content, where, problems, defined, used)
        elif rule.type == "at-rule":
            if rule.lower_at_keyword not in KNOWN_AT_RULES:
                problems.append(f"{where}:{rule.source_line}: @{rule.at_keyword} is not one this project uses "
                                f"({', '.join('@' + n for n in sorted(KNOWN_AT_RULES))}): check its spelling")
            elif rule.content is None:
                problems.append(f"{where}:{rule.source_line}: @{rule.at_keyword} has no block: add one")
            elif rule.lower_at_keyword in GROUPING_AT_RULES or rule.lower_at_keyword == "keyframes":
                inner = tinycss2.parse_rule_list(rule.content, skip_comments=True, skip_whitespace=True)
                check_rules(inner, where, problems, defined, used)
            else:
                check_declarations(rule.content, where, problems, defined, used)


def check(path: Path) -> list[str]:
    problems: list[str] = []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return [f"{path}: cannot be read as UTF-8 ({error}): save it as UTF-8"]
    defined: set[str] = set()
    used: list[tuple[str, int]] = []
    # The parser closes what the file leaves open at its end, as a browser does; it gives back
    # the file's own text otherwise, so a difference is a block or string left open.
    rewritten = tinycss2.serialize(tinycss2.parse_component_value_list(text))
    if rewritten != text:
        at = next((i for i, (a, b) in enumerate(zip(rewritten, text)) if a != b), min(len(rewritten), len(text)))
        problems.append(f"{path}:{text[:at].count(chr(10)) + 1}: a block, bracket or string is left open: close it")
    rules = tinycss2.parse_stylesheet(text, skip_comments=True, skip_whitespace=True)
    check_rules(rules, str(path), problems, defined, used)
    for name, line in used:
        if name not in defined:
            problems.append(f"{path}:{line}: var({name}) names a custom property no rule defines: define it or fix the name")
    return problems


def main(paths: list[str]) -> int:
    if not paths:
        print("usage: lint_css.py FILE.css...", file=sys.stderr)
        return 2
    problems = [problem for path in paths for problem in check(Path(path))]
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
