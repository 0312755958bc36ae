"""DSR control packets that reach a node: every option of the DSR header in turn.

- Route Request (8.2.2): :mod:`.requests`.
- Route Error (8.3.5): :mod:`.maintenance`; one that carries Atra's PREDICTED option
  leaves the link in place (:mod:`.atra`).
- Route Reply (8.2.4, 8.2.3, 8.4.4): the route is cached in both directions; a reply
  addressed to this node is offered to the path strategy first (SMR's path sets).
- manetkit's options (ELFN, ERDN/ERSN, BUS-ACK: :mod:`manetkit.daemon.wire.manet_ext`):
  :mod:`.bus`; an ERDN/ERSN relayed on is kept until the next hop acknowledges it.
- Unknown options: RFC 4728 6.1's two high bits of the type say ignore, remove or drop.

A control packet with a Source Route then travels on like data (:mod:`.forwarding`).
With ``trust_data`` off (authentication required), a packet whose options are only a
Source Route and padding was not signed (:mod:`.trust`): it travels on but teaches
nothing, and one carrying this node's own address as its source is dropped.
"""

from __future__ import annotations

import struct
from collections import Counter
from ipaddress import IPv4Address

from manetkit.daemon.engines.base import Outbox
from manetkit.daemon.engines.dsr.atra import DsrAtra
from manetkit.daemon.engines.dsr.bus import DsrBus
from manetkit.daemon.engines.dsr.discovery import Discovery
from manetkit.daemon.engines.dsr.forwarding import Forwarder
from manetkit.daemon.engines.dsr.linkmetric import DsrLinkMetric
from manetkit.daemon.engines.dsr.links import LinkView
from manetkit.daemon.engines.dsr.maintenance import Maintenance
from manetkit.daemon.engines.dsr.requests import RequestHandler
from manetkit.daemon.engines.dsr.routes import Routes
from manetkit.daemon.engines.dsr.strategy import PathStrategy
from manetkit.daemon.engines.shared.bus import Bus
from manetkit.daemon.wire import dsr, ipv4
from manetkit.daemon.wire import manet_ext as mx


