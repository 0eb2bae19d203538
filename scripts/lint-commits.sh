#!/usr/bin/env bash
# Holds every commit since the commit template arrived to it (.gitmessage): a
# subject of at most 72 characters, a blank line, then a body saying why, what
# and what was measured. Merge commits are skipped. Without git history (an
# exported tree) there is nothing to check.
# As a hook: `ln -s ../../scripts/lint-commits.sh .git/hooks/commit-msg` checks
# each message as it is written.
set -euo pipefail
message=${1:+$(realpath "$1")}
cd "$(dirname "$(realpath "$0")")/.."

# The last commit written before the template; everything after it follows it.
since=72db54116ee7fc38b7c68ed20ac46fe6bf62ab8b

check() {  # $1: where the message comes from, then the message on stdin
    awk -v where="$1" '
        NR == 1 { subject = $0; if (length($0) > 72) { print where ": subject over 72 characters: " $0; bad = 1 } }
        NR == 2 && $0 != "" { print where ": the subject needs a blank line after it"; bad = 1 }
        NR > 2 && $0 !~ /^#/ && $0 ~ /[^[:space:]]/ { body = 1 }
        END {
            if (!body) { print where ": no body: say why, what, and what you measured (.gitmessage)"; bad = 1 }
            exit bad
        }'
}

if [[ -n $message ]]; then  # the commit-msg hook: the message being written
    check "this commit" < "$message"
    exit
fi
git rev-parse --git-dir >/dev/null 2>&1 || exit 0
git cat-file -e "$since^{commit}" 2>/dev/null || exit 0  # a shallow clone without it
failed=0
for commit in $(git rev-list --no-merges "$since..HEAD"); do
    git log -1 --format=%B "$commit" | check "commit ${commit:0:7}" || failed=1
done
if ((failed)); then
    echo "lint-commits: see CONTRIBUTING.md for the commit template" >&2
    exit 1
fi
