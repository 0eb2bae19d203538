#!/bin/sh
# Runs inside the BLE test VM (a chroot of the host root, see
# build-initramfs.sh): brings up hci0 on a Bumble virtual controller with
# emulated sensors (peripherals.py), then either
#   bridge mode: vbt-bus + vbt record + sensor-bridge against the sensors,
#                until the recording holds enough readings (or the bridge
#                exits, or --wait passes); or
#   smoke mode:  (no sensor-bridge in BIN_DIR) hcitool lescan + gatttool
#                discovery, a command write and notifications from both
#                sensors: proves the VM, the controller and the sensors work.
#
#   guest-test.sh --results DIR --bin-dir DIR --venv DIR
#                 [--mode auto|bridge|smoke] [--wait SECONDS]
#                 [--imu-drop-after N] [--imu-min N] [--posture-min N] [--no-btmon]
#
# Writes DIR/mode (bridge|smoke), DIR/guest.log, a log per process and
# DIR/exit-codes ("name status" per stopped process); exits 0 on success.

set -u
here=$(cd "$(dirname "$0")" && pwd)

results= bin_dir= venv= mode=auto wait_s=90
imu_drop_after=150 imu_min=300 posture_min=40 btmon=1
while [ $# -gt 0 ]; do
    case "$1" in
        --results) results=$2; shift 2 ;;
        --bin-dir) bin_dir=$2; shift 2 ;;
        --venv) venv=$2; shift 2 ;;
        --mode) mode=$2; shift 2 ;;
        --wait) wait_s=$2; shift 2 ;;
        --imu-drop-after) imu_drop_after=$2; shift 2 ;;
        --imu-min) imu_min=$2; shift 2 ;;
        --posture-min) posture_min=$2; shift 2 ;;
        --no-btmon) btmon=0; shift ;;
        *) echo "guest-test: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$results" ] && [ -n "$bin_dir" ] && [ -n "$venv" ] \
    || { echo "guest-test: --results, --bin-dir and --venv are required" >&2; exit 2; }

exec > "$results/guest.log" 2>&1
# Also show the log on the console (run-vm.sh keeps that as console.log).
tail -n +1 -f "$results/guest.log" > /dev/console 2>/dev/null &
tail_pid=$!

say() { echo "[guest $(cut -d' ' -f1 /proc/uptime)] $*"; }
fail() { say "FAIL: $*"; finish 1; }

# Background processes, as "name:pid" in start order.
procs=""
started() { procs="$procs $1:$2"; }

running() {  # running PID: alive and not a zombie
    kill -0 "$1" 2>/dev/null || return 1
    [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]
}
stop() {  # stop NAME: SIGTERM, up to 10 s, then SIGKILL; logs the exit status
    for p in $procs; do
        [ "${p%%:*}" = "$1" ] || continue
        pid=${p#*:}
        if running "$pid"; then
            kill -TERM "$pid" 2>/dev/null
            i=0
            while running "$pid" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
            if running "$pid"; then
                say "$1 ignored SIGTERM for 10 s; killing it"
                kill -KILL "$pid" 2>/dev/null
            fi
        fi
        wait "$pid" 2>/dev/null
        echo "$1 $?" >> "$results/exit-codes"
        procs=$(echo "$procs" | sed "s| $p||")
    done
}
finish() {
    # Reverse start order: the bridge before the recorder (which flushes),
    # the bus, then the sensors.
    for p in $(echo $procs | tr ' ' '\n' | tac); do stop "${p%%:*}"; done
    if [ -n "${btmon_pid:-}" ]; then
        kill -INT "$btmon_pid" 2>/dev/null; wait "$btmon_pid" 2>/dev/null
        cp /tmp/btmon.snoop "$results/btmon.snoop" 2>/dev/null
    fi
    dmesg > "$results/dmesg.txt" 2>/dev/null
    # Smoke outputs were written to tmpfs (9p writes are slow): keep them.
    for f in "$smoke"/*; do [ -e "$f" ] && cp "$f" "$results/smoke.${f##*/}"; done
    say "result: $1 ($mode mode)"
    sleep 0.3
    kill "$tail_pid" 2>/dev/null
    exit "$1"
}

: > "$results/exit-codes"
smoke=/tmp/smoke
mkdir -p "$smoke"
say "guest-test in $(uname -r); results $results, binaries $bin_dir"
python=$venv/bin/python
[ -x "$python" ] || fail "no venv python at $python (run tests/ble-vm/deps.sh)"
[ -c /dev/vhci ] || fail "/dev/vhci missing (hci_vhci not loaded?)"

