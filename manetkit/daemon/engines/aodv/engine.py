"""AODV routing engine, sans-I/O, per RFC 3561 section 6.

Inputs and outputs are those of :mod:`manetkit.daemon.engines.base`. The engine is
composed of one component per concern, each in its own module:

================  ==================================================================
``routes``        the route table as the engine feeds and invalidates it (6.1, 6.2)
``links``         neighbours heard, Hello loss, unidirectional links, admission
``signalling``    the control messages this node puts on the air
``discovery``     route discovery: expanding ring, retries, rate limit (6.3, 6.4)
``requests``      RREQs that reach this node (6.5, 6.6)
``replies``       RREPs that reach this node (6.7, 6.8)
``hellos``        Hello messages (6.9)
``forwarder``     the data path and the send buffer (6.2, 6.3, 6.11 ii)
``maintenance``   link breaks, local repair, RERRs (6.11, 6.12)
``bus``/``aodv_bus``  TCP-BuS (Kim, Toh & Choi IV), shared with DSR / on RERRs
``atra``          Atra's RFP on RFC 3561's messages (None when off)
``lq``/``link_metric``  link quality (admission, ETX, the failure veto) and the
                  accumulated path metric on RREQ/RREP (None when off;
                  docs/linkquality.md)
================  ==================================================================

The engine feeds the inputs to them and reacts where concerns meet: a route that
becomes valid (route-up, its discovery or local repair over, the send buffer released,
a TCP-BuS pivot repaired), a discovery that gave up, the one timer.

Choices RFC 3561 leaves open, made for real Linux laptops: control messages are
re-originated at every hop (as AODV-UU does), so every control packet teaches the
shared NeighbourTable the neighbour's MAC; any invalidation increments the destination
sequence number (:mod:`.routes`); a unicast frame that 802.11 gave up on is a link
break, like ``LinkDown`` (:mod:`.maintenance`); route lifetime expiry is silent.

The link admission policy (:mod:`manetkit.daemon.admission`) and the
path metric (:mod:`manetkit.daemon.engines.shared.metric`) are plug-ins; their
defaults (admit every link, hop count) are RFC 3561's behaviour. With
``link_quality`` on, they are link quality's (:mod:`manetkit.daemon.engines.linkquality`)
unless given.

Data from the radio that carries this node's own address as its IP source is dropped
(counted ``own-source``): no genuine packet comes back to its source, and buffering it
would start a discovery for any destination a forger names. With ``trust_data=False``
(the shell passes it when authentication is required, docs/security.md) data, which is
never signed, does not count as hearing its sender (6.9): only signed messages keep a
neighbour alive.
"""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Any

from manetkit import events as ev
from manetkit.daemon.admission import ADMIT_ALL, LinkAdmission
from manetkit.daemon.engines.aodv.atra import AodvAtra
from manetkit.daemon.engines.aodv.bus import AodvBus, notices
from manetkit.daemon.engines.aodv.config import AodvConfig
from manetkit.daemon.engines.aodv.deadline import INF, Deadline
from manetkit.daemon.engines.aodv.discovery import Discovery, RreqSeen, Search
from manetkit.daemon.engines.aodv.forwarding import Forwarder
from manetkit.daemon.engines.aodv.hellos import Hellos
from manetkit.daemon.engines.aodv.linkmetric import AodvLinkMetric
from manetkit.daemon.engines.aodv.links import LinkView
from manetkit.daemon.engines.aodv.maintenance import Maintenance
from manetkit.daemon.engines.aodv.replies import ReplyHandler
from manetkit.daemon.engines.aodv.requests import RequestHandler
from manetkit.daemon.engines.aodv.routes import Routes
from manetkit.daemon.engines.aodv.routetable import (
    REPAIRING,
    OwnSequence,
    Route,
    RouteState,
    RouteTable,
)
from manetkit.daemon.engines.aodv.signalling import Signalling
from manetkit.daemon.engines.atra.state import AtraState
from manetkit.daemon.engines.base import (
    Dropped,
    LinkDown,
    LinkEvent,
    RoutingEngine,
    SignalSample,
    TxFailed,
)
from manetkit.daemon.engines.linkquality import LinkQuality
from manetkit.daemon.engines.shared.bus import Bus
from manetkit.daemon.engines.shared.metric import HOP_COUNT, PathMetric
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.sendbuffer import SendBuffer
from manetkit.daemon.wire import aodv, ipv4
from manetkit.daemon.wire import manet_ext as mx

__all__ = ["AodvEngine"]

_BCAST_B = b"\xff\xff\xff\xff"


