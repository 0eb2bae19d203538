#!/usr/bin/env bash
# Lints the pages' scripts and style sheets (Sources/*/Assets/), the files the EmbedAssets plugin
# compiles into the programs: every script with ESLint (Debian's eslint, scripts/eslint.json),
# every style sheet with a CSS parser (scripts/lint_css.py over tinycss2). `make deps` installs both.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t scripts < <(find Sources -path '*/Assets/*.js' | sort)
mapfile -t sheets < <(find Sources -path '*/Assets/*.css' | sort)
if [ ${#scripts[@]} -eq 0 ] && [ ${#sheets[@]} -eq 0 ]; then
    echo "lint-assets: no Sources/*/Assets/*.js or *.css found: run it from the repository" >&2
    exit 1
fi
if [ ${#scripts[@]} -gt 0 ]; then
    command -v eslint >/dev/null 2>&1 || { echo "lint-assets: eslint is missing: run make deps (apt-get install eslint)" >&2; exit 1; }
    # Debian's eslint lives in /usr/share/nodejs, which a Node.js from elsewhere (NodeSource's) does not search.
    NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH} eslint --no-eslintrc -c scripts/eslint.json --max-warnings 0 "${scripts[@]}"
fi
if [ ${#sheets[@]} -gt 0 ]; then
    "${PYTHON:-python3}" scripts/lint_css.py "${sheets[@]}"
fi
echo "lint-assets: ok (${#scripts[@]} scripts, ${#sheets[@]} style sheets)"
