"""SMR's path strategy for DSR: split multipath / backup-path routing, sans-I/O.

Lee & Gerla's Split Multipath Routing (ICC'01) as Lim, Xu & Gerla use it ("TCP
Performance over Multipath Routing in Mobile Ad Hoc Networks", ICC'03). DSR consults
it through :class:`~manetkit.daemon.engines.dsr.strategy.PathStrategy`; where SMR's
rules differ from RFC 4728's:

- III-A (SMR) an intermediate node forwards a *duplicate* request when it came over a
  different incoming link than the copies it forwarded and its hop count is no larger
  than the first copy's (:meth:`SmrStrategy.duplicate_request`).
- III-A, V-B the destination replies at once to the first copy (shortest delay), waits
  ``reply_wait_ms`` collecting copies, then replies along ``paths - 1`` more chosen by
  the mode's criterion (:func:`~manetkit.daemon.engines.smr.pathselect.select_replies`).
- IV/V the source keeps ``paths`` routes per destination
  (:class:`~manetkit.daemon.engines.smr.pathselect.PathSet`): ``concurrent`` sends
  packets round robin over them; ``backup1`` makes a shorter second reply the primary;
  ``backup2`` never swaps. On a break the source moves to a backup at once
  (:class:`~manetkit.events.PathSwitch`) and asks again only when every path is
  broken (``rediscover: all-broken``, III-A's better scheme) or at any break
  (``any-broken``, III-A's first scheme).
- A failure prediction (Atra) moves the primaries through that link to a backup before
  the link breaks (:meth:`SmrStrategy.predicted_failure`).
- With a link-quality path metric (docs/linkquality.md) the backup is chosen by path
  cost, not hops: at the destination, at the source (``backup1``'s cheaper reply
  becomes the primary) and after a break (the cheapest backup takes over).

Destinations the source never asked for (neighbours learnt by link sensing, routes
learnt from forwarded packets) keep DSR's cache lookup; so does a destination whose
paths all broke, until the new discovery's replies arrive.
"""

from __future__ import annotations

import heapq
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from typing import Any

from manetkit import events as ev
from manetkit.daemon.engines.base import Outbox
from manetkit.daemon.engines.dsr.cache import Path, RouteCache
from manetkit.daemon.engines.dsr.links import LinkView
from manetkit.daemon.engines.dsr.requesttable import RequestTable
from manetkit.daemon.engines.dsr.routes import route_up
from manetkit.daemon.engines.dsr.signalling import Signalling
from manetkit.daemon.engines.shared.metric import HopCount
from manetkit.daemon.engines.smr.config import SmrConfig
from manetkit.daemon.engines.smr.pathselect import Cost, Mode, PathSet, Switch, select_replies

REMEMBERED = 256  # request copies / answered requests remembered (bounded state)
MAX_COPY_FORWARDS = 8  # copies of one request forwarded (distinct previous hops)

Ask = Callable[[float, IPv4Address, str], None]


@dataclass(slots=True)
class Copies:
    """Copies of one Route Request at its target (V-B: first answered at once)."""

    first: Path  # initiator first, this node last
    later: list[Path] = field(default_factory=list)


