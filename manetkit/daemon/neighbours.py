"""Who is one hop away: mesh address <-> MAC, signal, last heard.

Filled by the engines (which know, from the protocol, which address sent a frame) and
by link sensing; read by the shell to address frames. Pure data, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address


@dataclass(slots=True)
class Neighbour:
    address: IPv4Address
    mac: bytes
    last_heard: float
    signal_dbm: float | None = None
    up: bool = True


class NeighbourTable:
    def __init__(self) -> None:
        self._by_addr: dict[IPv4Address, Neighbour] = {}
        self._by_mac: dict[bytes, Neighbour] = {}
        # Bumped whenever an address <-> MAC mapping changes, so the shell's hot-path
        # cache (keyed by int address, far cheaper to hash than IPv4Address) can tell.
        self.version = 0

    def learn(
        self, now: float, address: IPv4Address, mac: bytes, signal_dbm: float | None = None
    ) -> Neighbour:
        """Record that ``address`` is reachable at ``mac`` (heard just now)."""
        n = self._by_addr.get(address)
        if n is None or n.mac != mac:
            if n is not None:
                self._by_mac.pop(n.mac, None)
            n = Neighbour(address, mac, now, signal_dbm)
            self._by_addr[address] = n
            self._by_mac[mac] = n
            self.version += 1
        else:
            n.last_heard = now
            if signal_dbm is not None:
                n.signal_dbm = signal_dbm
        return n

    def mac_of(self, address: IPv4Address) -> bytes | None:
        n = self._by_addr.get(address)
        return n.mac if n else None

    def address_of(self, mac: bytes) -> IPv4Address | None:
        n = self._by_mac.get(mac)
        return n.address if n else None

    def get(self, address: IPv4Address) -> Neighbour | None:
        return self._by_addr.get(address)

    def forget(self, address: IPv4Address) -> None:
        n = self._by_addr.pop(address, None)
        if n is not None:
            self._by_mac.pop(n.mac, None)
            self.version += 1

    def __iter__(self):
        return iter(list(self._by_addr.values()))

    def __len__(self) -> int:
        return len(self._by_addr)
