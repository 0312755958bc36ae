"""DSR Route Discovery at the node that wants a route (RFC 4728 8.2.1).

A non-propagating request (IP TTL 1) first, then propagating requests with exponential
back-off from RequestPeriod capped at MaxRequestPeriod, at most MaxRequestRexmt of
them; the discovery ends when a route is learnt (:meth:`Discovery.complete`), when
nothing waits for the target any more, or it gives up. Outside that schedule a node may
ask again whenever it has reason to (8.2.1): link sensing saw a neighbour come back
(:meth:`Discovery.restart`), an ELFN probe (:meth:`Discovery.rediscover`), its own
packet lost its route (:meth:`Discovery.refresh`, ``rediscover_on_break``), SMR's
rediscovery and Atra's search for a way around a predicted break.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import Any

from manetkit.daemon.engines.dsr.config import DsrConfig
from manetkit.daemon.engines.dsr.signalling import Signalling
from manetkit.daemon.engines.dsr.strategy import PathStrategy
from manetkit.daemon.engines.dsr.timers import Timer, Timers

MAX_REFRESHED = 1024  # targets of recent rediscover_on_break requests: cleared when over


@dataclass(slots=True)
class Search:
    """Route Discovery state for one target (RFC 4728 8.2.1 back-off)."""

    target: IPv4Address
    started: float
    attempts: int = 0  # propagating requests sent so far (0 = only the ring-0 one)
    next_at: float = 0.0
    last_id: int = 0
    sent_at: float = 0.0  # when the latest request went out


class Discovery:
    def __init__(
        self,
        address: IPv4Address,
        config: DsrConfig,
        timers: Timers,
        signalling: Signalling,
        strategy: PathStrategy,
        counters: Counter[str],
        rng: random.Random,
        wanted: Callable[[IPv4Address], bool],
        gave_up: Callable[[float, IPv4Address], None],
    ) -> None:
        self.address = address
        self.config = config
        self.timers = timers
        self.signalling = signalling
        self.strategy = strategy
        self.counters = counters
        self.wanted = wanted  # something still waits for a route to the target
        self.gave_up = gave_up  # MaxRequestRexmt requests went unanswered
        self.searches: dict[IPv4Address, Search] = {}
        self.refreshed: dict[IPv4Address, float] = {}  # target -> its last fresh request
        self._next_id = rng.randrange(0x10000)

    def start(self, now: float, target: IPv4Address) -> None:
        d = self.searches[target] = Search(target, now)
        self._send(now, d, ttl=1)  # ring 0: neighbours only (8.2.1)
        d.next_at = now + self.config.nonprop_request_timeout_ms / 1000
        self.timers.schedule(d.next_at, Timer.DISCOVERY, target)

    def _send(self, now: float, d: Search, ttl: int) -> None:
        self._next_id = (self._next_id + 1) & 0xFFFF
        d.last_id = self._next_id
        d.sent_at = now
        self.signalling.request(d.last_id, d.target, ttl)
        self.strategy.request_sent(now, d.target)

    def handle_timer(self, now: float, target: IPv4Address) -> None:
        """The back-off of the discovery for ``target`` may be over."""
        d = self.searches.get(target)
        if d is not None and d.next_at <= now:
            self._timeout(now, d)

    def _timeout(self, now: float, d: Search) -> None:
        cfg = self.config
        if not self.wanted(d.target):
            del self.searches[d.target]
            return
        if d.attempts > cfg.max_request_rexmt:
            del self.searches[d.target]
            self.gave_up(now, d.target)  # 8.2.1: what waits cannot be delivered
            return
        self._send(now, d, ttl=cfg.discovery_hop_limit)
        backoff = min(cfg.request_period_ms / 1000 * (2**d.attempts), cfg.max_request_period_s)
        d.attempts += 1
        d.next_at = now + backoff
        self.timers.schedule(d.next_at, Timer.DISCOVERY, d.target)

    def extra_request(self, now: float, d: Search) -> None:
        """A propagating request for ``d`` now, outside the back-off schedule. It never
        postpones the request the back-off already scheduled; a discovery with none
        pending gets one, so it goes on asking (8.2.1)."""
        cfg = self.config
        self._send(now, d, ttl=cfg.discovery_hop_limit)
        interval = cfg.request_period_ms / 1000 * (2 ** max(d.attempts - 1, 0))
        due = now + min(interval, cfg.max_request_period_s)
        if d.next_at <= now or due < d.next_at:
            d.next_at = due
            self.timers.schedule(due, Timer.DISCOVERY, d.target)

    def rediscover(self, now: float, dst: IPv4Address) -> bool:
        """Ask for ``dst`` now instead of waiting out the request back-off (an ELFN
        probe: Holland & Vaidya section 6). At most one request per target per
        NonpropRequestTimeout; the attempt count and the scheduled back-off request
        stay as they were, so a probing sender neither exhausts MaxRequestRexmt faster
        nor delays the discovery's own next request."""
        gap = self.config.nonprop_request_timeout_ms / 1000
        d = self.searches.get(dst)
        if d is None:
            if dst == self.address or self.strategy.route_for(now, dst) is not None:
                return False
            # No route and nobody asking: a propagating request straight away.
            d = self.searches[dst] = Search(dst, now, attempts=1)
        elif now - d.sent_at < gap:
            self.counters["rediscover-ratelimited"] += 1
            return False
        self.extra_request(now, d)
        self.counters["rediscover-requests"] += 1
        return True

    def ask(self, now: float, dst: IPv4Address, counter: str) -> None:
        """A propagating request for ``dst`` while another route may still carry the
        data (SMR's rediscovery), at most one per NonpropRequestTimeout, counted as
        ``counter``. A new discovery then asks with the back-off while packets wait in
        the send buffer (8.2.1), and stops when nothing waits."""
        d = self.searches.get(dst)
        if d is None:
            d = self.searches[dst] = Search(dst, now, attempts=1)
        elif now - d.sent_at < self.config.nonprop_request_timeout_ms / 1000:
            return
        self.counters[counter] += 1
        self.extra_request(now, d)

    def around(self, now: float, dst: IPv4Address) -> bool:
        """Atra: one propagating request for ``dst`` (its route crosses a link predicted
        to fail), the back-off going on from RequestPeriod; False if one is running."""
        if dst in self.searches:
            return False
        d = self.searches[dst] = Search(dst, now, attempts=1)
        self._send(now, d, ttl=self.config.discovery_hop_limit)
        d.next_at = now + self.config.request_period_ms / 1000
        self.timers.schedule(d.next_at, Timer.DISCOVERY, dst)
        return True

    def refresh(self, now: float, dst: IPv4Address) -> None:
        """This node's own packet to ``dst`` lost the route it took: one propagating
        Route Request now, whether or not the cache still has another route.

        RFC 4728 8.2.1 lets a node start a discovery whenever it wants a route; the
        cached alternatives may be stale (Holland & Vaidya section 5): learnt from other
        nodes' requests and routes tens of seconds ago, kept for RouteCacheTimeout (300
        s). Without asking, each retransmission of a TCP flow (one RTO apart, doubling)
        tries the next stale route and the flow stalls although a short route exists.
        A running discovery already asks; else at most one request per target per
        RequestPeriod. The reply's route is newer, so the cache prefers it at equal length.
        """
        cfg = self.config
        if not cfg.rediscover_on_break or dst in self.searches or dst == self.address:
            return
        last = self.refreshed.get(dst)
        if last is not None and now - last < cfg.request_period_ms / 1000:
            self.counters["rediscover-on-break-ratelimited"] += 1
            return
        if len(self.refreshed) > MAX_REFRESHED:
            self.refreshed.clear()
            self.counters["memo-cleared"] += 1
        self.refreshed[dst] = now
        self._send(now, Search(dst, now, attempts=1), ttl=cfg.discovery_hop_limit)
        self.counters["rediscover-on-break"] += 1

    def restart(self, now: float) -> None:
        """A neighbour came back: RFC 4728 8.2.1 lets a node ask again when it believes
        the topology changed, so a discovery waiting out its back-off asks now."""
        gap = self.config.nonprop_request_timeout_ms / 1000
        for d in self.searches.values():
            if d.attempts >= 1 and d.next_at > now and now - d.sent_at >= gap:
                self.counters["discovery-restarted"] += 1
                d.next_at = now
                self.timers.schedule(now, Timer.DISCOVERY, d.target)

    def asked_at(self, target: IPv4Address) -> float:
        """When this node last asked for ``target`` (-1: not recently)."""
        d = self.searches.get(target)
        return d.sent_at if d is not None else self.refreshed.get(target, -1.0)

    def complete(self, now: float, target: IPv4Address) -> None:
        """A usable route to ``target`` exists: its discovery (if any) is over."""
        d = self.searches.pop(target, None)
        if d is not None:
            # Route discovery latency: first request to a usable route.
            self.counters["discoveries-completed"] += 1
            self.counters["discovery-latency-ms"] += round((now - d.started) * 1000)

    def forget_unwanted(self) -> None:
        """Nothing waits for these targets any more (timed out): stop asking."""
        for target in [t for t in self.searches if not self.wanted(t)]:
            del self.searches[target]

    def status(self, now: float) -> list[dict[str, Any]]:
        return [
            {
                "target": str(d.target),
                "attempts": d.attempts,
                "since_s": round(now - d.started, 3),
                "next_in_s": round(d.next_at - now, 3),
            }
            for d in self.searches.values()
        ]
