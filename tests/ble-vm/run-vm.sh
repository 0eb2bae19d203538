#!/usr/bin/env bash
# Boots the BLE test VM (Debian's kernel + the initramfs from
# build-initramfs.sh) with the host root shared read-only and RESULTS shared
# writable, runs COMMAND inside a chroot of the host root, and exits with
# COMMAND's status.
#
#   run-vm.sh [--timeout SECONDS] [--initramfs-dir DIR] RESULTS COMMAND [ARG...]
#
# RESULTS (created if missing) is mounted at the same path in the guest.
# The guest console goes to RESULTS/console.log; COMMAND's status to
# RESULTS/guest.status. Exit status: COMMAND's, or 124 if the VM hit the
# timeout, or 125 if the VM ended without reporting a status.
#
# Environment: BLE_VM_ACCEL=tcg|kvm forces the accelerator (default: kvm only
# when a hardware KVM module, kvm_intel or kvm_amd, is loaded; a nested or
# paravirtual /dev/kvm hangs a stock kernel). BLE_VM_MEM (MiB, default 1024),
# BLE_VM_SMP (default 2), BLE_VM_VERBOSE=1 also copies the console to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

timeout_s=180
initramfs_dir=$repo/.build/ble-vm
while [ $# -gt 0 ]; do
    case "$1" in
        --timeout) timeout_s=$2; shift 2 ;;
        --initramfs-dir) initramfs_dir=$2; shift 2 ;;
        --) shift; break ;;
        -*) echo "run-vm: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
[ $# -ge 2 ] || { echo "usage: $0 [--timeout S] [--initramfs-dir DIR] RESULTS COMMAND [ARG...]" >&2; exit 2; }
results=$1; shift

command -v qemu-system-x86_64 >/dev/null 2>&1 || { echo "run-vm: qemu-system-x86_64 missing; run 'make deps'" >&2; exit 1; }
initrd=$initramfs_dir/initramfs.cpio.gz
[ -s "$initrd" ] || { echo "run-vm: $initrd missing; run tests/ble-vm/build-initramfs.sh $initramfs_dir" >&2; exit 1; }
kver=$(cat "$initramfs_dir/kver")
kernel=/boot/vmlinuz-$kver
[ -r "$kernel" ] || { echo "run-vm: $kernel not readable; run 'make deps'" >&2; exit 1; }

mkdir -p "$results"
results=$(cd "$results" && pwd)
case "$results" in *[[:space:]]*) echo "run-vm: RESULTS must not contain spaces: $results" >&2; exit 2 ;; esac
rm -f "$results/guest.status" "$results/console.log"

# The script init runs in the chroot: COMMAND with its arguments, quoted.
run=$results/guest.run
{
    echo "# written by run-vm.sh"
    printf 'cd %q || exit 126\n' "$PWD"
    printf 'exec'
    printf ' %q' "$@"
    printf '\n'
} > "$run"

accel=${BLE_VM_ACCEL:-}
if [ -z "$accel" ]; then
    if { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; } && [ -w /dev/kvm ]; then
        accel=kvm
    else
        accel=tcg
    fi
fi
case "$accel" in
    kvm) accel_args=(-accel kvm -cpu host) ;;
    # -cpu max breaks the guest's ECDH self-test; qemu64 is safe.
    tcg) accel_args=(-accel tcg -cpu qemu64) ;;
    *) echo "run-vm: BLE_VM_ACCEL must be tcg or kvm" >&2; exit 2 ;;
esac

qemu=(
    qemu-system-x86_64
    -machine q35 "${accel_args[@]}"
    -m "${BLE_VM_MEM:-1024}" -smp "${BLE_VM_SMP:-2}"
    -nodefaults -no-user-config -nographic -no-reboot
    -serial stdio -net none
    -kernel "$kernel" -initrd "$initrd"
    -append "console=ttyS0 panic=-1 loglevel=4 vbt.results=$results vbt.run=$run"
    -fsdev "local,id=hostroot,path=/,readonly=on,security_model=none,multidevs=remap"
    -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
    -fsdev "local,id=results,path=$results,security_model=none,multidevs=remap"
    -device virtio-9p-pci,fsdev=results,mount_tag=results
)

echo "run-vm: booting $kernel ($accel), results in $results, timeout ${timeout_s}s" >&2
start=$(date +%s)
set +e
if [ "${BLE_VM_VERBOSE:-0}" = 1 ]; then
    timeout -k 5 "$timeout_s" "${qemu[@]}" </dev/null 2>&1 | tee "$results/console.log" >&2
    qemu_rc=${PIPESTATUS[0]}
else
    timeout -k 5 "$timeout_s" "${qemu[@]}" </dev/null >"$results/console.log" 2>&1
    qemu_rc=$?
fi
set -e
elapsed=$(( $(date +%s) - start ))

if [ "$qemu_rc" -eq 124 ] || [ "$qemu_rc" -eq 137 ]; then
    echo "run-vm: the VM did not finish within ${timeout_s}s (see $results/console.log)" >&2
    exit 124
fi
if [ ! -s "$results/guest.status" ]; then
    echo "run-vm: the VM ended (qemu status $qemu_rc, ${elapsed}s) without a guest status; see $results/console.log" >&2
    tail -n 30 "$results/console.log" >&2 || true
    exit 125
fi
status=$(cat "$results/guest.status")
echo "run-vm: guest finished with status $status in ${elapsed}s" >&2
exit "$status"
