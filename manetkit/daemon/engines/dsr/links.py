"""What a DSR node believes about its links (RFC 4728 8.3; Holland & Vaidya section 7).

- Neighbours: the address and MAC of every node a frame came from, in the daemon's
  shared :class:`~manetkit.daemon.neighbours.NeighbourTable` (the shell maps next hops
  to MACs through it).
- Held links ("negative information", Holland & Vaidya section 7): a link seen to fail
  (``TxFailed``/``LinkDown``, or named by a received Route Error) is not cached again,
  whatever packet, request or reply carries it, until link sensing reports the
  neighbour up again (``LinkUp``, links where this node is the first node) or
  ``broken_link_hold_s`` passes. Packets the source sent before it heard the Route
  Error still carry the old route; without the hold the node that detected the break
  re-learnt the dead link from them. Bounded (forged Route Errors can name any link).
- Admission: whether a link a control packet arrived over may build routes
  (:mod:`manetkit.daemon.admission`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from ipaddress import IPv4Address

from manetkit.daemon.admission import LinkAdmission
from manetkit.daemon.engines.dsr.cache import Path
from manetkit.daemon.neighbours import NeighbourTable

MAX_HELD = 1024  # held links; at the bound the one whose hold ends first goes


@dataclass(slots=True)
class HeldLink:
    """A link seen to fail: not cached again until ``until`` (or LinkUp if ``local``)."""

    since: float
    until: float
    local: bool  # this node detected the break (it is the link's first node)


class LinkView:
    def __init__(
        self,
        address: IPv4Address,
        neighbours: NeighbourTable,
        hold_s: float,
        admission: LinkAdmission,
        counters: Counter[str],
    ) -> None:
        self.address = address
        self.neighbours = neighbours
        self.hold_s = hold_s
        self.admission = admission
        self.counters = counters
        self.held: dict[frozenset[IPv4Address], HeldLink] = {}

    # -- neighbours
    def heard(
        self, now: float, neighbour: IPv4Address, mac: bytes | None, rssi: float | None
    ) -> None:
        """A frame from ``neighbour`` arrived from ``mac`` (None: not known)."""
        if mac is not None:
            self.neighbours.learn(now, neighbour, mac, rssi)

    def address_of(self, mac: bytes | None) -> IPv4Address | None:
        return self.neighbours.address_of(mac) if mac else None

    def admits(self, now: float, neighbour: IPv4Address, rssi: float | None) -> bool:
        """May the link from ``neighbour`` build routes? Counted when refused."""
        if self.admission.admits(now, neighbour, rssi):
            return True
        self.counters["link-not-admitted"] += 1
        return False

    # -- held links
    def hold(self, now: float, a: IPv4Address, b: IPv4Address, local: bool) -> None:
        """Remember that link a-b failed (either direction, like the cache's links)."""
        k = frozenset((a, b))
        old = self.held.get(k)
        if old is None and len(self.held) >= MAX_HELD:
            # Bounded (forged Route Errors name any link): the hold that ends first goes.
            del self.held[min(self.held, key=lambda h: self.held[h].until)]
            self.counters["held-links-evicted"] += 1
        self.held[k] = HeldLink(
            now,
            now + self.hold_s,
            local or (old is not None and old.local and now < old.until),
        )

    def link_up(self, neighbour: IPv4Address) -> None:
        """Link sensing saw ``neighbour`` again: the link may be cached again."""
        if self.held.pop(frozenset((self.address, neighbour)), None) is not None:
            self.counters["held-link-up"] += 1

    def unheld_prefix(self, now: float, path: Path, fresh: float) -> Path:
        """``path`` cut before its first held link. ``fresh``: the route answers a
        request this node sent at that time, so a link held (by another node's Route
        Error) before then has been crossed since and is released; a link this node
        saw fail itself waits for LinkUp or the hold time."""
        held = self.held
        for i in range(len(path) - 1):
            k = frozenset((path[i], path[i + 1]))
            h = held.get(k)
            if h is None:
                continue
            if now >= h.until or (not h.local and h.since < fresh):
                del held[k]
                continue
            self.counters["held-link-refused"] += 1
            return path[: i + 1]
        return path

    def bounds(self) -> dict[str, dict[str, int]]:
        nb = self.neighbours
        return {
            "neighbours": {"size": len(nb), "limit": nb.capacity, "evicted": nb.evicted},
            "held_links": {
                "size": len(self.held),
                "limit": MAX_HELD,
                "evicted": self.counters["held-links-evicted"],
            },
        }
