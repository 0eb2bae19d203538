#!/usr/bin/env bash
# Installs vbt on a gym server or a station computer (deploy/README.md):
#
#   deploy/install.sh server                 the bus, recorder, detector(s), posture evaluator, notifier, coach console
#   deploy/install.sh station rack-01 ...    sensor bridges for these stations
#
# Options (before the role): --root DIR installs into DIR instead of / (a
# package build, or the tests); --bin-dir DIR takes the programs from DIR
# instead of building them (`make install` builds them first with the static
# Swift standard library, so a station computer needs no Swift toolchain).
#
# It installs the programs into /usr/local/bin, vbt's shell completions (bash,
# zsh, fish) under /usr/local/share, the units and vbt.target into
# /etc/systemd/system, the `vbt` system user (sysusers.d), /etc/vbt/vbt.env
# (from vbt.env.example, kept when it exists) and, on a server, the
# installation's keys in /etc/vbt/keys (made once: a key per service and
# `vbt keys add` for each station and coach). A station needs its key copied
# from the server (printed at the end). Then: systemctl enable --now vbt.target.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=/
bin_dir=
while [ $# -gt 0 ]; do
    case $1 in
        --root) root=$2; shift 2 ;;
        --bin-dir) bin_dir=$2; shift 2 ;;
        *) break ;;
    esac
done
role=${1:-}
shift || true
case $role in
    server) programs=(vbt vbt-bus session-recorder rep-detector posture-evaluator notifier coach-console); units=(vbt-bus session-recorder rep-detector posture-evaluator notifier coach-console) ;;
    station) [ $# -gt 0 ] || { echo "install: name the stations: deploy/install.sh station rack-01 [rack-02 ...]" >&2; exit 2; }
             programs=(vbt sensor-bridge); units=() ;;
    *) echo "usage: deploy/install.sh [--root DIR] [--bin-dir DIR] server | station NAME..." >&2; exit 2 ;;
esac
[ -n "$bin_dir" ] || { echo "install: --bin-dir DIR (make install builds the programs and passes it)" >&2; exit 2; }
[ "$root" = / ] && [ "$(id -u)" -ne 0 ] && { echo "install: run as root (sudo make install ...)" >&2; exit 1; }

install -d -m 0755 "$root/usr/local/bin" "$root/etc/systemd/system" "$root/etc/sysusers.d" "$root/usr/local/share/doc/vbt/deploy"
# Stripped: the symbols are half of a static binary's size.
for program in "${programs[@]}"; do install -s -m 0755 "$bin_dir/$program" "$root/usr/local/bin/$program"; done
# vbt's shell completions, written by swift-argument-parser from its command tree (bash-completion,
# zsh and fish look in these folders under /usr/local/share).
completions=$root/usr/local/share
install -d -m 0755 "$completions/bash-completion/completions" "$completions/zsh/site-functions" "$completions/fish/vendor_completions.d"
"$bin_dir/vbt" --generate-completion-script bash > "$completions/bash-completion/completions/vbt"
"$bin_dir/vbt" --generate-completion-script zsh > "$completions/zsh/site-functions/_vbt"
"$bin_dir/vbt" --generate-completion-script fish > "$completions/fish/vendor_completions.d/vbt.fish"
chmod 0644 "$completions/bash-completion/completions/vbt" "$completions/zsh/site-functions/_vbt" "$completions/fish/vendor_completions.d/vbt.fish"
install -m 0644 "$here/systemd/vbt.target" "$root/etc/systemd/system/vbt.target"
for unit in "${units[@]}"; do install -m 0644 "$here/systemd/$unit.service" "$root/etc/systemd/system/$unit.service"; done
[ "$role" = station ] && install -m 0644 "$here/systemd/sensor-bridge@.service" "$root/etc/systemd/system/sensor-bridge@.service"
[ "$role" = server ] && install -m 0644 "$here/systemd/rep-detector@.service" "$root/etc/systemd/system/rep-detector@.service"
install -m 0644 "$here/sysusers.d/vbt.conf" "$root/etc/sysusers.d/vbt.conf"
install -m 0644 "$here/README.md" "$root/usr/local/share/doc/vbt/deploy/README.md"
install -d -m 0755 "$root/usr/local/share/doc/vbt/deploy/grafana"
install -m 0644 "$here/grafana/vbt-gym.json" "$root/usr/local/share/doc/vbt/deploy/grafana/vbt-gym.json"
systemd-sysusers --root="$root" "$root/etc/sysusers.d/vbt.conf"

