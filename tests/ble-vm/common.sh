# Sourced by the ble-vm scripts; defines helpers only.

# Prints the version of an installed kernel the VM can boot: one with
# /boot/vmlinuz-<version> and the virtual-HCI driver among its modules.
# $BLE_VM_KVER overrides the choice. Fails if there is none.
ble_vm_kver() {
    local kver best=""
    if [ -n "${BLE_VM_KVER:-}" ]; then
        [ -r "/boot/vmlinuz-$BLE_VM_KVER" ] && [ -d "/lib/modules/$BLE_VM_KVER" ] || return 1
        echo "$BLE_VM_KVER"
        return 0
    fi
    [ -d /lib/modules ] || return 1
    for kver in $(ls -1 /lib/modules | sort -V); do
        [ -r "/boot/vmlinuz-$kver" ] || continue
        [ -n "$(find "/lib/modules/$kver/kernel/drivers/bluetooth" -name 'hci_vhci.ko*' 2>/dev/null | head -n1)" ] || continue
        best=$kver
    done
    [ -n "$best" ] || return 1
    echo "$best"
}
