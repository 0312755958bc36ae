"""Route Requests that reach a DSR node (RFC 4728 8.2.2 - 8.2.5).

The request's recorded route, reversed, is a route back to its initiator (cached);
the target answers (through the path strategy, 8.2.4); another node drops duplicates
(by the Route Request Table, or by finding itself in the route record), answers from
its cache only with ``cache_replies`` (8.2.3, off by default: Holland & Vaidya
section 5 found stale cached replies the main cause of TCP's poor DSR results), and
otherwise rebroadcasts after a random BroadcastJitter, at most
``request_forward_ratelimit`` distinct requests per second. A request that came over
a link the admission policy refuses, or (Atra) one predicted to fail, goes no further.
"""

from __future__ import annotations

import random
from collections import Counter
from ipaddress import IPv4Address

from manetkit.daemon.engines.atra.state import AtraState
from manetkit.daemon.engines.dsr.cache import RouteCache
from manetkit.daemon.engines.dsr.config import DsrConfig
from manetkit.daemon.engines.dsr.linkmetric import DsrLinkMetric
from manetkit.daemon.engines.dsr.links import LinkView
from manetkit.daemon.engines.dsr.requesttable import RequestTable
from manetkit.daemon.engines.dsr.routes import Routes
from manetkit.daemon.engines.dsr.signalling import BROADCAST, Signalling
from manetkit.daemon.engines.dsr.strategy import PathStrategy
from manetkit.daemon.engines.dsr.timers import Timer, Timers
from manetkit.daemon.engines.shared.ratelimit import RateLimit
from manetkit.daemon.wire import dsr, ipv4


class RequestHandler:
    def __init__(
        self,
        address: IPv4Address,
        config: DsrConfig,
        links: LinkView,
        routes: Routes,
        cache: RouteCache,
        table: RequestTable,
        strategy: PathStrategy,
        signalling: Signalling,
        timers: Timers,
        counters: Counter[str],
        rng: random.Random,
        atra: AtraState | None,
        link_metric: DsrLinkMetric | None = None,
    ) -> None:
        self.address = address
        self.config = config
        self.links = links
        self.routes = routes
        self.cache = cache
        self.table = table
        self.strategy = strategy
        self.signalling = signalling
        self.timers = timers
        self.counters = counters
        self.rng = rng
        self.atra = atra
        self.link_metric = link_metric  # LQSR's link metrics (None: hop count)
        self.forward_limit = RateLimit(config.request_forward_ratelimit)

    def received(
        self,
        now: float,
        ip: ipv4.IPv4Header,
        rreq: dsr.RouteRequest,
        src_mac: bytes | None,
        rssi: float | None,
        options: tuple[object, ...] = (),
    ) -> None:
        """Process a received Route Request (RFC 4728 8.2.2); ``options``: the other
        options of its DSR header (LQSR's link metrics)."""
        init = ip.src
        if init == self.address:
            self.counters["own-request-heard"] += 1
            return
        addrs = rreq.addresses
        prev = addrs[-1] if addrs else init
        self.links.heard(now, prev, src_mac, rssi)
        if self.address in addrs:
            self.counters["request-loop"] += 1
            return
        if not self.links.admits(now, prev, rssi):
            return  # not over a link that may not build routes
        if self.atra is not None and self.atra.suppress_request(now, prev):
            return  # Atra: not over a link predicted to fail
        self.counters["requests-received"] += 1
        lqm = self.link_metric
        costs = lqm.request(now, init, addrs, options) if lqm is not None else None
        # The recorded route, reversed, leads back to the initiator.
        self.routes.learn(now, (self.address, *reversed(addrs), init))
        if rreq.target == self.address:
            self.strategy.answer_request(now, init, rreq.ident, addrs)
            return
        copy = self.table.has(init, rreq.ident)  # SMR forwards some later copies
        duplicate = self.strategy.duplicate_request(now, init, rreq.ident, prev, len(addrs))
        # LQSR: a later copy with a clearly better path is processed again.
        if costs is not None and lqm.copy(init, rreq.ident, lqm.total(costs), duplicate):  # type: ignore[union-attr]
            duplicate, copy = False, True
        if duplicate:
            self.counters["request-duplicate"] += 1
            return
        if self.config.cache_replies and self._cached_reply(now, init, addrs, rreq.target):
            return
        if ip.ttl <= 1:
            self.counters["request-ttl-end"] += 1  # the ring-0 request stops here
            return
        if len(addrs) + 2 > self.config.max_route_length:
            self.counters["request-too-long"] += 1
            return
        # Distinct requests count against the limit; a later copy SMR forwards does not
        # (SMR bounds those per request).
        if not copy and not self.forward_limit.take(now):
            self.counters["request-ratelimited"] += 1
            return
        opts: list = [dsr.RouteRequest(rreq.ident, rreq.target, (*addrs, self.address))]
        if lqm is not None and costs is not None:
            opts.append(lqm.option(costs))
        fwd = dsr.encapsulate(
            dsr.IPFields(init, BROADCAST, ttl=ip.ttl - 1, tos=ip.tos, ident=ip.ident),
            opts,
            dsr.NO_NEXT_HEADER,
        )
        delay = self.rng.uniform(0, self.config.broadcast_jitter_ms / 1000)
        self.timers.schedule(now + delay, Timer.REBROADCAST, fwd)

    def _cached_reply(
        self,
        now: float,
        init: IPv4Address,
        addrs: tuple[IPv4Address, ...],
        target: IPv4Address,
    ) -> bool:
        """8.2.3: answer from the cache (True), if it has a loop-free route."""
        route = self.cache.lookup(now, target)
        if route is None:
            return False
        full = (init, *addrs, *route)
        if len(set(full)) != len(full) or len(full) - 1 > self.config.max_route_length:
            return False
        # 8.2.5: wait H * (h - 1 + r) so that shorter replies from other caches go
        # first (no reply storm); H is BroadcastJitter here.
        h = len(full) - 1
        delay = self.config.broadcast_jitter_ms / 1000 * (h - 1 + self.rng.random())
        self.counters["cache-replies"] += 1
        self.signalling.reply(now, init, (*addrs, *route), tuple(reversed(addrs)), delay)
        return True