class SmrStrategy:
    def __init__(
        self,
        address: IPv4Address,
        config: SmrConfig,
        cache: RouteCache,
        table: RequestTable,
        links: LinkView,
        signalling: Signalling,
        out: Outbox,
        counters: Counter[str],
        ask: Ask,
        forget_routes: Callable[[], None],
    ) -> None:
        self.address = address
        self.smr = config
        self.cache = cache
        self.table = table
        self.links = links
        self.signalling = signalling
        self.out = out
        self.counters = counters
        self.ask = ask  # a propagating request now, counted by the name given
        self.forget_routes = forget_routes  # routes changed outside DSR's cache
        # Round robin picks a route per packet: no per-destination route memo.
        self.memo_routes = config.mode is not Mode.CONCURRENT
        self.sets: dict[IPv4Address, PathSet[IPv4Address]] = {}
        self.asked: dict[IPv4Address, float] = {}  # when this node last asked, per target
        # Destinations whose paths all broke: the next packet to one asks again.
        self.rebuild: OrderedDict[IPv4Address, None] = OrderedDict()
        self.firsts: OrderedDict[tuple[IPv4Address, int], tuple[int, set[IPv4Address]]] = (
            OrderedDict()
        )
        self.copies: dict[tuple[IPv4Address, int], Copies] = {}
        self.answered: OrderedDict[tuple[IPv4Address, int], None] = OrderedDict()
        self._timers: list[tuple[float, int, tuple[IPv4Address, int]]] = []
        self._seq = 0
        # The path metric when it is not hop count (SMR's rules then use it for hops).
        self._metric = None if isinstance(cache.metric, HopCount) else cache.metric

    def _cost(self, now: float) -> Cost[IPv4Address] | None:
        """Path cost by the metric at ``now``; None with hop count (SMR's own rules)."""
        m = self._metric
        return None if m is None else (lambda p: m.path_cost(now, p))

    # ------------------------------------------------------------ intermediate nodes
    def duplicate_request(
        self, now: float, init: IPv4Address, ident: int, prev: IPv4Address, hops: int
    ) -> bool:
        """SMR's duplicate rule (Lee & Gerla; Lim/Xu/Gerla III-A): forward a later copy
        if it came from a neighbour no forwarded copy came from and has no more hops
        than the first copy."""
        key = (init, ident)
        first = self.firsts.get(key)
        if first is None:
            if self.table.seen_else_remember(init, ident):
                return True  # forgotten here but still in DSR's request table
            self.firsts[key] = (hops, {prev})
            if len(self.firsts) > REMEMBERED:
                self.firsts.popitem(last=False)
                self.counters["smr-firsts-evicted"] += 1
            return False
        first_hops, prevs = first
        if prev in prevs or hops > first_hops:
            return True
        if len(prevs) >= MAX_COPY_FORWARDS:
            # Bounded: forged previous hops cannot make this node rebroadcast one
            # request without end (DSR's forwarding rate limit does not count copies).
            self.counters["smr-copies-capped"] += 1
            return True
        prevs.add(prev)
        self.counters["smr-duplicate-forwarded"] += 1
        return False

    # ------------------------------------------------------------ the destination
    def answer_request(
        self, now: float, init: IPv4Address, ident: int, addrs: tuple[IPv4Address, ...]
    ) -> None:
        """Reply at once to the first copy, collect the others for ``reply_wait_ms``
        (Lim/Xu/Gerla V-B.1: "replies RREP packet immediately upon receiving the first
        RREQ packet ... waits certain duration of time ... and learns all possible
        paths")."""
        key = (init, ident)
        path = (init, *addrs, self.address)
        c = self.copies.get(key)
        if c is not None:
            if len(c.later) >= REMEMBERED:
                self.counters["smr-copies-dropped"] += 1  # bounded: a flood of copies
            elif path != c.first and path not in c.later:
                c.later.append(path)
            self.counters["smr-copies-collected"] += 1
            return
        if key in self.answered:
            self.counters["smr-copies-late"] += 1
            return
        self.signalling.reply(now, init, path[1:], tuple(reversed(addrs)))
        self.counters["smr-first-replies"] += 1
        self.answered[key] = None
        if len(self.answered) > REMEMBERED:
            self.answered.popitem(last=False)
            self.counters["smr-answered-evicted"] += 1
        if self.smr.paths < 2:
            return
        if len(self.copies) >= REMEMBERED:
            self.counters["smr-copies-dropped"] += 1  # bounded: answered, not collected
            return
        self.copies[key] = Copies(path)
        self._seq += 1
        due = now + self.smr.reply_wait_ms / 1000
        heapq.heappush(self._timers, (due, self._seq, key))

    def _select_and_reply(self, now: float, key: tuple[IPv4Address, int]) -> None:
        c = self.copies.pop(key, None)
        if c is None:
            return
        init = key[0]
        chosen = select_replies(
            self.smr.mode, c.first, c.later, self.smr.paths - 1, self._cost(now)
        )
        for p in chosen:
            self.signalling.reply(now, init, p[1:], tuple(reversed(p[1:-1])))
            self.counters["smr-extra-replies"] += 1

    # ------------------------------------------------------------ the source
    def request_sent(self, now: float, target: IPv4Address) -> None:
        if target not in self.asked and len(self.asked) >= REMEMBERED:
            del self.asked[min(self.asked, key=self.asked.__getitem__)]
            self.counters["smr-asked-evicted"] += 1
        self.asked[target] = now

    def reply_received(self, now: float, route: Path, fresh: float) -> None:
        """A reply to one of this node's requests: offer its path to the destination's
        set (a reply nobody here asked for, e.g. a gratuitous one, only feeds the
        cache, as in DSR)."""
        dst = route[-1]
        asked = self.asked.get(dst)
        window = self.smr.reply_wait_ms / 1000 + self.smr.max_request_period_s
        if asked is None or now - asked > window:
            self.counters["smr-replies-unasked"] += 1
            return
        if len(set(route)) != len(route) or len(route) - 1 > self.smr.max_route_length:
            self.counters["smr-replies-invalid"] += 1
            return
        if self.links.held and self.links.unheld_prefix(now, route, fresh) != route:
            self.counters["smr-replies-held"] += 1
            return
        ps = self.sets.get(dst)
        if ps is None:
            ps = self.sets[dst] = PathSet(self.smr.mode, self.smr.paths)
        added, sw = ps.offer(now, route, self._cost(now))
        if added:
            self.forget_routes()
            self.counters["smr-paths-added"] += 1
            self.out.notify(route_up(route, primary=ps.primary == route))
        if sw is not None and sw.old is not None:
            self._switched(dst, sw, sw.reason)

    def route_for(self, now: float, dst: IPv4Address) -> Path | None:
        """The set's primary (round robin in ``concurrent``); with no set, DSR's cache.

        Once every path to ``dst`` broke (``after_all_broken: discover``), the next
        packet to it sends a propagating request (SMR's rediscovery when all routes are
        invalid, Lim/Xu/Gerla III-A) and rides a cached route, if any, until the
        replies bring a new primary and backup. Without it the source would use DSR's
        cache (routes learnt from forwarded or overheard packets) for good: it holds
        no backup and never asks again while some cached route works, and backup path
        routing ends at the first time both paths broke.
        """
        ps = self.sets.get(dst)
        if ps is not None:
            route = ps.route()
            if route is not None:
                return route
        if dst in self.rebuild:
            del self.rebuild[dst]
            self.ask(now, dst, "smr-all-broken-rediscoveries")
        route = self.cache.lookup(now, dst)
        if route is not None and dst in self.asked:
            self.counters["smr-cache-routes"] += 1  # a destination we asked for, no set
        return route

    def links_cut(self, now: float, a: IPv4Address, b: IPv4Address, reason: str) -> None:
        """Drop the paths through a-b; a broken primary gives way to a backup at once
        (V: "switch from current path to another alternative path rapidly")."""
        self._expire_paths(now)  # never switch to an alternate that has gone stale
        for dst, ps in list(self.sets.items()):
            gone, sw = ps.cut(a, b, self._cost(now))
            if not gone:
                continue
            self.forget_routes()
            if sw is not None:
                # Keep the route cache agreeing, so DSR reports no route-down for dst.
                self.cache.add(now, sw.new)
                self._switched(dst, sw, reason)
            if not ps.entries:
                del self.sets[dst]
                self.counters["smr-all-broken"] += 1
                if self.smr.after_all_broken == "discover":
                    self.rebuild[dst] = None
                    if len(self.rebuild) > REMEMBERED:
                        self.rebuild.popitem(last=False)
                        self.counters["smr-rebuild-evicted"] += 1
            elif self.smr.rediscover == "any-broken":
                self.ask(now, dst, "smr-rediscoveries")
            elif sw is not None:
                self.counters["smr-discoveries-avoided"] += 1

    def predicted_failure(self, now: float, neighbour: IPv4Address) -> bool:
        """Atra predicts the link to ``neighbour`` will break: every primary over it
        moves to a backup that avoids it, before any packet is lost."""
        self._expire_paths(now)
        moved = False
        for dst, ps in self.sets.items():
            sw = ps.avoid(self.address, neighbour)
            if sw is not None:
                self.cache.add(now, sw.new)
                self._switched(dst, sw, sw.reason)
                moved = True
        if moved:
            self.forget_routes()
        return moved

    def _switched(self, dst: IPv4Address, sw: Switch[IPv4Address], reason: str) -> None:
        self.counters["smr-switches"] += 1
        self.out.notify(
            ev.PathSwitch(
                dst=str(dst),
                from_path=tuple(str(a) for a in sw.old) if sw.old is not None else None,
                to_path=tuple(str(a) for a in sw.new),
                reason=reason,
            )
        )

    def _expire_paths(self, now: float) -> None:
        """Drop alternates older than ``max_path_age_s`` (:meth:`PathSet.expire`), and
        the same paths from the route cache."""
        max_age = self.smr.max_path_age_s
        if max_age is None:
            return
        for ps in self.sets.values():
            for path in ps.expire(now, max_age):
                self.counters["smr-paths-expired"] += 1
                # DSR's cache got it from the same reply: the all-broken fallback to the
                # cache must not try it either, unless something used it since.
                self.cache.forget(path, unused_since=now - max_age)

    # ------------------------------------------------------------ timers, status
    def handle_timer(self, now: float) -> None:
        while self._timers and self._timers[0][0] <= now:
            _, _, key = heapq.heappop(self._timers)
            self._select_and_reply(now, key)
        self._expire_paths(now)

    def get_timer(self) -> float | None:
        due = [self._timers[0][0]] if self._timers else []
        if self.smr.max_path_age_s is not None:
            due += [ps.next_expiry(self.smr.max_path_age_s) for ps in self.sets.values()]
        return min((t for t in due if t is not None), default=None)

    def status(self, now: float) -> dict[str, Any]:
        return {
            "smr": {
                "mode": str(self.smr.mode),
                "paths": self.smr.paths,
                "rediscover": self.smr.rediscover,
                "max_path_age_s": self.smr.max_path_age_s,
                "after_all_broken": self.smr.after_all_broken,
            },
            # One flat row per route (the status CLI prints it as a table like "paths").
            "multipath": [
                {
                    "dst": str(dst),
                    "role": "primary" if i == 0 else "backup",
                    "hops": len(e.path) - 1,
                    "age_s": round(now - e.added, 3),
                    "path": [str(a) for a in e.path],
                }
                for dst, ps in sorted(self.sets.items())
                for i, e in enumerate(ps.entries)
            ],
        }
