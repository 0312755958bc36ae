"""The DSR control packets a node originates (RFC 4728 8.2, 8.3), built from
:mod:`manetkit.daemon.wire.dsr`: Route Requests, Route Replies (at once or after a
delay), Route Errors (rate-limited), other control options source-routed by the
cache, and TCP-BuS acknowledgements. Packets that carry only options: Next Header 59,
marked as network control (DSCP CS6, :data:`~manetkit.daemon.wire.ipv4.TOS_NETWORK_CONTROL`)
so that a medium with 802.11e access categories serves them before data.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from ipaddress import IPv4Address

from manetkit.daemon.engines.base import Outbox
from manetkit.daemon.engines.dsr.cache import RouteCache
from manetkit.daemon.engines.dsr.config import DsrConfig
from manetkit.daemon.engines.dsr.timers import Timer, Timers
from manetkit.daemon.engines.shared.bus import BusState, flow_key
from manetkit.daemon.engines.shared.ratelimit import RateLimit
from manetkit.daemon.wire import dsr
from manetkit.daemon.wire import manet_ext as mx
from manetkit.daemon.wire.ipv4 import TOS_NETWORK_CONTROL as CS6

BROADCAST = IPv4Address("255.255.255.255")


class Signalling:
    def __init__(
        self,
        address: IPv4Address,
        config: DsrConfig,
        cache: RouteCache,
        timers: Timers,
        bus: BusState,
        out: Outbox,
        counters: Counter[str],
    ) -> None:
        self.address = address
        self.config = config
        self.cache = cache
        self.timers = timers
        self.bus = bus
        self.out = out
        self.counters = counters
        self.rerr_limit = RateLimit(config.rerr_ratelimit)
        # Options a Route Reply carries besides the route (LQSR's link metrics), given
        # (now, the reply's destination, its route); None: none.
        self.reply_options: Callable[[float, IPv4Address, tuple[IPv4Address, ...]], list] | None = (
            None
        )

    def request(self, ident: int, target: IPv4Address, ttl: int) -> None:
        """A Route Request for ``target`` to every neighbour (8.2.1; ttl 1: ring 0)."""
        pkt = dsr.encapsulate(
            dsr.IPFields(self.address, BROADCAST, ttl=ttl, tos=CS6),
            [dsr.RouteRequest(ident, target)],
            dsr.NO_NEXT_HEADER,
        )
        self.counters["requests-sent"] += 1
        self.out.send(None, pkt)

    def reply(
        self,
        now: float,
        to: IPv4Address,
        route: tuple[IPv4Address, ...],
        back: tuple[IPv4Address, ...],
        delay: float = 0.0,
    ) -> None:
        """A Route Reply carrying ``route`` to ``to`` via intermediate hops ``back``
        (RFC 4728 8.2.4, 8.2.3, 8.4.4), after ``delay`` seconds if given."""
        extra = self.reply_options(now, to, route) if self.reply_options is not None else []
        pkt = dsr.encapsulate(
            dsr.IPFields(self.address, to, ttl=self.config.discovery_hop_limit, tos=CS6),
            [dsr.RouteReply(route), *extra, dsr.SourceRoute(back, len(back))],
            dsr.NO_NEXT_HEADER,
        )
        self.counters["replies-sent"] += 1
        if delay > 0:
            self.timers.schedule(now + delay, Timer.SEND, (back[0] if back else to, pkt))
        else:
            self.out.send(back[0] if back else to, pkt)

    def error(
        self,
        now: float,
        to: IPv4Address,
        unreachable: IPv4Address,
        salvage: int,
        notices: list[mx.Item] | None = None,
    ) -> None:
        """A NODE_UNREACHABLE Route Error to the failed packet's source (8.3.4), with
        manetkit's ELFN (and ERDN) options in the same DSR header; at most
        ``rerr_ratelimit`` per second."""
        if not self.rerr_limit.take(now):
            self.counters["errors-ratelimited"] += 1
            return
        err = dsr.RouteError.node_unreachable(self.address, to, unreachable, salvage)
        if self.control(now, to, [err], notices or []):
            self.counters["errors-sent"] += 1
        else:
            self.counters["errors-unroutable"] += 1

    def control(
        self,
        now: float,
        to: IPv4Address,
        options: list,
        notices: list[mx.Item],
        fallback: tuple[IPv4Address, ...] = (),
    ) -> bool:
        """Source-route ``options`` plus ``notices`` to ``to`` by the cache (else by
        ``fallback``, a path from here to ``to``); ERDN/ERSN are kept for retransmission
        until acknowledged. False when there is no route."""
        route = self.cache.lookup(now, to) or (fallback if len(fallback) >= 2 else None)
        if route is None:
            return False
        hops = route[1:-1]
        pkt = dsr.encapsulate(
            dsr.IPFields(self.address, to, ttl=self.config.discovery_hop_limit, tos=CS6),
            [*options, *(mx.dsr_option(n) for n in notices), dsr.SourceRoute(hops, len(hops))],
            dsr.NO_NEXT_HEADER,
        )
        self.out.send(route[1], pkt)
        for n in notices:
            if isinstance(n, mx.Notice):
                self.bus.sent(now, n.key, route[1], pkt, flow_key(n.flow))
        return True

    def bus_ack(self, prev: IPv4Address, ack: mx.BusAck) -> None:
        """A TCP-BuS acknowledgement to the hop that sent us a notice (one hop)."""
        pkt = dsr.encapsulate(
            dsr.IPFields(self.address, prev, ttl=1, tos=CS6),
            [mx.dsr_option(ack)],
            dsr.NO_NEXT_HEADER,
        )
        self.out.send(prev, pkt)