class AodvEngine(RoutingEngine):
    name = "aodv"
    is_control_frame = staticmethod(aodv.is_control)  # UDP/654

    def __init__(
        self,
        address: IPv4Address,
        config: AodvConfig,
        neighbours: NeighbourTable,
        *,
        admission: LinkAdmission | None = None,
        metric: PathMetric | None = None,
        trust_data: bool = True,
    ) -> None:
        super().__init__()
        self.address = address
        self.trust_data = trust_data
        self.config = c = config
        self.neighbours = neighbours
        # Link quality (docs/linkquality.md): only with a mechanism on.
        lqc = c.link_quality
        self.lq = (
            LinkQuality(lqc, address, self.counters, neighbours.capacity) if lqc.enabled else None
        )
        self.wants_link_reports = self.lq is not None
        if admission is None:
            admission = self.lq.admission if self.lq and self.lq.admission else ADMIT_ALL
        if metric is None:
            metric = self.lq.metric if self.lq and self.lq.metric else HOP_COUNT
        self.link_metric = (
            AodvLinkMetric(lqc.metric, self.counters)
            if self.lq is not None and self.lq.metric is not None
            else None
        )
        self._me_b = address.packed
        self._now = 0.0  # time of the latest input, for status()
        self.last_malformed = ""  # why the last malformed packet was refused (debugging)
        out, counters = self.out, self.counters
        self.deadline = Deadline()
        self.own_seq = OwnSequence()
        self.send_buffer = SendBuffer.from_settings(c)
        # TCP-BuS (docs/elfn-bus.md): notices are understood, acknowledged and relayed
        # even with bus off; holding and pivot repair only with ``bus``.
        self.bus = Bus(c, out)
        # Atra (docs/atra.md): only with a mechanism on.
        # Atra's trend predictor reads the measured loss from link quality, when it runs.
        loss_of = self.lq.estimates.recent_loss if self.lq is not None else None
        atra = AtraState(c.atra, address, loss_of) if c.atra.enabled else None
        self.links = LinkView(
            neighbours, c.blacklist_timeout_ms / 1000, admission, self.deadline, counters
        )
        self.signalling = Signalling(address, c, self.links, out, counters)
        self.routes = Routes(
            address, c, metric, self.deadline, out, counters, became_valid=self._became_valid
        )
        self.seen = RreqSeen(c.rreq_seen_size, c.path_discovery_time_ms / 1000, counters)
        self.discovery = Discovery(
            address, c, self.routes.table, self.signalling, self.own_seq, self.seen,
            self.deadline, counters, gave_up=self._gave_up,
            repair_failed=self._repair_failed, recompute=self._recompute,
        )  # fmt: skip
        self.forwarder = Forwarder(
            address, c, self.routes.table, self.links, self.signalling, self.discovery,
            self.send_buffer, self.bus, self.deadline, out, counters,
        )  # fmt: skip
        self.requests = RequestHandler(
            address, c, self.links, self.routes, self.seen, self.own_seq, self.signalling, atra,
            counters, self.link_metric,
        )  # fmt: skip
        self.replies = ReplyHandler(
            address, c, self.routes, self.signalling, counters, self.link_metric
        )
        self.hellos = Hellos(
            address, c, self.links, self.routes, self.signalling, self.forwarder, self.own_seq,
            counters,
        )  # fmt: skip
        self.aodv_bus = AodvBus(
            address, self.bus, self.routes, self.signalling, self.forwarder, self.deadline,
            counters,
        )  # fmt: skip
        self.atra = (
            AodvAtra(address, c, atra, self.routes, self.discovery, self.signalling, out, counters)
            if atra is not None
            else None
        )
        self.maintenance = Maintenance(
            address, c, self.links, self.routes, self.discovery, self.signalling,
            self.forwarder, self.bus, self.aodv_bus, self.atra, out, counters,
        )  # fmt: skip
        self.deadline.at = self.hellos.next_at

    # ------------------------------------------------------------------ inputs
    def receive_frame(
        self, now: float, packet: bytes, src_mac: bytes | None = None, rssi_dbm: float | None = None
    ) -> None:
        self._now = now
        if len(packet) < 20 or packet[0] >> 4 != 4:
            self._malformed(packet, "not an IPv4 packet")
            return
        # UDP first: data is mostly TCP
        if packet[ipv4.PROTOCOL] == ipv4.PROTO_UDP and aodv.is_control(packet):
            dst = packet[ipv4.DST]
            if dst == self._me_b or dst == _BCAST_B:
                self._control(now, packet, src_mac, rssi_dbm)
                return
        if packet[ipv4.SRC] == self._me_b:
            self.counters["own-source"] += 1
            self.out.queue.append(Dropped("own-source", packet))
            return
        if src_mac is not None and self.links.heard_from and self.trust_data:
            # 6.9: any packet from a neighbour counts as hearing it.
            self.links.heard_mac(now, src_mac)
        self.forwarder.data(now, packet, True, src_mac)

    def send_local(self, now: float, packet: bytes) -> None:
        self._now = now
        if len(packet) < 20 or packet[0] >> 4 != 4:
            self._malformed(packet, "not an IPv4 packet")
            return
        self.forwarder.originated += 1
        if self.atra is not None:
            self.atra.state.sent_to(now, IPv4Address(packet[ipv4.DST]))
        self.forwarder.data(now, packet, False, None)

    def link_event(self, now: float, event: LinkEvent) -> None:
        self._now = now
        lq = self.lq
        if lq is not None and lq.observe(now, event):
            return
        if isinstance(event, LinkDown):
            if lq is not None and lq.down_vetoed(now, event.neighbour, event.reason):
                return
            self.maintenance.link_break(now, event.neighbour, event.reason, None)
        elif isinstance(event, TxFailed):
            if lq is not None and not lq.tx_failed(now, event.neighbour):
                # The veto keeps the link (docs/linkquality.md): the packet goes again.
                if event.packet is not None:
                    self.counters["veto-resent"] += 1
                    self.out.send(event.neighbour, event.packet)
                return
            if event.packet is not None and aodv.is_control(event.packet):
                self.maintenance.control_tx_failed(now, event.neighbour, event.packet)
            self.maintenance.link_break(now, event.neighbour, "tx-failed", event.packet)
        elif isinstance(event, SignalSample) and self.atra is not None:
            self.atra.signal(now, event.neighbour, event.signal_dbm)
        # LinkUp teaches nothing AODV can use (no sequence number).
        if self.atra is not None and isinstance(event, LinkDown | TxFailed):
            self.atra.state.link_failed(now, event.neighbour)

    def handle_timer(self, now: float) -> None:
        self._now = now
        if now < self.deadline.at:
            return
        self.routes.expire(now)
        self.discovery.handle_timer(now)
        self.links.handle_timer(now)
        for nb in self.links.lost(now):
            mac = self.neighbours.mac_of(nb)
            self.out.notify(
                ev.NeighbourDown(
                    neighbour=str(nb), mac=mac.hex(":") if mac else None, reason="hello-loss"
                )
            )
            self.maintenance.link_break(now, nb, "hello-loss", None)
        self.hellos.handle_timer(now)
        if self.send_buffer.expire(now):
            self.forwarder.drain_buffer_drops()
        self.bus.handle_timer(now)
        self.seen.purge(now)
        self.links.purge(now)
        self._recompute()

    def get_timer(self) -> float | None:
        return None if self.deadline.at == INF else self.deadline.at

    def rediscover(self, now: float, dst: IPv4Address) -> bool:
        """6.3: a new RREQ for ``dst`` now, e.g. for an ELFN probe
        (:meth:`Discovery.rediscover`)."""
        self._now = now
        return self.discovery.rediscover(now, dst)

    # ------------------------------------------------------------------ control in
    def _control(
        self, now: float, packet: bytes, src_mac: bytes | None, rssi: float | None
    ) -> None:
        try:
            hdr, msg = aodv.parse_control(packet)
        except aodv.MalformedAodv as e:
            self._malformed(packet, str(e))
            return
        sender = hdr.src
        if sender == self.address:
            return  # our own broadcast echoed back
        if src_mac is not None:
            self.neighbours.learn(now, sender, src_mac, rssi)
        self.links.heard(now, sender)
        if isinstance(msg, aodv.RREQ):
            self.requests.received(now, hdr, msg, rssi)
        elif isinstance(msg, aodv.RREP):
            if hdr.dst.packed == _BCAST_B and msg.dest == sender:
                self.hellos.received(now, sender, msg, rssi)
            elif self.links.admits(now, sender, rssi):  # a refused link builds no route
                self.replies.received(now, sender, msg)
                if self.atra is not None and self.atra.state.waiting:
                    self.atra.rrep(now)
        elif isinstance(msg, aodv.RERR):
            self.maintenance.rerr_received(now, sender, msg)
        else:
            acks = [i for i in notices(msg, self.counters) if isinstance(i, mx.BusAck)]
            if acks:
                self.aodv_bus.acked(sender, acks)
                return
            self.links.acked(sender)

    # ------------------------------------------------------------------ where concerns meet
    def _became_valid(self, now: float, r: Route, was: RouteState | None) -> None:
        """A route became valid: route-up, its discovery or repair is over, what waited
        for it goes out."""
        self.out.notify(
            ev.RouteUp(dst=str(r.dst), next_hop=str(r.next_hop), hops=r.hops, seq=r.seq)
        )
        d = self.discovery.searches.pop(r.dst, None)
        if d is not None and not d.repair:
            # Route discovery latency: first RREQ (6.3) to a valid route.
            self.counters["discoveries-completed"] += 1
            self.counters["discovery-latency-ms"] += round((now - d.started) * 1000)
        if d is not None and d.repair:
            self.counters["local-repairs"] += 1
            if r.hops > d.old_hops and r.precursors:
                # 6.12: the repaired route is longer: tell the sources (N: keep the route).
                self.signalling.rerr(now, [(r.dst, r.seq)], set(r.precursors), True)
        if self.bus.state.holds:
            self.aodv_bus.repaired(now, r)
        self.forwarder.release(now, r)

    def _gave_up(self, now: float, dst: IPv4Address) -> None:
        """6.3: the discovery gave up: the packets waiting for ``dst`` are dropped."""
        self.send_buffer.discard(dst, "no-route")
        self.forwarder.drain_buffer_drops()
        self.out.notify(ev.RouteDown(dst=str(dst), reason="no-route"))

    def _repair_failed(self, now: float, d: Search) -> None:
        self.maintenance.repair_failed(now, d)

    def _recompute(self) -> None:
        """The exact earliest deadline of every component."""
        t = self.hellos.next_at
        for r in self.routes.table:
            if r.expires < t and r.state is not REPAIRING:
                t = r.expires
        t = self.discovery.earliest(t)
        t = self.links.earliest(t)
        for e in (self.send_buffer.next_expiry(), self.bus.get_timer()):
            if e is not None:
                t = min(t, e)
        self.deadline.at = t

    def _malformed(self, packet: bytes, why: str) -> None:
        self.counters["malformed"] += 1
        self.last_malformed = why
        self.out.queue.append(Dropped("malformed", packet))

    # ------------------------------------------------------------------ reading
    @property
    def seq(self) -> int:
        """This node's own sequence number (6.1)."""
        return self.own_seq.value

    @property
    def route_table(self) -> RouteTable:
        """Every entry, any state (status, tests)."""
        return self.routes.table

    def route(self, dst: IPv4Address) -> Route | None:
        """The route table entry for ``dst`` (any state), for status and tests."""
        return self.routes.table.get(dst.packed)

    def bounds(self) -> dict[str, dict[str, int]]:
        """Every table: entries, bound and evictions (docs/security.md "Bounded state")."""
        c, sb, rt, nb = self.counters, self.send_buffer, self.routes.table, self.neighbours
        return {
            "route_table": {"size": len(rt), "limit": rt.capacity, "evicted": rt.evicted},
            "rreq_seen": {
                "size": len(self.seen), "limit": self.config.rreq_seen_size,
                "evicted": c["rreq-seen-evicted"],
            },
            "neighbours": {"size": len(nb), "limit": nb.capacity, "evicted": nb.evicted},
            "hello_from": {
                "size": len(self.links.heard_from), "limit": nb.capacity,
                "evicted": c["hello-evicted"],
            },
            "send_buffer": {
                "size": len(sb), "limit": sb.max_packets,
                "evicted": sb.drops["full"] + sb.drops["full-destination"],
            },
            **self.bus.state.bounds(),
        }  # fmt: skip

    def status(self) -> dict[str, Any]:
        """Routes, discoveries, send buffer and counters (``manetkit status``, JSON-able)."""
        now = self._now
        routes = [
            {
                "dst": str(r.dst),
                "next_hop": str(r.next_hop),
                "hops": r.hops,
                "seq": r.seq if r.valid_seq else None,
                "state": r.state.value,
                "lifetime_s": round(r.expires - now, 3),
                "precursors": sorted(str(p) for p in r.precursors),
            }
            for r in sorted(self.routes.table, key=lambda r: int(r.dst))
        ]
        counters = dict(self.counters)
        counters.update(self.forwarder.counters_view())
        return {
            "protocol": "aodv",
            "address": str(self.address),
            "seq": self.seq,
            "routes": routes,
            "discoveries": self.discovery.status(now),
            "blacklist": sorted(str(n) for n in self.links.blacklist),
            "send_buffer": {
                str(d): self.send_buffer.waiting(d) for d in self.send_buffer.destinations()
            },
            "send_buffer_drops": dict(self.send_buffer.drops),
            "counters": counters,
            "bounds": self.bounds(),
            "bus": self.bus.state.status(),
            **({"atra": self.atra.status(now)} if self.atra is not None else {}),
            **({"link_quality": self.lq.status(now)} if self.lq is not None else {}),
        }
