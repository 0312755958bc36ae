"""SMR: split multipath / backup-path routing on top of DSR, sans-I/O.

Lee & Gerla's Split Multipath Routing (ICC'01) as Lim, Xu & Gerla use it ("TCP
Performance over Multipath Routing in Mobile Ad Hoc Networks", ICC'03). The engine *is* a
:class:`~manetkit.daemon.engines.dsr.DsrEngine`: same wire format (RFC 4728 options),
same route cache, send buffer, salvaging, Route Errors and TCP-BuS; it overrides only
DSR's named extension points where SMR's rules differ:

- III-A no cached replies: ``cache_replies`` must stay off (refused in the config).
- III-A (SMR) an intermediate node forwards a *duplicate* request when it came over a
  different incoming link than the copies it forwarded and its hop count is no larger
  than the first copy's (:meth:`SmrEngine._request_seen`).
- III-A, V-B the destination replies at once to the first copy (shortest delay), waits
  ``reply_wait_ms`` collecting copies, then replies along ``paths - 1`` more chosen by
  the mode's criterion (:func:`~manetkit.daemon.engines.smr.pathselect.select_replies`).
- IV/V the source keeps ``paths`` routes per destination
  (:class:`~manetkit.daemon.engines.smr.pathselect.PathSet`): ``concurrent`` sends packets
  round robin over them; ``backup1`` makes a shorter second reply the primary;
  ``backup2`` never swaps. On a break the source moves to a backup at once
  (:class:`~manetkit.events.PathSwitch`) and asks again only when every path is
  broken (``rediscover: all-broken``, III-A's better scheme) or at any break
  (``any-broken``, III-A's first scheme).
- A failure prediction (Atra, :meth:`SmrEngine.link_predicted_to_fail`) moves the
  primaries through that link to a backup before the link breaks.

Destinations the source never asked for (neighbours learnt by link sensing, routes
learnt from forwarded packets) keep DSR's cache lookup; so does a destination whose
paths all broke, until the new discovery's replies arrive.
"""

from __future__ import annotations

import heapq
import random
from collections import OrderedDict
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from typing import Any, Literal

from pydantic import Field, model_validator

from manetkit import events as ev
from manetkit.daemon.engines.base import Notify
from manetkit.daemon.engines.dsr.cache import Path
from manetkit.daemon.engines.dsr.engine import DsrConfig, DsrEngine, _Discovery
from manetkit.daemon.engines.smr.pathselect import Mode, PathSet, Switch, select_replies
from manetkit.daemon.neighbours import NeighbourTable

_REMEMBERED = 256  # request copies / answered requests remembered (bounded state)
_MAX_COPY_FORWARDS = 8  # copies of one request forwarded (distinct previous hops)


class SmrConfig(DsrConfig):
    """SMR settings (YAML ``smr:``): DSR's parameters plus the multipath ones."""

    mode: Mode = Field(
        Mode.BACKUP1,
        description="concurrent (round robin, SMR IV), backup1 (shortest hop + shortest "
        "delay, V-B.1) or backup2 (shortest delay + maximally disjoint, V-B.2)",
    )
    paths: int = Field(
        2, ge=1, le=8, description="routes kept per destination (Lim/Xu/Gerla V-A: 2 is best)"
    )
    reply_wait_ms: float = Field(
        100.0,
        ge=0,
        le=10_000,
        description="the destination's wait for more request copies after its first reply",
    )
    rediscover_on_break: bool = Field(
        False,
        description="DSR's ask-at-once after a break; off: SMR's rediscover policy decides",
    )
    rediscover: Literal["all-broken", "any-broken"] = Field(
        "all-broken", description="ask again when every path broke, or at any break (III-A)"
    )
    after_all_broken: Literal["discover", "cache"] = Field(
        "discover",
        description="once every path broke: discover a new primary and backup with the "
        "next packet (III-A, V-A), or route by DSR's cache until a discovery happens",
    )
    max_path_age_s: float | None = Field(
        None,
        gt=0,
        le=3600,
        description="drop an alternate path this long after the reply that brought or last "
        "confirmed it (V-A: alternates go stale under mobility); none: kept until it breaks",
    )

    @model_validator(mode="after")
    def _no_cached_replies(self) -> SmrConfig:
        if self.cache_replies:
            raise ValueError(
                "cache_replies: SMR floods requests to the destination and never answers "
                "from caches (Lim/Xu/Gerla III-A); leave it false"
            )
        if self.target_replies != "every":
            raise ValueError(
                "target_replies: SMR's destination answers by its mode (the first copy "
                "at once, the others chosen after reply_wait_ms, V-B); leave it every"
            )
        return self


