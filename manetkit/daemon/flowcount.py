"""Packets and bytes per mesh address: what this node's own applications sent to each
destination (read from ``mesh0``) and what it delivered to them from each source
(written to ``mesh0``). ``manetkit status`` reports them (``flows``); two readings give a
flow's send rate at its source and its delivered rate at its destination, which the lab
map shows beside the flow's path.

Bounded like every table the daemon keeps (docs/security.md): at ``capacity`` addresses
the oldest entry is dropped and counted.
"""

from __future__ import annotations

from ipaddress import IPv4Address

CAPACITY = 256


class FlowCounter:
    """Per 4-byte IPv4 address: [packets, bytes]. ``add`` is on the data path: one dict
    lookup and two additions per packet."""

    __slots__ = ("_counts", "capacity", "evicted")

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._counts: dict[bytes, list[int]] = {}
        self.capacity = capacity
        self.evicted = 0

    def add(self, address: bytes, length: int) -> None:
        c = self._counts.get(address)
        if c is None:
            if len(self._counts) >= self.capacity:
                del self._counts[next(iter(self._counts))]
                self.evicted += 1
            self._counts[address] = [1, length]
        else:
            c[0] += 1
            c[1] += length

    def __len__(self) -> int:
        return len(self._counts)

    def to_json(self) -> dict[str, list[int]]:
        """``{"10.42.0.5": [packets, bytes]}``."""
        return {str(IPv4Address(a)): list(c) for a, c in self._counts.items()}
