"""Who is one hop away: mesh address <-> MAC, signal, last heard.

Filled by the engines (which know, from the protocol, which address sent a frame) and
by link sensing; read by the shell to address frames. Pure data, no I/O.

Bounded (docs/security.md "Bounded state"): at most ``capacity`` entries
(``max_neighbours`` in the daemon config). A new address beyond that evicts the entry
heard least recently (counted in ``evicted``), so frames with forged source addresses
cannot grow the table; every real neighbour is heard again within a hello interval.
The entries are kept in the order they were last heard, so the victim is the first
one, found in O(1) (a scan per forged frame cost ~1 ms at 1024 entries).
Configured (``static_neighbours``, :meth:`NeighbourTable.pin`) entries are never evicted
and never remapped: a frame claiming a configured address from another MAC, or another
address from a configured MAC, changes nothing (counted in ``refused``); the
configuration is the one source of those bindings.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from ipaddress import IPv4Address


@dataclass(slots=True)
class Neighbour:
    address: IPv4Address
    mac: bytes
    last_heard: float
    signal_dbm: float | None = None
    up: bool = True


DEFAULT_CAPACITY = 1024


class NeighbourTable:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"neighbour table capacity {capacity} must be >= 1")
        self.capacity = capacity
        self.evicted = 0  # entries pushed out by a new address at capacity
        self.refused = 0  # attempts to remap a configured address or MAC
        self._by_addr: OrderedDict[IPv4Address, Neighbour] = OrderedDict()  # last heard last
        self._by_mac: dict[bytes, Neighbour] = {}
        self._pinned: set[IPv4Address] = set()
        self._pinned_macs: set[bytes] = set()
        # Bumped whenever an address <-> MAC mapping changes, so the shell's hot-path
        # cache (keyed by int address, far cheaper to hash than IPv4Address) can tell.
        self.version = 0

    def learn(
        self, now: float, address: IPv4Address, mac: bytes, signal_dbm: float | None = None
    ) -> Neighbour:
        """Record that ``address`` is reachable at ``mac`` (heard just now); a binding
        that contradicts a configured one is refused (the configured entry returned)."""
        if self._pinned:
            pinned = self._contradicts_pin(address, mac)
            if pinned is not None:
                self.refused += 1
                return pinned
        return self._bind(now, address, mac, signal_dbm)

    def _bind(
        self, now: float, address: IPv4Address, mac: bytes, signal_dbm: float | None = None
    ) -> Neighbour:
        n = self._by_addr.get(address)
        if n is None or n.mac != mac:
            if n is not None:
                self._by_mac.pop(n.mac, None)
            elif len(self._by_addr) >= self.capacity:
                self._evict()
            n = Neighbour(address, mac, now, signal_dbm)
            self._by_addr[address] = n
            self._by_addr.move_to_end(address)
            self._by_mac[mac] = n
            self.version += 1
        else:
            n.last_heard = now
            self._by_addr.move_to_end(address)
            if signal_dbm is not None:
                n.signal_dbm = signal_dbm
        return n

    def pin(self, address: IPv4Address, mac: bytes) -> Neighbour:
        """A configured neighbour (``static_neighbours``): never evicted or remapped."""
        n = self._bind(0.0, address, mac)
        self._pinned.add(address)
        self._pinned_macs.add(mac)
        return n

    def _contradicts_pin(self, address: IPv4Address, mac: bytes) -> Neighbour | None:
        """The configured entry ``address`` at ``mac`` would contradict, else None."""
        n = self._by_addr.get(address)
        if address in self._pinned and n is not None and n.mac != mac:
            return n
        if mac in self._pinned_macs:
            m = self._by_mac.get(mac)
            if m is not None and m.address != address:
                return m
        return None

    def _evict(self) -> None:
        """Drop the entry heard least recently: the first one not configured (a
        configured one met on the way goes to the back: amortised O(1))."""
        by_addr = self._by_addr
        for _ in range(len(by_addr)):
            victim = next(iter(by_addr.values()))
            if victim.address not in self._pinned:
                break
            by_addr.move_to_end(victim.address)
        else:
            return  # only configured entries: the configuration bounds them
        del by_addr[victim.address]
        if self._by_mac.get(victim.mac) is victim:
            del self._by_mac[victim.mac]
        self.version += 1
        self.evicted += 1

    def mac_of(self, address: IPv4Address) -> bytes | None:
        n = self._by_addr.get(address)
        return n.mac if n else None

    def address_of(self, mac: bytes) -> IPv4Address | None:
        n = self._by_mac.get(mac)
        return n.address if n else None

    def get(self, address: IPv4Address) -> Neighbour | None:
        return self._by_addr.get(address)

    def forget(self, address: IPv4Address) -> None:
        if address in self._pinned:
            return  # configured: only the configuration removes it
        n = self._by_addr.pop(address, None)
        if n is not None:
            self._by_mac.pop(n.mac, None)
            self.version += 1

    def __iter__(self):
        return iter(list(self._by_addr.values()))

    def __len__(self) -> int:
        return len(self._by_addr)