install -d -m 0755 "$root/etc/vbt"
[ -e "$root/etc/vbt/vbt.env" ] || install -m 0644 "$here/vbt.env.example" "$root/etc/vbt/vbt.env"
# How many rep-detectors split the gym (vbt.env's VBT_DETECTOR_SHARDS; 1 when it is not set).
shards=$(sed -n 's/^VBT_DETECTOR_SHARDS=//p' "$root/etc/vbt/vbt.env" | tail -n 1)
shards=${shards:-1}
[[ $shards =~ ^[1-9][0-9]*$ ]] || { echo "install: VBT_DETECTOR_SHARDS=$shards in /etc/vbt/vbt.env: write a whole number from 1, e.g. 2" >&2; exit 2; }
keys=$root/etc/vbt/keys
vbt=$root/usr/local/bin/vbt
if [ "$role" = server ]; then
    if [ ! -e "$keys/server.key_secret" ]; then
        "$vbt" keys init "$keys"
        for unit in session-recorder rep-detector posture-evaluator notifier coach-console; do "$vbt" keys add "$keys" "$unit" --role service >/dev/null; done
        echo "install: the installation's keys are in /etc/vbt/keys; add each station's with"
        echo "         vbt keys add /etc/vbt/keys rack-01 --role bridge --station rack-01"
    fi
    uid=$(awk -F: '$1 == "vbt" { print $3 }' "$root/etc/passwd")
    # The programs read their keys as vbt; nobody else can.
    chown -R "$uid:$uid" "$keys"
    chmod -R go-rwx "$keys"
else
    install -d -m 0750 "$keys" "$keys/clients"
    for station in "$@"; do
        [ -e "$keys/clients/$station.key_secret" ] || echo "install: copy clients/$station.key_secret from the server's /etc/vbt/keys to /etc/vbt/keys/clients/ (and server.key to /etc/vbt/keys/)"
        install -d "$root/etc/systemd/system/vbt.target.wants"
        ln -sf /etc/systemd/system/sensor-bridge@.service "$root/etc/systemd/system/vbt.target.wants/sensor-bridge@$station.service"
    done
    uid=$(awk -F: '$1 == "vbt" { print $3 }' "$root/etc/passwd")
    chown -R "$uid:$uid" "$keys"
fi
if [ "$role" = server ]; then
    wants=$root/etc/systemd/system/vbt.target.wants
    install -d "$wants"
    # One detector, or VBT_DETECTOR_SHARDS of them: the other arrangement's links go.
    rm -f "$wants/rep-detector.service" "$wants"/rep-detector@*.service
    for unit in "${units[@]}"; do
        if [ "$unit" = rep-detector ] && [ "$shards" -gt 1 ]; then
            for ((k = 1; k <= shards; k++)); do ln -sf /etc/systemd/system/rep-detector@.service "$wants/rep-detector@$k.service"; done
        else
            ln -sf "/etc/systemd/system/$unit.service" "$wants/$unit.service"
        fi
    done
fi
install -d "$root/etc/systemd/system/multi-user.target.wants"
ln -sf /etc/systemd/system/vbt.target "$root/etc/systemd/system/multi-user.target.wants/vbt.target"
echo "install: $role installed under $root; start it with: systemctl daemon-reload && systemctl start vbt.target"
