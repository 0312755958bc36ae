"""Atra's proactive route errors, PRE (Anantharaman et al. section IV-A), sans-I/O.

"Each node in Atra maintains a cache of the source ids of TCP connections that have used
a particular link in the past T seconds (T = 1 s). When a link failure is detected, all
sources that have used the link" get a route error at once, not only the source of the
packet whose transmission failed (RFC 4728 8.3.4 / RFC 3561 6.11 send just that one).

Bounded (docs/security.md): at most ``MAX_SOURCES`` sources per link (past that, the
expired ones go, then the one seen least recently: ``evicted``).
"""

from __future__ import annotations

from ipaddress import IPv4Address

MAX_SOURCES = 64


class PreTable:
    """Per outgoing link (next hop), the sources whose packets crossed it recently."""

    def __init__(self, window_s: float = 1.0) -> None:
        self.window_s = window_s
        self._links: dict[IPv4Address, dict[IPv4Address, float]] = {}
        self.errors_sent = 0
        self.evicted = 0

    def used(self, now: float, next_hop: IPv4Address, source: IPv4Address) -> None:
        """A packet from ``source`` was forwarded (or sent) to ``next_hop`` at ``now``."""
        srcs = self._links.setdefault(next_hop, {})
        srcs[source] = now
        if len(srcs) > MAX_SOURCES:
            self._purge(now, next_hop)
            while len(srcs) > MAX_SOURCES:
                del srcs[min(srcs, key=srcs.__getitem__)]
                self.evicted += 1

    def sources(self, now: float, next_hop: IPv4Address) -> list[IPv4Address]:
        """Sources that used the link to ``next_hop`` in the last T seconds, oldest first."""
        self._purge(now, next_hop)
        srcs = self._links.get(next_hop, {})
        return sorted(srcs, key=lambda s: srcs[s])

    def link_failed(self, now: float, next_hop: IPv4Address) -> list[IPv4Address]:
        """The link broke: every recent source (the table forgets the link)."""
        out = self.sources(now, next_hop)
        self._links.pop(next_hop, None)
        return out

    def _purge(self, now: float, next_hop: IPv4Address) -> None:
        srcs = self._links.get(next_hop)
        if srcs is None:
            return
        for s in [s for s, t in srcs.items() if t < now - self.window_s]:
            del srcs[s]
        if not srcs:
            del self._links[next_hop]

    def __len__(self) -> int:
        return sum(len(v) for v in self._links.values())
