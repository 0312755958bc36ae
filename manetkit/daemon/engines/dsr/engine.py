"""DSR routing engine, sans-I/O (RFC 4728 section 8; Holland & Vaidya section 5).

Inputs and outputs are those of :mod:`manetkit.daemon.engines.base`. The engine is
composed of one component per concern, each in its own module, as aioquic's
connection composes its recovery, streams and crypto:

==================  ================================================================
``cache``           the route cache: paths from this node (RFC 4728 4.1)
``links``           neighbours, held links, link admission (8.3; Holland & Vaidya 7)
``routes``          learning into the cache, cutting links, destinations down
``signalling``      the control packets this node originates (8.2, 8.3)
``strategy``        which route own packets take, how requests are answered
                    (RFC 4728's :class:`SingleRoute`, or SMR's path sets)
``discovery``       Route Discovery at the node that wants a route (8.2.1)
``requests``        Route Requests that reach this node (8.2.2 - 8.2.5)
``forwarder``       the data path (8.1.3, 8.1.4) and ``shortening`` (8.4.4)
``maintenance``     link breaks, Route Errors, salvaging (8.3, 8.4.3)
``control``         control packets in: each option to its component
``bus``/``dsr_bus``  TCP-BuS (Kim, Toh & Choi IV), shared with AODV / on DSR's options
``atra``            Atra's RFP, PRE and SRP on DSR's messages (None when off)
``lq``/``link_metric``  link quality (admission, ETX, the failure veto) and LQSR's link
                    metrics on DSR's messages (None when off; docs/linkquality.md)
==================  ================================================================

The engine itself feeds the inputs to them and reacts where concerns meet: a route
learnt to a destination something waits for (route-up, the send buffer released, a
TCP-BuS pivot repaired), a discovery that gave up (route-down), a link event.

The link admission policy (:mod:`manetkit.daemon.admission`) and the
path metric (:mod:`manetkit.daemon.engines.shared.metric`) are plug-ins; their
defaults (admit every link, hop count) are RFC 4728's behaviour. With
``link_quality`` on, they are link quality's (:mod:`manetkit.daemon.engines.linkquality`)
unless given.

``trust_data=False`` (the shell passes it when authentication is required,
docs/security.md): a packet whose options are only a Source Route and padding is
unsigned, so it is forwarded or delivered but teaches nothing: no neighbour binding, no
cached route, no gratuitous reply, no salvage or TCP-BuS pivot, no Atra pin. Routes
come from signed control only (Ariadne's rule: Hu, Perrig & Johnson, MobiCom 2002).
A data packet from the radio that carries this node's own address as its IP source is
dropped (counted ``own-source``): none is genuine, except one salvaged (8.4.3) over a
route back through its source, which is forwarded while ``trust_data`` holds (with
authentication required nothing unsigned is salvaged, so no such packet exists).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from ipaddress import IPv4Address
from typing import Any

from manetkit import events as ev
from manetkit.daemon.admission import ADMIT_ALL, LinkAdmission
from manetkit.daemon.engines.atra.state import AtraState
from manetkit.daemon.engines.base import (
    LinkDown,
    LinkEvent,
    LinkUp,
    RoutingEngine,
    SignalSample,
    TxFailed,
)
from manetkit.daemon.engines.dsr.atra import DsrAtra
from manetkit.daemon.engines.dsr.bus import DsrBus
from manetkit.daemon.engines.dsr.cache import Path, RouteCache
from manetkit.daemon.engines.dsr.config import DsrConfig
from manetkit.daemon.engines.dsr.control import ControlPath
from manetkit.daemon.engines.dsr.discovery import Discovery
from manetkit.daemon.engines.dsr.forwarding import Forwarder
from manetkit.daemon.engines.dsr.linkmetric import DsrLinkMetric
from manetkit.daemon.engines.dsr.links import LinkView
from manetkit.daemon.engines.dsr.maintenance import Maintenance
from manetkit.daemon.engines.dsr.requests import RequestHandler
from manetkit.daemon.engines.dsr.requesttable import RequestTable
from manetkit.daemon.engines.dsr.routes import MAX_DOWN, Routes, route_up
from manetkit.daemon.engines.dsr.shortening import Shortening
from manetkit.daemon.engines.dsr.signalling import BROADCAST, Signalling
from manetkit.daemon.engines.dsr.strategy import PathStrategy, SingleRoute
from manetkit.daemon.engines.dsr.timers import Timer, Timers
from manetkit.daemon.engines.dsr.trust import route_only
from manetkit.daemon.engines.linkquality import LinkQuality
from manetkit.daemon.engines.shared.addresses import AddressMemo
from manetkit.daemon.engines.shared.bus import Bus
from manetkit.daemon.engines.shared.metric import HOP_COUNT, PathMetric
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.sendbuffer import SendBuffer
from manetkit.daemon.wire import dsr, ipv4

__all__ = ["DsrEngine"]

StrategyFactory = Callable[["DsrEngine"], PathStrategy]


class DsrEngine(RoutingEngine):
    """One node's DSR (sans-I/O).

    Built by the shell as ``DsrEngine(address, config, neighbours)`` and driven only
    through the :class:`~manetkit.daemon.engines.base.RoutingEngine` API. ``strategy``
    builds the path strategy from the engine's parts (SMR's), ``admission`` and
    ``metric`` are the plug-ins above.
    """

    name = "dsr"
    wants_overheard = True  # 8.4.4 route shortening needs promiscuous receive
    is_control_frame = staticmethod(dsr.is_control)  # Next Header 59: nothing but options

    def __init__(
        self,
        address: IPv4Address,
        config: DsrConfig | None = None,
        neighbours: NeighbourTable | None = None,
        rng: random.Random | None = None,
        *,
        strategy: StrategyFactory | None = None,
        admission: LinkAdmission | None = None,
        metric: PathMetric | None = None,
        trust_data: bool = True,
    ) -> None:
        super().__init__()
        self.address = address
        self._me = address.packed
        self.trust_data = trust_data
        self.config = cfg = config or DsrConfig()
        self.neighbours = neighbours if neighbours is not None else NeighbourTable()
        # Link quality (docs/linkquality.md): only with a mechanism on.
        lqc = cfg.link_quality
        self.lq = (
            LinkQuality(lqc, address, self.counters, self.neighbours.capacity)
            if lqc.enabled
            else None
        )
        self.wants_link_reports = self.lq is not None
        if admission is None:
            admission = self.lq.admission if self.lq and self.lq.admission else ADMIT_ALL
        if metric is None:
            metric = self.lq.metric if self.lq and self.lq.metric else HOP_COUNT
        # Injected for simulations; else seeded from the config (tests) or the OS.
        rng = rng if rng is not None else random.Random(cfg.seed)
        out, counters = self.out, self.counters
        self._now = 0.0
        self.last_malformed = ""  # why the last malformed packet was refused (debugging)
        self.send_buffer = SendBuffer.from_settings(cfg)
        self.cache = RouteCache(address, cfg.route_cache_timeout_s, cfg.route_cache_size, metric)
        self.links = LinkView(address, self.neighbours, cfg.broken_link_hold_s, admission, counters)
        self.timers = Timers()
        addr = AddressMemo(counters)
        # TCP-BuS (docs/elfn-bus.md): notices are understood and acknowledged even with
        # bus off; holding and repair only with ``bus``.
        self.bus = Bus(cfg, out)
        # Atra (docs/atra.md): only with a mechanism on.
        # Atra's trend predictor reads the measured loss from link quality, when it runs.
        loss_of = self.lq.estimates.recent_loss if self.lq is not None else None
        atra = AtraState(cfg.atra, address, loss_of) if cfg.atra.enabled else None
        self.signalling = Signalling(
            address, cfg, self.cache, self.timers, self.bus.state, out, counters
        )
        self.table = RequestTable(cfg.request_table_size, cfg.request_table_ids, counters)
        etx = self.lq.metric if self.lq is not None else None
        self.link_metric = (
            DsrLinkMetric(address, etx, lqc.metric, counters) if etx is not None else None
        )
        if self.link_metric is not None:
            self.signalling.reply_options = self.link_metric.reply_options
        self.strategy: PathStrategy = (
            strategy(self)
            if strategy is not None
            else SingleRoute(address, cfg, self.cache, self.table, self.signalling, counters)
        )
        srp = atra.srp if atra is not None and atra.cfg.srp else None
        self.routes = Routes(
            address, self.cache, self.links, self.strategy, cfg.max_route_length, counters,
            learned=self._learned, srp=srp,
        )  # fmt: skip
        self.discovery = Discovery(
            address, cfg, self.timers, self.signalling, self.strategy, counters, rng,
            wanted=self._wanted, gave_up=self._gave_up,
        )  # fmt: skip
        self.requests = RequestHandler(
            address, cfg, self.links, self.routes, self.cache, self.table, self.strategy,
            self.signalling, self.timers, counters, rng, atra, self.link_metric,
        )  # fmt: skip
        shortening = Shortening(address, cfg, self.routes, self.signalling, addr, counters)
        self.forwarder = Forwarder(
            address, self.cache, self.links, self.routes, shortening, self.bus, atra, addr,
            out, self.strategy.memo_routes, trust_data,
        )  # fmt: skip
        self.dsr_bus = DsrBus(
            address, cfg, self.bus, self.cache, self.links, self.signalling, self.forwarder,
            self.discovery, counters,
        )  # fmt: skip
        self.atra = (
            DsrAtra(
                address,
                atra,
                self.cache,
                self.links,
                self.routes,
                self.strategy,
                self.discovery,
                self.signalling,
                self.forwarder,
                out,
                counters,
            )  # fmt: skip
            if atra is not None
            else None
        )
        self.maintenance = Maintenance(
            address, cfg, self.cache, self.links, self.routes, self.discovery,
            self.signalling, self.forwarder, self.bus, self.dsr_bus, self.atra, out,
            counters, resend=self.send_local, trust_data=trust_data,
        )  # fmt: skip
        self.control = ControlPath(
            address, self.links, self.routes, self.strategy, self.discovery, self.requests,
            self.maintenance, self.forwarder, self.bus, self.dsr_bus, self.atra, out, counters,
            self.link_metric, trust_data=trust_data,
        )  # fmt: skip

    # ------------------------------------------------------------------ inputs
    def receive_frame(
        self, now: float, packet: bytes, src_mac: bytes | None = None, rssi_dbm: float | None = None
    ) -> None:
        self._now = now
        try:
            # Checks and offsets read in place: this is the per-packet hot path.
            if len(packet) < 20 or packet[0] >> 4 != 4:
                raise ipv4.MalformedPacket("not an IPv4 packet")
            ihl = (packet[0] & 0x0F) * 4
            total = (packet[2] << 8) | packet[3]
            if ihl < 20 or total < ihl + dsr.HEADER_LEN or total > len(packet):
                raise ipv4.MalformedPacket(f"bad IPv4 lengths (ihl {ihl}, total {total})")
            if packet[ipv4.PROTOCOL] != ipv4.PROTO_DSR:
                self.out.drop("not-dsr", packet)
                return
            o = ihl + dsr.HEADER_LEN
            plen = (packet[ihl + 2] << 8) | packet[ihl + 3]
            if o + plen > total:
                raise dsr.MalformedDsr(f"DSR payload length {plen} runs past the packet")
            if plen >= 4 and packet[o] == dsr.OPT_SRCRT and packet[o + 1] + 2 == plen:
                # A data packet whose only option is the Source Route.
                if packet[12:16] == self._me and self._own_source(packet, o):
                    return
                self.forwarder.source_routed(
                    now, bytes(packet), ihl, o, total, src_mac, rssi_dbm, False, self.trust_data
                )
            else:
                self.control.received(now, packet, src_mac, rssi_dbm)
        except (ValueError, IndexError, struct.error) as e:  # MalformedPacket is a ValueError
            self.counters["malformed"] += 1
            self.last_malformed = str(e)
            self.out.drop("malformed", packet)

    def _own_source(self, packet: bytes, o: int) -> bool:
        """Drop (and count) a data packet with this node's own address as its source
        whose Source Route is at ``o``; False when it may go on (see the docstring)."""
        salvage = ((packet[o + 2] & 0x03) << 2) | (packet[o + 3] >> 6)
        if salvage and self.trust_data:
            return False
        self.counters["own-source"] += 1
        self.out.drop("own-source", packet)
        return True

    def overhear_frame(
        self, now: float, packet: bytes, src_mac: bytes | None = None, rssi_dbm: float | None = None
    ) -> None:
        """A unicast between two other nodes (promiscuous radio): only 8.4.4 shortening."""
        self._now = now
        try:
            if len(packet) < 20 or packet[0] >> 4 != 4 or packet[ipv4.PROTOCOL] != ipv4.PROTO_DSR:
                self.counters["overheard-ignored"] += 1
                return
            ihl = (packet[0] & 0x0F) * 4
            o = ihl + dsr.HEADER_LEN
            if not self.trust_data and route_only(packet, ihl):
                self.counters["unsigned-not-shortened"] += 1  # teaches nothing
                return
            if packet[o] == dsr.OPT_SRCRT and o + 4 <= len(packet):
                sr_at = o  # a data packet: the Source Route comes first
            else:
                sr = dsr.parse(packet)[1].first(dsr.SourceRoute)
                if sr is None:
                    self.counters["overheard-ignored"] += 1
                    return
                sr_at = sr.offset
            olen = packet[sr_at + 1]
            if olen < 2 or (olen - 2) & 3 or (packet[sr_at + 3] & 0x3F) > (olen - 2) >> 2:
                raise dsr.MalformedDsr(f"source route option length {olen}")
            if sr_at + 2 + olen > len(packet):
                raise dsr.MalformedDsr("source route runs past the packet")
            self.forwarder.shortening.overheard(now, packet, sr_at)
        except (ValueError, IndexError, struct.error) as e:
            # Not ours to drop (it was never addressed to us): only counted.
            self.counters["overheard-malformed"] += 1
            self.last_malformed = str(e)

    def send_local(self, now: float, packet: bytes) -> None:
        self._now = now
        if self.atra is not None and self.atra.pinned_send(now, packet):
            return
        if self.forwarder.memoised(now, packet):
            return
        try:
            hdr = ipv4.parse(packet)
        except ipv4.MalformedPacket as e:
            self.counters["malformed"] += 1
            self.last_malformed = str(e)
            self.out.drop("malformed", packet)
            return
        dst = hdr.dst
        if dst.is_multicast or dst == BROADCAST or dst == self.address:
            self.out.drop("unroutable", packet)
            return
        self.counters["data-originated"] += 1
        route = self.strategy.route_for(now, dst)
        if route is not None:
            self.forwarder.send_own(now, packet, dst, route)
            return
        self.send_buffer.add(now, dst, bytes(packet))
        self._drain_buffer_drops()
        if dst not in self.discovery.searches:
            self.discovery.start(now, dst)

    def link_event(self, now: float, event: LinkEvent) -> None:
        self._now = now
        lq = self.lq
        if lq is not None and lq.observe(now, event):
            return
        if isinstance(event, LinkUp):
            self.links.link_up(event.neighbour)
            # A neighbour is a one-hop route (RFC 4728 4.1: any usable route info),
            # if the admission policy lets the link build routes.
            if self.links.admits(now, event.neighbour, event.signal_dbm):
                self.routes.learn(now, (self.address, event.neighbour))
            self.discovery.restart(now)
        elif isinstance(event, LinkDown):
            if lq is not None and lq.down_vetoed(now, event.neighbour, event.reason):
                return
            self.maintenance.link_broken(now, event.neighbour, None, event.reason)
        elif isinstance(event, TxFailed):
            if lq is not None and not lq.tx_failed(now, event.neighbour):
                self._vetoed(event)
                return
            self.maintenance.link_broken(now, event.neighbour, event.packet, "tx-failed")
        elif isinstance(event, SignalSample) and self.atra is not None:
            self.atra.signal(now, event.neighbour, event.signal_dbm)

    def _vetoed(self, event: TxFailed) -> None:
        """The veto keeps the link (docs/linkquality.md): the packet goes again."""
        if event.packet is not None:
            self.counters["veto-resent"] += 1
            self.out.send(event.neighbour, event.packet)

    def rediscover(self, now: float, dst: IPv4Address) -> bool:
        """Ask for ``dst`` now instead of waiting out the request back-off
        (:meth:`Discovery.rediscover`)."""
        self._now = now
        return self.discovery.rediscover(now, dst)

    def link_predicted_to_fail(self, now: float, neighbour: IPv4Address) -> bool:
        """A failure prediction (Atra) says the link to ``neighbour`` will break soon:
        True if the path strategy moved routes off it (SMR's backups)."""
        self._now = now
        return self.strategy.predicted_failure(now, neighbour)

    def handle_timer(self, now: float) -> None:
        self._now = now
        while (due := self.timers.pop_due(now)) is not None:
            kind, data = due
            if kind is Timer.REBROADCAST:
                self.counters["requests-forwarded"] += 1
                self.out.send(None, data)
            elif kind is Timer.SEND:
                self.out.send(*data)
            else:
                self.discovery.handle_timer(now, data)
        self.routes.handle_timer(now)
        if self.send_buffer.expire(now):
            self._drain_buffer_drops()
        self.bus.handle_timer(now)
        self.discovery.forget_unwanted()
        if self.atra is not None:
            self.atra.state.handle_timer(now)
        self.strategy.handle_timer(now)

    def get_timer(self) -> float | None:
        due = (
            self.timers.next_at(),
            self.send_buffer.next_expiry(),
            self.routes.expiry_check,
            self.bus.get_timer(),
            self.atra.state.get_timer() if self.atra is not None else None,
            self.strategy.get_timer(),
        )
        return min((t for t in due if t is not None), default=None)

    # ------------------------------------------------------------------ for the strategy
    def ask(self, now: float, dst: IPv4Address, counter: str) -> None:
        """A propagating request for ``dst`` now (:meth:`Discovery.ask`)."""
        self.discovery.ask(now, dst, counter)

    def forget_routes(self) -> None:
        """Routes changed outside the cache: forget the source's memoised routes."""
        self.forwarder.forget_routes()

    # ------------------------------------------------------------------ where concerns meet
    def _learned(self, now: float, path: Path) -> None:
        """A new path was cached: Atra's wait may be over, and every destination on it
        that something waits for is up."""
        if self.atra is not None:
            self.atra.learned(now)
        for node in path[1:]:
            if (
                node in self.discovery.searches
                or node in self.routes.down
                or self.send_buffer.waiting(node)
            ):
                self._route_up(now, node)

    def _route_up(self, now: float, dst: IPv4Address) -> None:
        route = self.strategy.route_for(now, dst)
        if route is None:
            return
        self.discovery.complete(now, dst)
        self.routes.down.discard(dst)
        self.out.notify(route_up(route))
        for pkt in self.send_buffer.release(dst):
            self.forwarder.send_data(now, pkt, route)
        if self.bus.state.holds:
            self.dsr_bus.repaired(now, dst)

    def _wanted(self, target: IPv4Address) -> bool:
        """Something waits for a route to ``target``: our send buffer, a pivot hold, or
        Atra's RFP looking for a way around a predicted link (it keeps asking, with the
        request back-off, until the prediction's horizon: Anantharaman et al. IV-A)."""
        if self.send_buffer.waiting(target):
            return True
        if self.atra is not None and self.atra.state.still_waiting(self._now, target):
            return True
        return self.dsr_bus.pivot_waits(target)

    def _gave_up(self, now: float, target: IPv4Address) -> None:
        """Discovery for ``target`` gave up (8.2.1): what waits cannot be delivered."""
        atra = self.atra
        if (
            atra is not None
            and atra.state.still_waiting(now, target)
            and not self.send_buffer.waiting(target)
        ):
            # Only RFP was asking: the current route still works; no route-down.
            atra.state.done_waiting(target)
            return
        self.counters["discoveries-failed"] += 1
        self.send_buffer.discard(target, "no-route")
        self._drain_buffer_drops()
        self.dsr_bus.give_up(target)
        self.out.notify(ev.RouteDown(dst=str(target), reason="no-route"))

    def _drain_buffer_drops(self) -> None:
        for reason, _dst, pkt in self.send_buffer.take_dropped():
            self.out.drop(reason, pkt)

    # ------------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        now = self._now
        self.cache.expire(now)
        return {
            "protocol": self.name,
            "address": str(self.address),
            "paths": [
                {
                    "dst": str(e.path[-1]),
                    "next_hop": str(e.path[1]),
                    "hops": len(e.path) - 1,
                    "path": [str(a) for a in e.path],
                    "age_s": round(now - e.added, 3),
                    "idle_s": round(now - e.used, 3),
                }
                for e in sorted(self.cache.entries(), key=lambda e: (len(e.path), e.path))
            ],
            "discoveries": self.discovery.status(now),
            "request_table": self.table.status(),
            "send_buffer": {
                str(d): self.send_buffer.waiting(d) for d in self.send_buffer.destinations()
            },
            "send_buffer_drops": dict(self.send_buffer.drops),
            "counters": dict(self.counters),
            "bounds": self.bounds(),
            "bus": self.bus.state.status(),
            **({"atra": self.atra.status(now)} if self.atra is not None else {}),
            **({"link_quality": self.lq.status(now)} if self.lq is not None else {}),
            **self.strategy.status(now),
        }

    def bounds(self) -> dict[str, dict[str, int]]:
        """Every table: entries, bound and evictions (docs/security.md "Bounded state")."""
        cfg, c = self.config, self.counters
        sb = self.send_buffer
        links = self.links.bounds()
        return {
            "route_cache": {
                "size": len(self.cache), "limit": cfg.route_cache_size,
                "evicted": self.cache.evicted,
            },
            "request_table": {
                "size": len(self.table), "limit": cfg.request_table_size,
                "evicted": c["request-table-evicted"],
            },
            "neighbours": links["neighbours"],
            "send_buffer": {
                "size": len(sb), "limit": sb.max_packets,
                "evicted": sb.drops["full"] + sb.drops["full-destination"],
            },
            "held_links": links["held_links"],
            "down": {
                "size": len(self.routes.down), "limit": MAX_DOWN, "evicted": c["down-evicted"]
            },
            **self.bus.state.bounds(),
        }  # fmt: skip