class ControlPath:
    def __init__(
        self,
        address: IPv4Address,
        links: LinkView,
        routes: Routes,
        strategy: PathStrategy,
        discovery: Discovery,
        requests: RequestHandler,
        maintenance: Maintenance,
        forwarder: Forwarder,
        bus: Bus,
        dsr_bus: DsrBus,
        atra: DsrAtra | None,
        out: Outbox,
        counters: Counter[str],
        link_metric: DsrLinkMetric | None = None,
        trust_data: bool = True,
    ) -> None:
        self.address = address
        self.trust_data = trust_data
        self.link_metric = link_metric  # LQSR's link metrics (None: hop count)
        self.links = links
        self.routes = routes
        self.strategy = strategy
        self.discovery = discovery
        self.requests = requests
        self.maintenance = maintenance
        self.forwarder = forwarder
        self.bus = bus
        self.dsr_bus = dsr_bus
        self.atra = atra
        self.out = out
        self.counters = counters

    def received(
        self, now: float, packet: bytes, src_mac: bytes | None, rssi: float | None
    ) -> None:
        ip, hdr = dsr.parse(packet)
        rreq = hdr.first(dsr.RouteRequest)
        if rreq is not None:
            opts = tuple(p.option for p in hdr.options) if self.link_metric is not None else ()
            self.requests.received(now, ip, rreq.option, src_mac, rssi, opts)  # type: ignore[arg-type]
            return
        buf = bytearray(packet)
        keep: list[dsr.ParsedOption] = []
        changed = False
        items: list[mx.Item] = []
        for p in hdr.options:
            opt = p.option
            if isinstance(opt, dsr.UnknownOption) and opt.type in mx.DSR_TYPES:
                item = mx.from_dsr(opt.type, opt.data)
                if item is not None:
                    items.append(item)
            elif isinstance(opt, dsr.UnknownOption):
                action = dsr.unknown_option_action(opt.type)
                self.counters[f"unknown-option-{action}"] += 1
                if action == "drop":
                    self.out.drop("unknown-option", packet)
                    return
                if action == "remove":
                    changed = True
                    continue
            keep.append(p)
        # Only padding besides any Source Route: data in disguise, never signed.
        unsigned = not items and all(
            isinstance(p.option, dsr.SourceRoute | dsr.Pad1 | dsr.PadN) for p in keep
        )
        if unsigned and ip.src == self.address:
            route = hdr.first(dsr.SourceRoute)
            salvaged = route is not None and route.option.salvage  # type: ignore[union-attr]
            if not (salvaged and self.trust_data):  # as DsrEngine's data path
                self.counters["own-source"] += 1
                self.out.drop("own-source", packet)
                return
        trusted = self.trust_data or not unsigned
        if changed:
            opts = [p.option for p in keep]
            inner = bytes(packet[hdr.end : ip.total_length])
            buf = bytearray(_with_options(packet, ip, hdr.next_header, opts, inner))
            ip, hdr = dsr.parse(buf)
        self._options(now, ip, hdr, items)
        sr = hdr.first(dsr.SourceRoute)
        relay: list[mx.Notice] = []
        if items:
            got = self.dsr_bus.notices(now, ip, sr, src_mac, items)
            if got is None:
                return  # a duplicate notice: acknowledged again, not relayed again
            relay = got
        if sr is not None:
            mark = len(self.out.queue)
            self.forwarder.source_routed(
                now, bytes(buf), ip.ihl, sr.offset, ip.total_length, src_mac, rssi, True,
                trusted,
            )  # fmt: skip
            if relay and self.bus.on:
                # Relayed an ERDN/ERSN: keep it until the next hop acknowledges it.
                for a in self.out.sent_since(mark)[:1]:
                    self.dsr_bus.relayed(now, relay, a.next_hop, a.packet)  # type: ignore[arg-type]
            return
        if ip.dst == self.address:
            # A one-hop control packet without a Source Route (other implementations).
            if trusted:
                self.links.heard(now, ip.src, src_mac, rssi)
                if self.links.admits(now, ip.src, rssi):
                    self.routes.learn(now, (self.address, ip.src))
            else:
                self.counters["unsigned-not-learned"] += 1
            self.forwarder.deliver(bytes(buf), ip.ihl, ip.total_length, control=True)
            return
        self.out.drop("no-source-route", packet)

    def _options(
        self, now: float, ip: ipv4.IPv4Header, hdr: dsr.DsrHeader, items: list[mx.Item]
    ) -> None:
        """Route Errors and Route Replies, in the header's order."""
        elfn = next((i for i in items if isinstance(i, mx.Flow)), None)
        atra = self.atra
        predicted = atra is not None and any(isinstance(i, mx.Predicted) for i in items)
        for p in hdr.options:
            opt = p.option
            if isinstance(opt, dsr.RouteError) and predicted:
                atra.error_seen(now, opt)  # type: ignore[union-attr] # the link still works
            elif isinstance(opt, dsr.RouteError):
                self.maintenance.error_seen(now, opt, elfn)
            elif isinstance(opt, dsr.RouteReply):
                self.counters["replies-seen"] += 1
                if self.link_metric is not None:
                    # LQSR: the reply's link costs, learnt before its route is chosen.
                    opts = [q.option for q in hdr.options]
                    self.link_metric.reply_seen(now, ip.dst, opt.addresses, opts)
                to_me = ip.dst == self.address and bool(opt.addresses)
                fresh = self.discovery.asked_at(opt.addresses[-1]) if to_me else -1.0
                if to_me:
                    self.strategy.reply_received(now, (self.address, *opt.addresses), fresh)
                self.routes.learn_around(now, [ip.dst, *opt.addresses], fresh)


def _with_options(
    packet: bytes, ip: ipv4.IPv4Header, next_header: int, options: list, inner: bytes
) -> bytes:
    """The packet with its DSR header rebuilt from ``options`` (IP fields kept)."""
    head = bytes(packet[: ip.ihl])
    body = dsr.dsr_header(next_header, options) + inner
    out = bytearray(head + body)
    struct.pack_into("!H", out, 2, len(out))
    out[ipv4.PROTOCOL] = ipv4.PROTO_DSR
    out[10:12] = b"\0\0"
    struct.pack_into("!H", out, 10, ipv4.checksum(out[: ip.ihl]))
    return bytes(out)
