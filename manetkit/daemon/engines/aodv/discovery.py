"""AODV route discovery at the node that wants a route (RFC 3561 6.3, 6.4; 6.12's
local repair searches the same way).

- 6.1 the node increments its own sequence number before a route discovery.
- 6.4 expanding ring search: TTL_START, + TTL_INCREMENT per RING_TRAVERSAL_TIME
  without a reply, beyond TTL_THRESHOLD NET_DIAMETER; then RREQ_RETRIES network-wide
  attempts with binary exponential backoff; then the discovery gives up.
- 6.3 RREQ_RATELIMIT: a RREQ over the limit waits until the oldest of the last second
  ages out.
- 6.5 the (originator, RREQ ID) pairs this node sent or processed, remembered for
  PATH_DISCOVERY_TIME (:class:`RreqSeen`), so a RREQ is processed once.
- Bounded (docs/security.md): a discovery runs only for a destination with packets in
  the send buffer (or under local repair, or asked for by the event socket's
  ``discover``), and at most :data:`MAX_SEARCHES` at once; beyond, a new one is refused
  and counted (``discoveries-refused``). Local repairs are bounded by the route table.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from typing import Any

from manetkit.daemon.engines.aodv.config import AodvConfig
from manetkit.daemon.engines.aodv.deadline import Deadline
from manetkit.daemon.engines.aodv.routetable import VALID, OwnSequence, RouteTable
from manetkit.daemon.engines.aodv.signalling import Signalling
from manetkit.daemon.engines.shared.ratelimit import RateLimit
from manetkit.daemon.wire import aodv

RreqKey = tuple[IPv4Address, int]  # (originator, RREQ ID)
MAX_SEARCHES = 1024  # discoveries and local repairs running at once


class RreqSeen:
    """(originator, RREQ ID) -> until when a copy is a duplicate (6.5). Bounded.

    Every entry lives PATH_DISCOVERY_TIME from when it was last written, and an entry
    written again moves to the end, so the ordered dict is in expiry order: expired
    pairs leave from the front and, when full, the oldest goes, each in O(1) (a forged
    RREQ flood made the table rebuild itself on every request once it was full).
    """

    def __init__(self, size: int, lifetime: float, counters: Counter[str]) -> None:
        self.size = size
        self.lifetime = lifetime  # PATH_DISCOVERY_TIME
        self.counters = counters
        self.entries: OrderedDict[RreqKey, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self.entries)

    def own(self, now: float, key: RreqKey) -> None:
        """A RREQ this node originates: its own copies are duplicates."""
        self._write(now, key)

    def first(self, now: float, key: RreqKey) -> bool:
        """True (and remembered) if no copy of ``key`` was processed recently."""
        seen = self.entries.get(key)
        if seen is not None and seen > now:
            return False
        if len(self.entries) >= self.size:
            self._bound(now)
        self._write(now, key)
        return True

    def _write(self, now: float, key: RreqKey) -> None:
        self.entries[key] = now + self.lifetime
        self.entries.move_to_end(key)

    def _bound(self, now: float) -> None:
        """The table is full: forget expired pairs, else the oldest."""
        self._expire(now)
        while len(self.entries) >= self.size:
            self.entries.popitem(last=False)
            self.counters["rreq-seen-evicted"] += 1

    def purge(self, now: float) -> None:
        """The timer's clean-up: a small table is left as it is."""
        if len(self.entries) > 64:
            self._expire(now)

    def _expire(self, now: float) -> None:
        """Forget the expired pairs (at the front)."""
        entries = self.entries
        while entries:
            key, until = next(iter(entries.items()))
            if until > now:
                return
            del entries[key]


@dataclass(slots=True)
class Search:
    """A pending route discovery (6.4) or local repair (6.12) for one destination."""

    dst: IPv4Address
    ttl: int
    deadline: float
    retries: int = 0  # network-wide (TTL = NET_DIAMETER) attempts made after the first
    repair: bool = False
    old_hops: int = 0  # local repair: hop count of the broken route
    started: float = 0.0
    ttls: list[int] = field(default_factory=list)  # TTLs of the RREQs sent, for status
    waiting_ratelimit: bool = False


