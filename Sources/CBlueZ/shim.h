#ifndef CBLUEZ_SHIM_H
#define CBLUEZ_SHIM_H
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>
#include <bluetooth/l2cap.h>

// ioctl request numbers are built by macros Swift cannot import; wrap them.

/// Brings adapter `dev` up (needs CAP_NET_ADMIN). 0, or -1 with errno.
static inline int cbluez_dev_up(int ctl, int dev) { return ioctl(ctl, HCIDEVUP, dev); }

/// Reads adapter `dev`'s info. 0, or -1 with errno (ENODEV: no such adapter).
static inline int cbluez_dev_info(int ctl, int dev, struct hci_dev_info *info) {
    info->dev_id = (uint16_t)dev;
    return ioctl(ctl, HCIGETDEVINFO, (void *)info);
}

/// Whether the info says the adapter is up.
static inline int cbluez_dev_is_up(const struct hci_dev_info *info) { return hci_test_bit(HCI_UP, &info->flags); }
#endif
