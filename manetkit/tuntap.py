"""TUN and TAP devices through ``/dev/net/tun`` (linux/if_tun.h; kernel doc networking/tuntap).

The daemon's ``mesh0`` is a TUN (IPv4 packets), a lab radio's ``radio0`` a TAP (Ethernet
frames). Both are opened without packet info (IFF_NO_PI) and are not persistent: the
device disappears when the fd is closed, so a process that dies leaves none behind.
"""

from __future__ import annotations

import fcntl
import os
import struct

# linux/if_tun.h
TUNSETIFF = 0x400454CA
TUNSETOFFLOAD = 0x400454D0
TUNSETCARRIER = 0x400454E2
IFF_TUN = 0x0001
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000


def _open(name: str, flags: int, offload: bool) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", name.encode(), flags | IFF_NO_PI))
        if not offload:
            # No TUN_F_* flags: the kernel finishes checksums and segments before handing
            # us a frame, so what we read is a complete <= MTU frame.
            fcntl.ioctl(fd, TUNSETOFFLOAD, 0)
    except OSError:
        os.close(fd)
        raise
    return fd


def open_tun(name: str) -> int:
    """Create (or attach to) TUN ``name``; returns a non-blocking fd."""
    return _open(name, IFF_TUN, offload=True)


def open_tap(name: str) -> int:
    """Create TAP ``name`` with no offloads; returns a non-blocking fd."""
    return _open(name, IFF_TAP, offload=False)


def set_carrier(fd: int, on: bool) -> None:
    """Carrier of a TUN/TAP device up or down (what ``ip link`` shows as NO-CARRIER)."""
    fcntl.ioctl(fd, TUNSETCARRIER, struct.pack("i", 1 if on else 0))
