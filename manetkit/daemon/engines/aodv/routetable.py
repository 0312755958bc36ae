"""AODV's route table: entries, sequence-number arithmetic and the freshness rule.

Pure data with explicit ``now`` (RFC 3561 sections 2, 6.1, 6.2, 6.7, 6.11); the engine
(:mod:`manetkit.daemon.engines.aodv.routes`) decides what an update means (route-up,
released packets, RERRs). At equal sequence numbers a route is better by its cost, which
the path metric computes (:mod:`manetkit.daemon.engines.shared.metric`; with hop count,
the cost is the hop count, RFC 3561 6.2's rule). Entries are keyed by the destination's packed 4 bytes, since the data
path looks them up straight from the packet bytes.

Bounded (docs/security.md "Bounded state"): at most ``capacity`` entries (``route_table_size``);
a new destination beyond that evicts, among the entries not being repaired, an INVALID
one first (it only keeps a sequence number), then a VALID one never heard of again
since the message that created it (a one-off reverse route, 6.5: what a forged-source
flood makes), then any VALID one; within each group the one whose lifetime ends first
(the least recently used: use refreshes lifetimes, 6.2), then the oldest. Silent like a
lifetime expiry; counted in ``evicted``. Forged RREQs with made-up originators therefore
cannot grow the table, and they churn among themselves rather than push out neighbours
that keep being heard.

The victim is found in amortised O(log n), not by a scan (at 1024 entries a scan cost
~1 ms per forged RREQ): a heap of (group, lifetime, age) snapshots, checked lazily. A
snapshot only ever underestimates its entry (lifetimes grow and entries get confirmed
in place; every change that lowers an entry, invalidation or a reset lifetime, happens
here and pushes a new snapshot), so the top of the heap, once its snapshot is current,
is the entry a scan would pick. Stale snapshots are pushed again or dropped when they
reach the top, and the heap is rebuilt when it holds twice the entries.

Each entry's precursor list (RFC 3561 2: the neighbours a RERR must reach) holds at most
:data:`MAX_PRECURSORS`: beyond, one is dropped (counted ``precursors-evicted``). With
two or more precursors the RERR is broadcast (6.11), so a full list reaches them all.
"""

from __future__ import annotations

import enum
import heapq
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from ipaddress import IPv4Address


class RouteState(enum.StrEnum):
    """RFC 3561 section 2: a route is valid, invalid (kept for its sequence number until
    DELETE_PERIOD), or being repaired locally (6.12)."""

    VALID = "valid"
    INVALID = "invalid"
    REPAIRING = "repairing"


VALID, INVALID, REPAIRING = RouteState.VALID, RouteState.INVALID, RouteState.REPAIRING
MAX_PRECURSORS = 32  # per entry; a RERR to two or more is broadcast anyway (6.11)


def seq_newer(a: int, b: int) -> bool:
    """a is newer than b in signed 32-bit arithmetic (RFC 3561 6.1)."""
    return 0 < ((a - b) & 0xFFFFFFFF) < 0x80000000


def seq_next(a: int) -> int:
    """a + 1, skipping 0 (which means "unknown", RFC 3561 6.1)."""
    return (a + 1) & 0xFFFFFFFF or 1


@dataclass(slots=True, eq=False)
class Route:
    """One route table entry (RFC 3561 section 2 "route table entry" fields)."""

    dst: IPv4Address
    next_hop: IPv4Address
    hops: int
    seq: int
    valid_seq: bool
    expires: float  # VALID: lifetime end; INVALID: deletion time (DELETE_PERIOD)
    state: RouteState = VALID
    precursors: set[IPv4Address] = field(default_factory=set)
    dst_b: bytes = b""
    next_hop_b: bytes = b""
    created: float = 0.0
    confirmed: bool = False  # updated again after the moment it was created (eviction)
    cost: float = -1.0  # by the path metric; -1: the hop count
    order: int = 0  # creation order in its table (eviction's last tie-break)
    used: float = float("-inf")  # when this node last forwarded data over it (local repair)

    def __post_init__(self) -> None:
        self.dst_b = self.dst.packed
        self.next_hop_b = self.next_hop.packed
        if self.cost < 0:
            self.cost = float(self.hops)

    def set_next_hop(self, next_hop: IPv4Address, hops: int, cost: float) -> None:
        self.next_hop, self.next_hop_b, self.hops = next_hop, next_hop.packed, hops
        self.cost = cost


