#!/usr/bin/env bash
# `make run`: starts the system built so far on this machine and shows the
# live bus. Today that is the bus and `vbt echo`; Ctrl-C stops everything.
set -euo pipefail
bin=${1:?usage: run.sh BIN_DIR}
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

"$bin/vbt-bus" &
pids+=($!)
echo "run: vbt-bus on ${VBT_PUB_ENDPOINT:-tcp://127.0.0.1:7701} (publish) and ${VBT_SUB_ENDPOINT:-tcp://127.0.0.1:7702} (subscribe)"
echo "run: watching the bus with 'vbt echo' (Ctrl-C to stop); in another shell try:"
echo "       $bin/vbt pub cmd.rack-01 '{\"id\":\"c1\",\"command\":\"set.end\",\"target\":\"*\"}'"
echo "       $bin/vbt hz"
"$bin/vbt" echo &
pids+=($!)
wait -n "${pids[@]}"