case "$mode" in
    auto) if [ -x "$bin_dir/sensor-bridge" ]; then mode=bridge; else mode=smoke; fi ;;
    bridge|smoke) ;;
    *) fail "unknown mode $mode" ;;
esac
echo "$mode" > "$results/mode"
say "mode: $mode"
# Smoke mode listens with separate gatttool runs: no link drop there.
[ "$mode" = smoke ] && imu_drop_after=0

# --- the emulated radio and sensors ------------------------------------------
"$python" "$here/peripherals.py" --results "$results" --imu-drop-after "$imu_drop_after" \
    > "$results/peripherals.log" 2>&1 &
started peripherals $!
periph_pid=$!
say "peripherals.py started; waiting for hci0 and the ready marker"

if [ "$mode" = bridge ]; then
    # Inside the VM everything is on its loopback: plaintext, said explicitly (proto/security.md).
    export VBT_INSECURE=1
    # The bus and the recorder do not need the radio: start them while
    # Python imports Bumble (the slowest step under emulation).
    "$bin_dir/vbt-bus" --heartbeat-interval 0.2 > "$results/bus.log" 2>&1 &
    started bus $!
    "$bin_dir/vbt" record --out "$results/bridge.jsonl" --stats "$results/bridge.stats.json" \
        > "$results/record.log" 2>&1 &
    started record $!
    record_pid=$!
fi

i=0
while [ ! -e "$results/peripherals.ready" ] || [ ! -e /sys/class/bluetooth/hci0 ]; do
    running "$periph_pid" || { cat "$results/peripherals.log"; fail "peripherals.py exited early"; }
    [ $i -ge 900 ] && fail "no hci0 / peripherals.ready after 90 s"
    sleep 0.1; i=$((i + 1))
done
say "hci0 registered, sensors advertising"

# No bluetoothd (it would take over ATT). Power the adapter by hand; the
# kernel may still be running its setup of the new controller: retry.
i=0
until hciconfig hci0 up 2>"$results/hciconfig.err"; do
    i=$((i + 1))
    [ $i -ge 20 ] && fail "hciconfig hci0 up failed 20 times: $(cat "$results/hciconfig.err")"
    sleep 0.5
done
hciconfig -a hci0 > "$results/hciconfig.txt" 2>&1
grep -q "UP RUNNING" "$results/hciconfig.txt" || fail "hci0 is not UP RUNNING: $(cat "$results/hciconfig.txt")"
say "hci0 up: $(grep -o 'BD Address: [0-9A-F:]*' "$results/hciconfig.txt")"

if [ "$btmon" = 1 ] && command -v btmon >/dev/null 2>&1; then
    # To tmpfs (cheap); copied to the results at the end.
    btmon -w /tmp/btmon.snoop > /dev/null 2>&1 &
    btmon_pid=$!
fi

# --- smoke mode ----------------------------------------------------------------
gatt() {  # gatt ADDR TYPE ARGS...: one gatttool run, line-buffered, bounded
    addr=$1 type=$2; shift 2
    timeout -s INT -k 2 20 stdbuf -oL gatttool -i hci0 -b "$addr" -t "$type" "$@"
}
value_handle() {  # value_handle CHARS_FILE UUID
    grep -i "uuid = $2" "$1" | sed 's/.*char value handle = \(0x[0-9a-f]*\).*/\1/'
}
smoke_sensor() {  # smoke_sensor KEY ADDR TYPE SERVICE NOTIFY_UUID WRITE_UUID WRITE_HEX LISTEN_S
    key=$1 addr=$2 type=$3 service=$4 notify=$5 write=$6 payload=$7 listen=$8
    gatt "$addr" "$type" --primary > "$smoke/$key.primary.txt" 2>&1 \
        || fail "$key: gatttool --primary failed: $(cat "$smoke/$key.primary.txt")"
    grep -qi "uuid: $service" "$smoke/$key.primary.txt" \
        || fail "$key: service $service not discovered: $(cat "$smoke/$key.primary.txt")"
    gatt "$addr" "$type" --characteristics > "$smoke/$key.chars.txt" 2>&1 \
        || fail "$key: gatttool --characteristics failed"
    gatt "$addr" "$type" --char-desc > "$smoke/$key.descs.txt" 2>&1 \
        || fail "$key: gatttool --char-desc failed"
    nh=$(value_handle "$smoke/$key.chars.txt" "$notify")
    wh=$(value_handle "$smoke/$key.chars.txt" "$write")
    [ -n "$nh" ] && [ -n "$wh" ] || fail "$key: characteristics $notify / $write not found"
    # The CCCD: the first 0x2902 descriptor after the notify value handle.
    cccd=
    for h in $(sed -n 's/^handle = \(0x[0-9a-fA-F]*\), uuid = 00002902-.*/\1/p' "$smoke/$key.descs.txt"); do
        if [ $((h)) -gt $((nh)) ]; then cccd=$h; break; fi
    done
    [ -n "$cccd" ] || fail "$key: no CCCD after handle $nh"
    say "$key: service found; notify value $nh (CCCD $cccd), write value $wh"
    gatt "$addr" "$type" --char-write-req -a "$wh" -n "$payload" > "$smoke/$key.write.txt" 2>&1 \
        || fail "$key: write to $wh failed: $(cat "$smoke/$key.write.txt")"
    # Subscribe and listen; gatttool runs until the timeout interrupts it.
    timeout -s INT -k 2 "$listen" stdbuf -oL gatttool -i hci0 -b "$addr" -t "$type" \
        --char-write-req -a "$cccd" -n 0100 --listen > "$smoke/$key.notify.txt" 2>&1
    n=$(grep -c "^Notification handle = $nh " "$smoke/$key.notify.txt")
    say "$key: $n notifications in ${listen}s"
    [ "$n" -ge 10 ] || fail "$key: only $n notifications: $(head -5 "$smoke/$key.notify.txt")"
}