@dataclass(slots=True)
class _Copies:
    """Copies of one Route Request at its target (V-B: first answered at once)."""

    first: Path  # initiator first, this node last
    later: list[Path] = field(default_factory=list)


class SmrEngine(DsrEngine):
    """DSR with SMR's request forwarding, destination selection and path sets."""

    name = "smr"

    def __init__(
        self,
        address: IPv4Address,
        config: SmrConfig | None = None,
        neighbours: NeighbourTable | None = None,
        rng: random.Random | None = None,
    ) -> None:
        cfg = config or SmrConfig()
        super().__init__(address, cfg, neighbours, rng)
        self.smr: SmrConfig = cfg
        # Round robin picks a route per packet: no per-destination route memo.
        self.memo_routes = cfg.mode is not Mode.CONCURRENT
        self._sets: dict[IPv4Address, PathSet[IPv4Address]] = {}
        self._asked: dict[IPv4Address, float] = {}  # when this node last asked, per target
        # Destinations whose paths all broke: the next packet to one asks again.
        self._rebuild: OrderedDict[IPv4Address, None] = OrderedDict()
        self._firsts: OrderedDict[tuple[IPv4Address, int], tuple[int, set[IPv4Address]]] = (
            OrderedDict()
        )
        self._copies: dict[tuple[IPv4Address, int], _Copies] = {}
        self._answered: OrderedDict[tuple[IPv4Address, int], None] = OrderedDict()
        self._smr_timers: list[tuple[float, int, tuple[IPv4Address, int]]] = []
        self._smr_seq = 0

    # ------------------------------------------------------------ intermediate nodes
    def _request_seen(
        self, now: float, init: IPv4Address, ident: int, prev: IPv4Address, hops: int
    ) -> bool:
        """SMR's duplicate rule (Lee & Gerla; Lim/Xu/Gerla III-A): forward a later copy
        if it came from a neighbour no forwarded copy came from and has no more hops
        than the first copy."""
        key = (init, ident)
        first = self._firsts.get(key)
        if first is None:
            if super()._request_seen(now, init, ident, prev, hops):
                return True  # forgotten here but still in DSR's request table
            self._firsts[key] = (hops, {prev})
            if len(self._firsts) > _REMEMBERED:
                self._firsts.popitem(last=False)
                self.counters["smr-firsts-evicted"] += 1
            return False
        first_hops, prevs = first
        if prev in prevs or hops > first_hops:
            return True
        if len(prevs) >= _MAX_COPY_FORWARDS:
            # Bounded: forged previous hops cannot make this node rebroadcast one
            # request without end (DSR's forwarding rate limit does not count copies).
            self.counters["smr-copies-capped"] += 1
            return True
        prevs.add(prev)
        self.counters["smr-duplicate-forwarded"] += 1
        return False

    # ------------------------------------------------------------ the destination
    def _target_request(
        self, now: float, init: IPv4Address, ident: int, addrs: tuple[IPv4Address, ...]
    ) -> None:
        """Reply at once to the first copy, collect the others for ``reply_wait_ms``
        (Lim/Xu/Gerla V-B.1: "replies RREP packet immediately upon receiving the first
        RREQ packet ... waits certain duration of time ... and learns all possible
        paths")."""
        key = (init, ident)
        path = (init, *addrs, self.address)
        c = self._copies.get(key)
        if c is not None:
            if len(c.later) >= _REMEMBERED:
                self.counters["smr-copies-dropped"] += 1  # bounded: a flood of copies
            elif path != c.first and path not in c.later:
                c.later.append(path)
            self.counters["smr-copies-collected"] += 1
            return
        if key in self._answered:
            self.counters["smr-copies-late"] += 1
            return
        self._reply(now, init, path[1:], tuple(reversed(addrs)))
        self.counters["smr-first-replies"] += 1
        self._answered[key] = None
        if len(self._answered) > _REMEMBERED:
            self._answered.popitem(last=False)
            self.counters["smr-answered-evicted"] += 1
        if self.smr.paths < 2:
            return
        if len(self._copies) >= _REMEMBERED:
            self.counters["smr-copies-dropped"] += 1  # bounded: answered, not collected
            return
        self._copies[key] = _Copies(path)
        self._smr_seq += 1
        due = now + self.smr.reply_wait_ms / 1000
        heapq.heappush(self._smr_timers, (due, self._smr_seq, key))

    def _select_and_reply(self, now: float, key: tuple[IPv4Address, int]) -> None:
        c = self._copies.pop(key, None)
        if c is None:
            return
        init = key[0]
        for p in select_replies(self.smr.mode, c.first, c.later, self.smr.paths - 1):
            self._reply(now, init, p[1:], tuple(reversed(p[1:-1])))
            self.counters["smr-extra-replies"] += 1

    # ------------------------------------------------------------ the source
    def _send_request(self, now: float, d: _Discovery, ttl: int) -> None:
        super()._send_request(now, d, ttl)
        if d.target not in self._asked and len(self._asked) >= _REMEMBERED:
            del self._asked[min(self._asked, key=self._asked.__getitem__)]
            self.counters["smr-asked-evicted"] += 1
        self._asked[d.target] = now

    def _reply_received(self, now: float, route: Path, fresh: float) -> None:
        """A reply to one of this node's requests: offer its path to the destination's
        set (a reply nobody here asked for, e.g. a gratuitous one, only feeds the
        cache, as in DSR)."""
        dst = route[-1]
        asked = self._asked.get(dst)
        window = self.smr.reply_wait_ms / 1000 + self.config.max_request_period_s
        if asked is None or now - asked > window:
            self.counters["smr-replies-unasked"] += 1
            return
        if len(set(route)) != len(route) or len(route) - 1 > self.config.max_route_length:
            self.counters["smr-replies-invalid"] += 1
            return
        if self._held and self._unheld_prefix(now, route, fresh) != route:
            self.counters["smr-replies-held"] += 1
            return
        ps = self._sets.get(dst)
        if ps is None:
            ps = self._sets[dst] = PathSet(self.smr.mode, self.smr.paths)
        added, sw = ps.offer(now, route)
        if added:
            self._out.clear()
            self.counters["smr-paths-added"] += 1
            self._emit(
                Notify(
                    ev.RouteUp(
                        dst=str(dst),
                        next_hop=str(route[1]),
                        hops=len(route) - 1,
                        path=tuple(str(a) for a in route),
                        primary=ps.primary == route,
                    )
                )
            )
        if sw is not None and sw.old is not None:
            self._switched(dst, sw, sw.reason)

    def _route_for(self, now: float, dst: IPv4Address) -> Path | None:
        """The set's primary (round robin in ``concurrent``); with no set, DSR's cache.

        Once every path to ``dst`` broke (``after_all_broken: discover``), the next
        packet to it sends a propagating request (SMR's rediscovery when all routes are
        invalid, Lim/Xu/Gerla III-A) and rides a cached route, if any, until the
        replies bring a new primary and backup. Without it the source would use DSR's
        cache (routes learnt from forwarded or overheard packets) for good: it holds
        no backup and never asks again while some cached route works, and backup path
        routing ends at the first time both paths broke.
        """
        ps = self._sets.get(dst)
        if ps is not None:
            route = ps.route()
            if route is not None:
                return route
        if dst in self._rebuild:
            del self._rebuild[dst]
            self._ask(now, dst, "smr-all-broken-rediscoveries")
        route = super()._route_for(now, dst)
        if route is not None and dst in self._asked:
            self.counters["smr-cache-routes"] += 1  # a destination we asked for, no set
        return route

    def _links_cut(self, now: float, a: IPv4Address, b: IPv4Address, reason: str) -> None:
        """Drop the paths through a-b; a broken primary gives way to a backup at once
        (V: "switch from current path to another alternative path rapidly")."""
        self._expire_paths(now)  # never switch to an alternate that has gone stale
        for dst, ps in list(self._sets.items()):
            gone, sw = ps.cut(a, b)
            if not gone:
                continue
            self._out.clear()
            if sw is not None:
                # Keep the route cache agreeing, so DSR reports no route-down for dst.
                self.cache.add(now, sw.new)
                self._switched(dst, sw, reason)
            if not ps.entries:
                del self._sets[dst]
                self.counters["smr-all-broken"] += 1
                if self.smr.after_all_broken == "discover":
                    self._rebuild[dst] = None
                    if len(self._rebuild) > _REMEMBERED:
                        self._rebuild.popitem(last=False)
                        self.counters["smr-rebuild-evicted"] += 1
            elif self.smr.rediscover == "any-broken":
                self._ask(now, dst, "smr-rediscoveries")
            elif sw is not None:
                self.counters["smr-discoveries-avoided"] += 1

    def link_predicted_to_fail(self, now: float, neighbour: IPv4Address) -> bool:
        """Atra predicts the link to ``neighbour`` will break: every primary over it
        moves to a backup that avoids it, before any packet is lost."""
        self._now = now
        self._expire_paths(now)
        moved = False
        for dst, ps in self._sets.items():
            sw = ps.avoid(self.address, neighbour)
            if sw is not None:
                self.cache.add(now, sw.new)
                self._switched(dst, sw, sw.reason)
                moved = True
        if moved:
            self._out.clear()
        return moved

    def _switched(self, dst: IPv4Address, sw: Switch[IPv4Address], reason: str) -> None:
        self.counters["smr-switches"] += 1
        self._emit(
            Notify(
                ev.PathSwitch(
                    dst=str(dst),
                    from_path=tuple(str(a) for a in sw.old) if sw.old is not None else None,
                    to_path=tuple(str(a) for a in sw.new),
                    reason=reason,
                )
            )
        )

    def _ask(self, now: float, dst: IPv4Address, counter: str) -> None:
        """A propagating request for ``dst`` while a backup or a cached route may still
        carry the data (``rediscover: any-broken``, ``after_all_broken: discover``), at
        most one per NonpropRequestTimeout. A new discovery asks again with DSR's
        back-off while packets wait in the send buffer (8.2.1), and stops when nothing
        waits."""
        d = self._discoveries.get(dst)
        if d is None:
            d = self._discoveries[dst] = _Discovery(dst, now, attempts=1)
        elif now - d.sent_at < self.config.nonprop_request_timeout_ms / 1000:
            return
        self.counters[counter] += 1
        self._extra_request(now, d)

    def _expire_paths(self, now: float) -> None:
        """Drop alternates older than ``max_path_age_s`` (:meth:`PathSet.expire`), and
        the same paths from the route cache."""
        max_age = self.smr.max_path_age_s
        if max_age is None:
            return
        for ps in self._sets.values():
            for path in ps.expire(now, max_age):
                self.counters["smr-paths-expired"] += 1
                # DSR's cache got it from the same reply: the all-broken fallback to the
                # cache must not try it either, unless something used it since.
                self.cache.forget(path, unused_since=now - max_age)

    # ------------------------------------------------------------ timers, status
    def handle_timer(self, now: float) -> None:
        super().handle_timer(now)
        while self._smr_timers and self._smr_timers[0][0] <= now:
            _, _, key = heapq.heappop(self._smr_timers)
            self._select_and_reply(now, key)
        self._expire_paths(now)

    def get_timer(self) -> float | None:
        due = [super().get_timer()]
        if self._smr_timers:
            due.append(self._smr_timers[0][0])
        if self.smr.max_path_age_s is not None:
            due += [ps.next_expiry(self.smr.max_path_age_s) for ps in self._sets.values()]
        return min((t for t in due if t is not None), default=None)

    def status(self) -> dict[str, Any]:
        st = super().status()
        now = self._now
        st["protocol"] = "smr"
        st["smr"] = {
            "mode": str(self.smr.mode),
            "paths": self.smr.paths,
            "rediscover": self.smr.rediscover,
            "max_path_age_s": self.smr.max_path_age_s,
            "after_all_broken": self.smr.after_all_broken,
        }
        # One flat row per route (the status CLI prints it as a table like "paths").
        st["multipath"] = [
            {
                "dst": str(dst),
                "role": "primary" if i == 0 else "backup",
                "hops": len(e.path) - 1,
                "age_s": round(now - e.added, 3),
                "path": [str(a) for a in e.path],
            }
            for dst, ps in sorted(self._sets.items())
            for i, e in enumerate(ps.entries)
        ]
        return st