class OwnSequence:
    """This node's own sequence number (RFC 3561 6.1); 0 would mean "unknown"."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 1

    def increment(self) -> int:
        self.value = seq_next(self.value)
        return self.value


# An eviction snapshot: (VALID?, confirmed?, lifetime end, creation order, entry).
_Snap = tuple[bool, bool, float, int, Route]


class RouteTable:
    """The entries of one node, with the 6.2 update rule and 6.11 expiry."""

    def __init__(self, capacity: int = 1024, counters: Counter[str] | None = None) -> None:
        self.capacity = capacity
        self.evicted = 0
        self.counters: Counter[str] = counters if counters is not None else Counter()
        self._routes: dict[bytes, Route] = {}
        self._created = 0
        self._heap: list[_Snap] = []  # eviction order, lazily current (module docstring)

    def __len__(self) -> int:
        return len(self._routes)

    def __iter__(self) -> Iterator[Route]:
        return iter(list(self._routes.values()))

    def get(self, dst: bytes) -> Route | None:
        """The entry for the packed address ``dst`` (any state)."""
        return self._routes.get(dst)

    def valid(self, dst: bytes) -> Route | None:
        """The entry for ``dst`` if it is VALID (the data path's lookup)."""
        r = self._routes.get(dst)
        return r if r is not None and r.state is VALID else None

    def add_precursor(self, r: Route, nb: IPv4Address) -> None:
        """``nb`` uses the route ``r`` (6.2, 6.6.2, 6.7); at most :data:`MAX_PRECURSORS`."""
        p = r.precursors
        if nb in p:
            return
        if len(p) >= MAX_PRECURSORS:
            p.pop()
            self.counters["precursors-evicted"] += 1
        p.add(nb)

    def update(
        self,
        now: float,
        dst: IPv4Address,
        next_hop: IPv4Address,
        hops: int,
        seq: int,
        lifetime: float,
        cost: float | None = None,
    ) -> tuple[Route, RouteState | None] | None:
        """Create or update the route to ``dst`` if the information is fresher (6.2, 6.7).

        Fresher: our number for ``dst`` is unknown, or ``seq`` is newer, or equal with our
        entry invalid or costlier (``cost``: the hop count when None). Returns (entry,
        state before: None when new), or None when nothing changed. The lifetime only
        grows while the entry stays valid.
        """
        if cost is None:
            cost = float(hops)
        r = self._routes.get(dst.packed)
        if r is not None and now > r.created:
            r.confirmed = True
        if r is None:
            r = Route(dst, next_hop, hops, seq, True, now + lifetime, created=now, cost=cost)
            self._insert(r)
            return r, None
        if not (
            not r.valid_seq
            or seq_newer(seq, r.seq)
            or (seq == r.seq and (r.state is not VALID or cost < r.cost))
        ):
            return None
        was = r.state
        r.seq = seq
        r.valid_seq = True
        r.set_next_hop(next_hop, hops, cost)
        t = now + lifetime
        if r.state is not VALID or r.expires < t:
            r.expires = t
        r.state = VALID
        if was is not VALID:
            self._push(r)  # back from a repair (whose snapshot was dropped)
        return r, was

    def touch_neighbour(
        self, now: float, nb: IPv4Address, lifetime: float, cost: float = 1.0
    ) -> tuple[Route, RouteState | None] | tuple[Route, RouteState]:
        """6.5/6.7: a one-hop route to the neighbour that sent a control packet.

        Returns (entry, state before: None when new). A route that was not valid, or
        went through another node, becomes the direct one without a known sequence number
        (our number for it was bumped by us, not by ``nb``).
        """
        r = self._routes.get(nb.packed)
        t = now + lifetime
        if r is not None and now > r.created:
            r.confirmed = True
        if r is None:
            r = Route(nb, nb, 1, 0, False, t, created=now, cost=cost)
            self._insert(r)
            return r, None
        was = r.state
        if r.state is not VALID or r.next_hop != nb:
            if r.state is not VALID:
                r.valid_seq = False
            r.set_next_hop(nb, 1, cost)
            r.state = VALID
            r.expires = t
            self._push(r)  # the lifetime may have shrunk
        elif r.expires < t:
            r.expires = t
        return r, was

    def _insert(self, r: Route) -> None:
        self._make_room()
        self._created += 1
        r.order = self._created
        self._routes[r.dst_b] = r
        self._push(r)

    def _push(self, r: Route) -> None:
        heap = self._heap
        heapq.heappush(heap, (r.state is VALID, r.confirmed, r.expires, r.order, r))
        if len(heap) > 2 * len(self._routes) + 64:
            self._rebuild()

    def _rebuild(self) -> None:
        """Drop every stale snapshot: one current one per entry not under repair."""
        self._heap = [
            (r.state is VALID, r.confirmed, r.expires, r.order, r)
            for r in self._routes.values()
            if r.state is not REPAIRING
        ]
        heapq.heapify(self._heap)

    def _make_room(self) -> None:
        """At capacity: evict an INVALID entry, else an unconfirmed VALID one, else any
        VALID one, the soonest-expiring of the group, then the oldest (never one being
        repaired); amortised O(log n) (module docstring)."""
        if len(self._routes) < self.capacity:
            return
        heap, routes = self._heap, self._routes
        while heap:
            valid, confirmed, expires, order, r = heap[0]
            if routes.get(r.dst_b) is not r or r.state is REPAIRING:
                heapq.heappop(heap)  # gone, or back with a fresh snapshot after its repair
                continue
            now_key = (r.state is VALID, r.confirmed, r.expires)
            if now_key != (valid, confirmed, expires):
                heapq.heapreplace(heap, (*now_key, order, r))  # grew since: look again
                continue
            heapq.heappop(heap)
            del routes[r.dst_b]
            self.evicted += 1
            return
        # Every entry under repair: bounded by the discoveries.

    def invalidate(self, r: Route, delete_at: float) -> None:
        """6.11: invalid, kept (for its sequence number) until ``delete_at``."""
        r.state = INVALID
        r.expires = delete_at
        self._push(r)

    def expire(self, now: float, delete_period: float) -> int:
        """Lifetimes that are over: a VALID entry becomes INVALID with its number bumped
        (6.1 "when the path expires"), an INVALID one is deleted; REPAIRING entries wait
        for their repair. Returns how many valid routes expired."""
        expired = 0
        for key, r in list(self._routes.items()):
            if r.expires > now or r.state is REPAIRING:
                continue
            if r.state is VALID:
                r.state = INVALID
                if r.valid_seq:
                    r.seq = seq_next(r.seq)
                r.precursors.clear()
                r.expires = now + delete_period
                self._push(r)
                expired += 1
            else:
                del self._routes[key]
        return expired

    def next_expiry(self) -> float | None:
        return min((r.expires for r in self._routes.values()), default=None)
