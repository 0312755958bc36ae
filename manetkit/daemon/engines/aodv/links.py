"""What an AODV node believes about its neighbours (RFC 3561 6.8, 6.9).

- Heard from: a neighbour whose Hellos this node has heard counts as lost after
  ``allowed_hello_loss`` of its Hello intervals without any packet from it (6.9; any
  packet counts as hearing it). Bounded like the neighbour table.
- Unidirectional links (6.8): a neighbour that did not acknowledge a RREP that asked for
  a RREP-ACK within NEXT_HOP_WAIT, or to which a RREP could not be delivered, is
  blacklisted for BLACKLIST_TIMEOUT: its RREQs are ignored.
- Admission: whether a link a RREQ or Hello arrived over may build routes
  (:mod:`manetkit.daemon.admission`).
- The daemon's shared :class:`~manetkit.daemon.neighbours.NeighbourTable` (address to
  MAC, for the shell).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from ipaddress import IPv4Address

from manetkit.daemon.admission import LinkAdmission
from manetkit.daemon.engines.aodv.deadline import Deadline
from manetkit.daemon.neighbours import NeighbourTable


class LinkView:
    def __init__(
        self,
        neighbours: NeighbourTable,
        blacklist_s: float,
        admission: LinkAdmission,
        deadline: Deadline,
        counters: Counter[str],
    ) -> None:
        self.neighbours = neighbours
        self.blacklist_s = blacklist_s
        self.admission = admission
        self.deadline = deadline
        self.counters = counters
        self.heard_from: dict[IPv4Address, tuple[float, float]] = {}  # last heard, window
        self.blacklist: dict[IPv4Address, float] = {}
        self.ack_wait: dict[IPv4Address, float] = {}

    # -- hearing neighbours (6.9)
    def heard(self, now: float, nb: IPv4Address) -> None:
        """A packet from ``nb``: it is not lost."""
        h = self.heard_from.get(nb)
        if h is not None:
            self.heard_from[nb] = (now, h[1])

    def heard_mac(self, now: float, mac: bytes) -> None:
        """A packet from the neighbour with MAC ``mac`` (data: no address in it)."""
        nb = self.neighbours.address_of(mac)
        h = self.heard_from.get(nb) if nb is not None else None
        if h is not None:
            self.heard_from[nb] = (now, h[1])  # type: ignore[index]

    def hello(self, now: float, nb: IPv4Address, window: float) -> None:
        """A Hello from ``nb``: lost after ``window`` without hearing it."""
        if nb not in self.heard_from and len(self.heard_from) >= self.neighbours.capacity:
            # Bounded like the neighbour table: the one heard least recently goes.
            del self.heard_from[min(self.heard_from, key=lambda n: self.heard_from[n][0])]
            self.counters["hello-evicted"] += 1
        self.heard_from[nb] = (now, window)
        self.deadline.lower(now + window)

    def lost(self, now: float) -> Iterator[IPv4Address]:
        """The neighbours not heard within their window (forgotten as they are given)."""
        for nb, (last, window) in list(self.heard_from.items()):
            if last + window <= now:
                del self.heard_from[nb]
                self.counters["hello-loss"] += 1
                yield nb

    def forget(self, nb: IPv4Address) -> None:
        self.heard_from.pop(nb, None)

    # -- unidirectional links (6.8)
    def expect_ack(self, now: float, nb: IPv4Address, wait: float) -> None:
        self.ack_wait[nb] = now + wait
        self.deadline.lower(now + wait)

    def acked(self, nb: IPv4Address) -> None:
        self.counters["rrep-ack-received"] += 1
        self.ack_wait.pop(nb, None)

    def unidirectional(self, now: float, nb: IPv4Address) -> None:
        self.blacklist[nb] = now + self.blacklist_s
        self.counters["blacklisted"] += 1

    def blacklisted(self, now: float, nb: IPv4Address) -> bool:
        """6.8: RREQs from ``nb`` are ignored while it is blacklisted."""
        until = self.blacklist.get(nb)
        if until is None:
            return False
        if until > now:
            self.counters["rreq-blacklisted"] += 1
            return True
        del self.blacklist[nb]
        return False

    def admits(self, now: float, nb: IPv4Address, rssi: float | None) -> bool:
        """May the link from ``nb`` build routes? Counted when refused."""
        if self.admission.admits(now, nb, rssi):
            return True
        self.counters["link-not-admitted"] += 1
        return False

    def handle_timer(self, now: float) -> None:
        for nb, t in list(self.ack_wait.items()):
            if t <= now:
                # 6.8: no RREP-ACK: the link towards nb is (probably) unidirectional.
                del self.ack_wait[nb]
                self.unidirectional(now, nb)

    def purge(self, now: float) -> None:
        for nb in [nb for nb, t in self.blacklist.items() if t <= now]:
            del self.blacklist[nb]

    def earliest(self, t: float) -> float:
        """``t``, or an earlier deadline of these tables."""
        for v in self.ack_wait.values():
            t = min(t, v)
        for last, window in self.heard_from.values():
            t = min(t, last + window)
        return t
