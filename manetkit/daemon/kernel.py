"""Kernel glue: the only module that talks netlink (pyroute2), like babeld's kernel_netlink.c.

What the daemon changes, and undoes on exit (also on SIGTERM/SIGINT, see shell.py):
  - ``mesh0``: the node's mesh address (/32), MTU, up; IPv6 off (the mesh is IPv4 only,
    and router solicitations would only be counted and dropped);
  - a route for the mesh prefix via ``mesh0`` with the mesh address as preferred source;
  - the radio interface is brought up if it was down (it carries no IP: docs/architecture.md);
  - the radio interface is made promiscuous (IFF_PROMISC) when the engine wants
    overheard frames (DSR route shortening), and put back as it was on exit.
A stale ``mesh0`` (a persistent TUN or any leftover link of that name after a crash) is
deleted before the daemon creates its own.
"""

from __future__ import annotations

import contextlib
import logging
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

log = logging.getLogger(__name__)

IFF_PROMISC = 0x100  # linux/if.h


class KernelGlue:
    def __init__(
        self, tun_name: str, address: IPv4Address, prefix: IPv4Network, mtu: int, radio: str
    ) -> None:
        self.tun_name = tun_name
        self.address = address
        self.prefix = prefix
        self.mtu = mtu
        self.radio = radio
        self._ipr = IPRoute()
        self._route_added = False
        self._addr_added = False
        self._tun_index: int | None = None
        self._promisc_set: int | None = None  # radio index we made promiscuous

    def _index(self, name: str) -> int | None:
        found = self._ipr.link_lookup(ifname=name)
        return found[0] if found else None

    def remove_stale_tun(self) -> bool:
        """Delete a leftover link named like our TUN (True if there was one)."""
        idx = self._index(self.tun_name)
        if idx is None:
            return False
        log.warning("removing stale %s (index %d) left by an earlier run", self.tun_name, idx)
        self._ipr.link("del", index=idx)
        return True

    def check_radio(self) -> None:
        """The radio interface must exist; bring it up (it carries no IP address)."""
        idx = self._index(self.radio)
        if idx is None:
            raise LookupError(f"radio interface {self.radio!r} does not exist")
        link = self._ipr.get_links(idx)[0]
        if not link["flags"] & 1:  # IFF_UP
            self._ipr.link("set", index=idx, state="up")

    def set_radio_promiscuous(self) -> bool:
        """Turn IFF_PROMISC on on the radio (undone by :meth:`restore_radio`).

        On 802.11 this makes mac80211 pass up unicasts between other stations of the
        IBSS (docs/daemon.md, "Overhearing"); the lab radio polls the same flag.
        Returns False if it was already on (then it is left on at exit).
        """
        idx = self._index(self.radio)
        if idx is None:
            raise LookupError(f"radio interface {self.radio!r} does not exist")
        if self._ipr.get_links(idx)[0]["flags"] & IFF_PROMISC:
            return False
        self._ipr.link("set", index=idx, flags=IFF_PROMISC, mask=IFF_PROMISC)
        self._promisc_set = idx
        return True

    def restore_radio(self) -> None:
        """Undo :meth:`set_radio_promiscuous` (a vanished interface needs nothing)."""
        idx, self._promisc_set = self._promisc_set, None
        if idx is None:
            return
        try:
            self._ipr.link("set", index=idx, flags=0, mask=IFF_PROMISC)
        except NetlinkError as exc:
            log.debug("restore radio: %s", exc)

    def radio_mtu(self) -> int:
        idx = self._index(self.radio)
        if idx is None:
            raise LookupError(f"radio interface {self.radio!r} does not exist")
        return int(self._ipr.get_links(idx)[0].get("IFLA_MTU") or 1500)

    def configure_tun(self) -> None:
        """Address, MTU, up, and the prefix route; call after the TUN fd exists."""
        idx = self._index(self.tun_name)
        if idx is None:
            raise LookupError(f"{self.tun_name} vanished before it could be configured")
        self._tun_index = idx
        _disable_ipv6(self.tun_name)
        self._ipr.link("set", index=idx, mtu=self.mtu)
        self._ipr.addr("add", index=idx, address=str(self.address), prefixlen=32)
        self._addr_added = True
        self._ipr.link("set", index=idx, state="up")
        self._ipr.route(
            "replace",
            dst=str(self.prefix.network_address),
            dst_len=self.prefix.prefixlen,
            oif=idx,
            prefsrc=str(self.address),
        )
        self._route_added = True

    def undo(self) -> None:
        """Remove what configure_tun added (the TUN itself goes with its fd)."""
        idx = self._tun_index
        if idx is None:
            return
        try:
            if self._route_added:
                self._ipr.route(
                    "del",
                    dst=str(self.prefix.network_address),
                    dst_len=self.prefix.prefixlen,
                    oif=idx,
                )
            if self._addr_added:
                self._ipr.addr("del", index=idx, address=str(self.address), prefixlen=32)
        except NetlinkError as exc:
            # ENODEV/ESRCH: already gone with the device; nothing left to undo.
            log.debug("undo: %s", exc)
        self._route_added = self._addr_added = False
        self._tun_index = None

    def tun_exists(self) -> bool:
        return self._index(self.tun_name) is not None

    def close(self) -> None:
        self._ipr.close()


def _disable_ipv6(ifname: str) -> None:
    path = Path("/proc/sys/net/ipv6/conf") / ifname / "disable_ipv6"
    # A kernel without IPv6 has nothing to disable.
    with contextlib.suppress(OSError):
        path.write_text("1")
