#!/usr/bin/env bash
# `make run`: starts the system built so far on this machine and shows the
# live gym: the bus, three simulated stations (no hardware needed), the rep
# detector, the posture evaluator, the session recorder (data/vbt.sqlite), the
# notifier, and `vbt echo` on what a coach watches (reps, sets, rejected
# attempts, sensor status, alerts), and the coach console at http://127.0.0.1:8080/
# (a demo coach account is made on the first run). Ctrl-C stops everything.
#
# Every program is started again when it dies (a crash, kill -9), as the deploy/
# units' Restart=always does: the journals and the recorder's recovery make the
# history whole again.
set -euo pipefail
bin=${1:?usage: run.sh BIN_DIR}
pids=()
# Only the supervisor's pid files live outside data/ (removed when make run stops); every
# program's state (keys, journals, checkpoints, the database, the notifier's state) is in data/.
state=$(mktemp -d "${TMPDIR:-/tmp}/vbt-run.XXXXXX")
cleanup() {
    [ -d "$state" ] || return 0  # already done (TERM, then EXIT)
    touch "$state/stopping"
    for pidfile in "$state"/*.pid; do [ -e "$pidfile" ] && kill -TERM "$(cat "$pidfile")" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$state"
}
trap cleanup EXIT INT TERM

# On a terminal the live board (vbt watch) takes the screen: the programs' logs go to a file.
if [ -t 1 ]; then
    mkdir -p data
    echo "run: the programs' logs go to data/run.log (tail -f data/run.log in another shell)"
    exec 2>>data/run.log
fi

# supervise NAME COMMAND...: runs COMMAND, and again 1 s after it dies, until make run stops.
supervise() {
    local name=$1
    shift
    while [ ! -e "$state/stopping" ]; do
        "$@" &
        echo $! >"$state/$name.pid"
        local status=0
        wait $! || status=$?
        [ -e "$state/stopping" ] && break
        echo "run: $name exited ($status); starting it again in 1 s" >&2
        sleep 1
    done
}

# Secured as an installation is (proto/security.md): the installation's keys are made
# once under data/keys, one per station and per service plus a coach key for the
# commands below; every program connects with its own key over CURVE.
keys=data/keys
if [ ! -e "$keys/server.key_secret" ]; then
    "$bin/vbt" keys init "$keys" >/dev/null
    for station in rack-01 bench-01 platform-01; do "$bin/vbt" keys add "$keys" "$station" --role bridge --station "$station" >/dev/null; done
    for service in rep-detector posture-evaluator notifier session-recorder coach-console; do "$bin/vbt" keys add "$keys" "$service" --role service >/dev/null; done
    "$bin/vbt" keys add "$keys" coach --role coach >/dev/null
    echo "run: made the installation's keys in $keys (vbt keys list $keys)"
fi
# Older data/keys folders (made before the console existed) get its key too.
[ -e "$keys/clients/coach-console.key_secret" ] || "$bin/vbt" keys add "$keys" coach-console --role service >/dev/null
export VBT_BUS_CERT=$keys/server.key
# key NAME: the environment of a program running with NAME's key (for env, which execs).
key() { echo "VBT_CERT=$keys/clients/$1.key_secret"; }
# The bus and the recorder's query endpoint let in only the keys in authorized/.
server=(VBT_SERVER_CERT=$keys/server.key_secret VBT_AUTHORIZED=$keys/authorized)
export VBT_CERT=$keys/clients/coach.key_secret  # the vbt commands below are the coach's

supervise vbt-bus env "${server[@]}" "$bin/vbt-bus" &
pids+=($!)
echo "run: vbt-bus on ${VBT_PUB_ENDPOINT:-tcp://127.0.0.1:7701} (publish) and ${VBT_SUB_ENDPOINT:-tcp://127.0.0.1:7702} (subscribe)"

# Three simulated athletes, each its own sensor-bridge, looping their sessions. Each
# journals what it publishes (data/journal/<station>), so a recorder that was down
# fetches what it missed.
supervise bridge-rack-01 env "$(key rack-01)" "$bin/sensor-bridge" --simulate --loop --station rack-01 --exercise squat --load-kg 100 --seed 1 --rest 20 --athlete ana --posture-rate 20 \
    --journal data/journal/rack-01 &
pids+=($!)
supervise bridge-bench-01 env "$(key bench-01)" "$bin/sensor-bridge" --simulate --loop --station bench-01 --exercise bench --load-kg 70 --one-rep-max-kg 95 --seed 2 --rest 20 --athlete ben \
    --journal data/journal/bench-01 &
pids+=($!)
supervise bridge-platform-01 env "$(key platform-01)" "$bin/sensor-bridge" --simulate --loop --station platform-01 --exercise deadlift --load-kg 140 --one-rep-max-kg 180 --seed 3 --rest 20 --athlete cleo \
    --journal data/journal/platform-01 &
pids+=($!)

supervise rep-detector env "$(key rep-detector)" "$bin/rep-detector" --journal data/journal/rep-detector &
pids+=($!)
# The history: data/vbt.sqlite (VBT_DB), queried by `vbt history`, `vbt stats week`, `vbt export`...
supervise session-recorder env "$(key session-recorder)" "${server[@]}" "$bin/session-recorder" &
pids+=($!)
# The stations (registered, so an assignment is sent before the recorder hears their bridges),
# the athletes, and who lifts what where (published as cmd athlete.assign: the detector uses
# the exercise and load, the recorder stores it). rack-01's athlete also wears a (simulated)
# posture sensor: she is calibrated while she sits well (the first 20 s; once rack-01 is heard
# live), then the evaluator follows her slouching. Failures go to the log.
( sleep 2
  for station in "rack-01 Squat rack" "bench-01 Bench" "platform-01 Deadlift platform"; do
      set -- $station; "$bin/vbt" station add "$1" --label "${*:2}" >/dev/null || true
  done
  for who in "ana Ana" "ben Ben" "cleo Cleo"; do set -- $who; "$bin/vbt" athlete add "$1" --name "$2" >/dev/null 2>&1 || true; done
  "$bin/vbt" station assign rack-01 --athlete ana --exercise squat --load 100 --move >/dev/null || true
  "$bin/vbt" station assign bench-01 --athlete ben --exercise bench --load 70 --move >/dev/null || true
  "$bin/vbt" station assign platform-01 --athlete cleo --exercise deadlift --load 140 --move >/dev/null || true
  for _ in 1 2 3 4 5; do "$bin/vbt" posture calibrate --station rack-01 --athlete ana --seconds 10 >/dev/null && break; sleep 1; done ) &
supervise posture-evaluator env "$(key posture-evaluator)" "$bin/posture-evaluator" --journal data/journal/posture-evaluator &
pids+=($!)
# Rest timers after each set and alerts (velocity loss, posture, sensors). Its state file sits
# under data/ beside its journal: they describe the same streams, so `rm -rf data` starts both
# afresh (a state kept elsewhere would go on with streams the new journals never held).
supervise notifier env "$(key notifier)" "$bin/notifier" --state data/notifier.json --journal data/journal/notifier &
pids+=($!)

# The coach console, with a demo coach account made on the first run (vbt console user add for real ones).
users=data/console-users
demo_password=squat-bench-deadlift
if [ ! -e "$users" ]; then
    printf '%s\n' "$demo_password" | "$bin/vbt" console user add coach --role coach --users "$users" >/dev/null
    echo "run: made the demo console account 'coach' in $users"
fi
console_listen=${VBT_CONSOLE_LISTEN:-127.0.0.1:8080}
supervise coach-console env "$(key coach-console)" "$bin/coach-console" --users "$users" --listen "$console_listen" &
pids+=($!)

echo "run: 3 simulated stations (rack-01, bench-01, platform-01), rep-detector, posture-evaluator, session-recorder (data/vbt.sqlite), notifier"
echo "run: the coach console: http://$console_listen/  (log in as coach, password $demo_password unless you changed it)"
echo "run: in another shell, with the coach's key: export VBT_CERT=$keys/clients/coach.key_secret VBT_BUS_CERT=$keys/server.key"
echo "run: then try: $bin/vbt history    or    $bin/vbt stats week --chart week.svg"
if [ -t 1 ]; then
    # A terminal: the live board for people (vbt watch); q or Ctrl-C stops everything.
    echo "run: the live board follows in 3 s; the first reps come after ~10 s"
    sleep 3
    "$bin/vbt" watch </dev/tty &
else
    # Not a terminal (a log file, CI): one line per message.
    "$bin/vbt" echo rep. set. rejected. profile. posture. calibration. status. alert. workout. &
fi
pids+=($!)
wait -n "${pids[@]}"