if [ "$mode" = smoke ]; then
    # hcitool checks for SIGINT only when a read() is interrupted, so with a
    # steady stream of reports (and slow output) it may never stop: SIGKILL
    # after a grace period, then disable the scan it may have left enabled.
    timeout -s INT -k 2 4 stdbuf -oL hcitool -i hci0 lescan > "$smoke/lescan.txt" 2>&1
    hcitool -i hci0 cmd 0x08 0x000c 00 00 > /dev/null 2>&1
    say "lescan: $(grep -c ':' "$smoke/lescan.txt") reports from:"
    grep ':' "$smoke/lescan.txt" | sort -u
    imu_addr=$(sed -n 's/.*"imu": {[^}]*"address": "\([^"]*\)".*/\1/p' "$results/peripherals.ready")
    posture_addr=$(sed -n 's/.*"posture": {[^}]*"address": "\([^"]*\)".*/\1/p' "$results/peripherals.ready")
    grep -q "^$imu_addr WT901BLE68" "$smoke/lescan.txt" || fail "lescan did not see WT901BLE68 at $imu_addr"
    grep -q "^$posture_addr Arduino Posture" "$smoke/lescan.txt" || fail "lescan did not see Arduino Posture at $posture_addr"
    say "lescan saw both sensors"

    smoke_sensor imu "$imu_addr" public 0000ffe5-0000-1000-8000-00805f9a34fb \
        0000ffe4-0000-1000-8000-00805f9a34fb 0000ffe9-0000-1000-8000-00805f9a34fb ffaa030b00 5
    smoke_sensor posture "$posture_addr" random 6e400001-b5a3-f393-e0a9-e50e24dcca9e \
        6e400003-b5a3-f393-e0a9-e50e24dcca9e 6e400002-b5a3-f393-e0a9-e50e24dcca9e 70696e670a 5
    finish 0
fi

# --- bridge mode ---------------------------------------------------------------
i=0
until grep -q "bus connected" "$results/record.log" 2>/dev/null; do
    running "$record_pid" || fail "vbt record exited: $(cat "$results/record.log")"
    [ $i -ge 300 ] && fail "vbt record did not connect to the bus in 30 s: $(cat "$results/record.log")"
    sleep 0.1; i=$((i + 1))
done
say "bus and recorder up"

# The bridge journals by default into data/ of its working folder, which is the host's root,
# read-only here: its journal goes to the guest's own tmpfs.
"$bin_dir/sensor-bridge" --station rack-ble --ble witmotion --ble posture --journal /run/vbt-bridge-journal > "$results/bridge.log" 2>&1 &
started bridge $!
bridge_pid=$!
say "sensor-bridge started; waiting up to ${wait_s}s for $imu_min IMU and $posture_min posture readings"

# At least imu_min IMU readings, and well past the drop, so that some come
# after the reconnect.
need_imu=$imu_min
if [ "$imu_drop_after" -gt 0 ] && [ "$need_imu" -lt $((imu_drop_after + 50)) ]; then
    need_imu=$((imu_drop_after + 50))
fi
"$python" "$here/wait_recording.py" --recording "$results/bridge.jsonl" --station rack-ble \
    --imu "$need_imu" --posture "$posture_min" --timeout "$wait_s" --pid "$bridge_pid"
wait_rc=$?
[ "$wait_rc" -eq 2 ] && say "sensor-bridge exited by itself"
stop bridge
[ "$wait_rc" -eq 0 ] || fail "the recording did not reach the wanted readings (wait_recording status $wait_rc)"
finish 0
