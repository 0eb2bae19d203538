#!/usr/bin/env bash
# Installs what the BLE-in-a-VM test needs, only what is missing (idempotent).
#
#   Debian packages: qemu-system-x86, a Debian 6.1 kernel with its modules
#   (linux-image-amd64), busybox-static, cpio, kmod, bluez (hciconfig, btmon,
#   hcitool, gatttool), python3-venv.
#   A Python venv with bumble pinned, at $BLE_VENV (default <repo>/.build/ble-venv).
#
# As root it installs; otherwise it names what is missing and fails.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

venv=${BLE_VENV:-$repo/.build/ble-venv}
bumble_version=0.0.236

pkg_installed() {
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

apt_packages=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || apt_packages+=(qemu-system-x86)
pkg_installed busybox-static || apt_packages+=(busybox-static)
command -v cpio >/dev/null 2>&1 || apt_packages+=(cpio)
command -v modprobe >/dev/null 2>&1 && command -v depmod >/dev/null 2>&1 || apt_packages+=(kmod)
{ command -v hciconfig && command -v btmon && command -v hcitool; } >/dev/null 2>&1 || apt_packages+=(bluez)
# Debian splits venv's pip bootstrap into python3-venv.
{ [ -x /usr/bin/python3 ] && pkg_installed python3-venv; } || apt_packages+=(python3 python3-venv)
ble_vm_kver >/dev/null 2>&1 || apt_packages+=(linux-image-amd64)

if [ ${#apt_packages[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "ble-vm deps: missing ${apt_packages[*]}; run as root: apt-get install -y --no-install-recommends ${apt_packages[*]}" >&2
        exit 1
    fi
    echo "ble-vm deps: installing ${apt_packages[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # A fresh machine's package lists may be missing or stale: refresh once.
    apt-get update -qq >/dev/null
    # The kernel package runs the machine's initramfs generator in its
    # postinst; the VM boots from its own initramfs, so that step is only
    # time spent.  INITRD=No is honoured by initramfs-tools' kernel hook.
    INITRD=No apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Use-Pty=0 "${apt_packages[@]}" >/dev/null
fi

if ! kver=$(ble_vm_kver); then
    echo "ble-vm deps: no kernel with Bluetooth modules and a /boot/vmlinuz-<version> was found after install" >&2
    exit 1
fi

if ! "$venv/bin/python" -c "import bumble, sys; from importlib.metadata import version; sys.exit(version('bumble') != '$bumble_version')" >/dev/null 2>&1; then
    echo "ble-vm deps: creating $venv with bumble==$bumble_version"
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "bumble==$bumble_version"
fi

echo "ble-vm deps: ok (kernel $kver, $(qemu-system-x86_64 --version | head -n1), bumble $bumble_version in $venv)"
