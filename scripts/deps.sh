#!/usr/bin/env bash
# Installs what vbt needs beyond the Swift toolchain, only when missing.
# Idempotent. As root on Debian/Ubuntu it installs; otherwise it prints the
# command to run and fails.
set -euo pipefail

apt_packages=()
pkg-config --version >/dev/null 2>&1 || apt_packages+=(pkg-config)
pkg-config --exists libzmq 2>/dev/null || apt_packages+=(libzmq3-dev)
pkg-config --exists bluez 2>/dev/null || apt_packages+=(libbluetooth-dev)
pkg-config --exists sqlite3 2>/dev/null || apt_packages+=(libsqlite3-dev)
pkg-config --exists zlib 2>/dev/null || apt_packages+=(zlib1g-dev)  # gzip-compressed recordings
pkg-config --exists libpq 2>/dev/null || apt_packages+=(libpq-dev)  # the chain store's client (vbt-uplink, vbt chain)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || apt_packages+=(postgresql)  # the chain test's own server
command -v tmux >/dev/null 2>&1 || apt_packages+=(tmux)  # vbt watch's test runs it in a real terminal
command -v nm >/dev/null 2>&1 || apt_packages+=(binutils)  # the layering test reads the binaries' symbols
command -v ip >/dev/null 2>&1 || apt_packages+=(iproute2)  # the multi-host test: a network namespace per host
command -v nft >/dev/null 2>&1 || apt_packages+=(nftables)  # the partition test drops a station's packets
command -v systemd-analyze >/dev/null 2>&1 || apt_packages+=(systemd)  # the deploy test checks the units with it
command -v systemd-nspawn >/dev/null 2>&1 || apt_packages+=(systemd-container)  # the systemd test boots the units in it
command -v chromium >/dev/null 2>&1 || apt_packages+=(chromium)  # the coach console's tests drive a real headless browser
command -v chromedriver >/dev/null 2>&1 || apt_packages+=(chromium-driver)
command -v pdftoppm >/dev/null 2>&1 || apt_packages+=(poppler-utils)  # the report test turns vbt report's PDF into a picture
command -v eslint >/dev/null 2>&1 || apt_packages+=(eslint)  # make lint checks the console's scripts with it
# The export test opens vbt's CSV files in a real spreadsheet (headless, no desktop, no recommends).
lean_packages=()
command -v soffice >/dev/null 2>&1 || lean_packages+=(libreoffice-calc-nogui)

if [ ${#apt_packages[@]} -gt 0 ] || [ ${#lean_packages[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "deps: installing ${apt_packages[*]} ${lean_packages[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        [ ${#apt_packages[@]} -eq 0 ] || apt-get install -y -qq "${apt_packages[@]}" >/dev/null
        [ ${#lean_packages[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends "${lean_packages[@]}" >/dev/null
    else
        echo "deps: missing ${apt_packages[*]} ${lean_packages[*]}; run: sudo apt-get install -y ${apt_packages[*]} ${lean_packages[*]}" >&2
        exit 1
    fi
fi

python=${PYTHON:-python3}
py_packages=()
$python -c 'import jsonschema, referencing' 2>/dev/null || py_packages+=(jsonschema)
$python -c 'import zmq' 2>/dev/null || py_packages+=(pyzmq)
$python -c 'import pytest' 2>/dev/null || py_packages+=(pytest)
$python -c 'import numpy, scipy' 2>/dev/null || py_packages+=(numpy scipy)
$python -c 'import mpmath' 2>/dev/null || py_packages+=(mpmath)
$python -c 'import selenium' 2>/dev/null || py_packages+=(selenium)
$python -c 'import tinycss2' 2>/dev/null || py_packages+=(tinycss2)  # make lint parses the console's style sheets with it
if [ ${#py_packages[@]} -gt 0 ]; then
    echo "deps: installing Python test tools ${py_packages[*]}"
    $python -m pip install --quiet "${py_packages[@]}" 2>/dev/null \
        || $python -m pip install --quiet --break-system-packages "${py_packages[@]}" \
        || { echo "deps: could not install ${py_packages[*]}; run: $python -m pip install ${py_packages[*]}" >&2; exit 1; }
fi
# The BLE end-to-end test's VM: QEMU, a stock kernel with Bluetooth modules, Bumble.
bash "$(dirname "$0")/../tests/ble-vm/deps.sh"

echo "deps: ok (libzmq $(pkg-config --modversion libzmq), bluez $(pkg-config --modversion bluez), sqlite $(pkg-config --modversion sqlite3))"
