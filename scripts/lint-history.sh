#!/usr/bin/env bash
# Fails when code, tests or their comments name a tracker's issue (the word
# "issue" or "issues", in any case, then a number, with a space, '#' or '-'
# between, or at a line's end with its number on the next line): a comment or
# a help text says what holds now and why; the
# reasoning and the figures behind a choice live in docs/decisions/.
# Run from the repository's root (`make lint` does).
set -euo pipefail
cd "$(dirname "$0")/.."

paths=(Sources Tests Benchmarks tests scripts deploy proto Makefile Package.swift)
existing=()
for path in "${paths[@]}"; do
    [[ -e $path ]] && existing+=("$path")
done

# "issue" or "issues" as a word, then an optional space, '#' or '-', then a number.
# Case is ignored, so a capitalised one counts; "an issue" or "Issue.record" do not.
pattern='\bissues?[ #-]?#?[0-9]+'

found=0
if grep -rnIiE --exclude-dir=.build --exclude-dir=__pycache__ "$pattern" "${existing[@]}"; then
    found=1
fi
# The number carried to the next line: "... (issue" / "17)".
while IFS= read -r -d '' file; do
    awk '
        previous ~ /(^|[^a-z0-9_])issues?[ #-]?#?[[:space:]]*$/ && tolower($0) ~ /^[[:space:]]*((\/\/\/?|#|\*)[[:space:]]*)?#?[0-9]/ {
            printf "%s:%d-%d: %s / %s\n", FILENAME, FNR - 1, FNR, previousLine, $0
            hits++
        }
        { previousLine = $0; previous = tolower($0) }
        END { exit hits > 0 }
    ' "$file" || found=1
done < <(find "${existing[@]}" \( -name .build -o -name __pycache__ \) -prune -o -type f -print0 | xargs -0 grep -lIZiE '\bissues?' 2>/dev/null || true)

if ((found)); then
    echo "lint-history: say what holds now, not which issue asked for it (see docs/decisions/ for the history)" >&2
    exit 1
fi