class Discovery:
    def __init__(
        self,
        address: IPv4Address,
        config: AodvConfig,
        table: RouteTable,
        signalling: Signalling,
        seq: OwnSequence,
        seen: RreqSeen,
        deadline: Deadline,
        counters: Counter[str],
        gave_up: Callable[[float, IPv4Address], None],
        repair_failed: Callable[[float, Search], None],
        recompute: Callable[[], None],
    ) -> None:
        self.address = address
        self.config = config
        self.table = table
        self.signalling = signalling
        self.seq = seq
        self.seen = seen
        self.deadline = deadline
        self.counters = counters
        self.gave_up = gave_up  # RREQ_RETRIES network-wide RREQs went unanswered
        self.repair_failed = repair_failed  # a local repair found no route
        self.recompute = recompute  # the engine's exact deadline
        self.searches: dict[IPv4Address, Search] = {}
        self.rreq_id = 0
        self.rreq_limit = RateLimit(config.rreq_ratelimit)
        self.net_traversal = config.net_traversal_time_ms / 1000

    def full(self) -> bool:
        """No room for another discovery (:data:`MAX_SEARCHES`)."""
        return len(self.searches) >= MAX_SEARCHES

    def start(
        self, now: float, dst: IPv4Address, repair: bool = False, ttl: int | None = None
    ) -> None:
        if not repair and dst not in self.searches and self.full():
            self.counters["discoveries-refused"] += 1
            return  # a local repair always starts: its route waits for it (6.12)
        c = self.config
        if ttl is None:
            r = self.table.get(dst.packed)
            # 6.4: start from the last known hop count when there is one.
            ttl = min(r.hops + c.ttl_increment, c.net_diameter) if r is not None else c.ttl_start
        d = Search(dst, ttl, now, repair=repair, started=now)
        if repair:
            old = self.table.get(dst.packed)
            assert old is not None  # a repair starts from the broken entry
            d.old_hops = old.hops
        self.searches[dst] = d
        self._send(now, d)

    def new_request(self, now: float) -> int:
        """A new RREQ ID (6.1: after our own sequence number is incremented)."""
        self.seq.increment()
        self.rreq_id = (self.rreq_id + 1) & 0xFFFFFFFF
        self.seen.own(now, (self.address, self.rreq_id))
        return self.rreq_id

    def _send(self, now: float, d: Search) -> None:
        c = self.config
        if not self.rreq_limit.take(now):
            # RREQ_RATELIMIT: wait until the oldest of the last second ages out.
            d.waiting_ratelimit = True
            d.deadline = self.rreq_limit.reopens_at()
            self.counters["rreq-ratelimited"] += 1
            self.deadline.lower(d.deadline)
            return
        d.waiting_ratelimit = False
        ident = self.new_request(now)
        r = self.table.get(d.dst.packed)
        known = r is not None and (r.valid_seq or r.seq != 0)
        msg = aodv.RREQ(
            hop_count=0,
            rreq_id=ident,
            dest=d.dst,
            dest_seq=r.seq if known and r is not None else 0,
            orig=self.address,
            orig_seq=self.seq.value,
            gratuitous=c.gratuitous_rrep,
            dest_only=c.destination_only,
            unknown_seq=not known,
        )
        if d.ttl >= c.net_diameter:
            wait = self.net_traversal * (2**d.retries)  # 6.4: binary exponential backoff
        else:
            wait = c.ring_traversal_time_ms(d.ttl) / 1000
        d.deadline = now + wait
        d.ttls.append(d.ttl)
        self.deadline.lower(d.deadline)
        self.counters["rreq-sent"] += 1
        self.signalling.broadcast(now, msg, d.ttl)

    def handle_timer(self, now: float) -> None:
        for d in [d for d in self.searches.values() if d.deadline <= now]:
            self._timeout(now, d)

    def _timeout(self, now: float, d: Search) -> None:
        c = self.config
        if d.waiting_ratelimit:
            self._send(now, d)
            return
        if d.repair:
            del self.searches[d.dst]
            self.repair_failed(now, d)
            return
        if d.ttl < c.net_diameter:
            d.ttl += c.ttl_increment
            if d.ttl > c.ttl_threshold:
                d.ttl = c.net_diameter
            self._send(now, d)
            return
        if d.retries < c.rreq_retries:
            d.retries += 1
            self._send(now, d)
            return
        # 6.3: give up: the packets waiting for this destination are dropped.
        del self.searches[d.dst]
        self.counters["discoveries-failed"] += 1
        self.gave_up(now, d.dst)

    def rediscover(self, now: float, dst: IPv4Address) -> bool:
        """6.3: originate a new RREQ (new RREQ ID) for ``dst`` now, e.g. for an ELFN probe.

        Only when a discovery is pending or there is no valid route, and only within
        RREQ_RATELIMIT: a request over the limit is refused (False), never queued, so the
        pending discovery's own schedule stays as it was. The ring TTL and the retry
        count are kept and the next scheduled step is never postponed: a probing sender
        does not use up RREQ_RETRIES faster.
        """
        if dst == self.address:
            return False
        d = self.searches.get(dst)
        r = self.table.get(dst.packed)
        if d is None and r is not None and r.state == VALID:
            return False
        if (d is not None and d.waiting_ratelimit) or self.rreq_limit.full(now):
            self.counters["rediscover-ratelimited"] += 1
            return False
        if d is None and self.full():
            self.counters["discoveries-refused"] += 1
            return False
        self.counters["rediscover-rreqs"] += 1
        if d is None:
            self.start(now, dst)
        else:
            due = d.deadline
            self._send(now, d)
            # An extra RREQ: it never postpones the discovery's own next step.
            if now < due < d.deadline:
                d.deadline = due
                self.recompute()
        return True

    def earliest(self, t: float) -> float:
        for d in self.searches.values():
            t = min(t, d.deadline)
        return t

    def status(self, now: float) -> list[dict[str, Any]]:
        return [
            {
                "target": str(d.dst),
                "ttls": list(d.ttls),
                "retries": d.retries,
                "repair": d.repair,
                "since_s": round(now - d.started, 3),
                "next_in_s": round(d.deadline - now, 3),
            }
            for d in self.searches.values()
        ]
