"""DSR Route Maintenance (RFC 4728 8.3, 8.4.3).

- 8.3.1 link failures come from 802.11 feedback (``TxFailed``) or link sensing
  (``LinkDown``): the link is cut from the cache (and held, :mod:`.links`), and every
  destination left without a route is reported down.
- 8.3.4 a Route Error goes to the failed packet's source, carrying manetkit's ELFN
  option (the failed packet's flow, Holland & Vaidya section 6) and, for a TCP flow
  with TCP-BuS on, the pivot's ERDN; 8.3.5 every node that handles a Route Error cuts
  the link from its cache.
- 8.4.3 salvaging: a packet of another source that hit the break goes on over another
  cached route, up to MaxSalvageCount times; this node's own packet is sent again as if
  new (another cached route, or the send buffer and a discovery), and with
  ``rediscover_on_break`` it asks for a fresh route at once (:meth:`Discovery.refresh`).
  With ``trust_data`` off (authentication required) another source's unsigned packet
  (:mod:`.trust`) is reported to its source but neither salvaged nor held by a TCP-BuS
  pivot: nothing unsigned decides what this node does next.

Network-layer acknowledgements (8.3.3, RexmtBufferSize, MaxMaintRexmt) are not used:
802.11 gives link-layer feedback, which RFC 4728 8.3.1 prefers.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable
from ipaddress import IPv4Address
from typing import Any

from manetkit import events as ev
from manetkit.daemon.engines.base import Outbox
from manetkit.daemon.engines.dsr.atra import DsrAtra
from manetkit.daemon.engines.dsr.bus import DsrBus
from manetkit.daemon.engines.dsr.cache import RouteCache
from manetkit.daemon.engines.dsr.config import DsrConfig
from manetkit.daemon.engines.dsr.discovery import Discovery
from manetkit.daemon.engines.dsr.forwarding import Forwarder
from manetkit.daemon.engines.dsr.links import LinkView
from manetkit.daemon.engines.dsr.routes import Routes
from manetkit.daemon.engines.dsr.signalling import Signalling
from manetkit.daemon.engines.shared.bus import Bus, flow_from_fields
from manetkit.daemon.wire import dsr, ipv4
from manetkit.daemon.wire import manet_ext as mx

Failed = tuple[ipv4.IPv4Header, dsr.DsrHeader, bytes, dict[str, Any]]


class Maintenance:
    def __init__(
        self,
        address: IPv4Address,
        config: DsrConfig,
        cache: RouteCache,
        links: LinkView,
        routes: Routes,
        discovery: Discovery,
        signalling: Signalling,
        forwarder: Forwarder,
        bus: Bus,
        dsr_bus: DsrBus,
        atra: DsrAtra | None,
        out: Outbox,
        counters: Counter[str],
        resend: Callable[[float, bytes], None],
        trust_data: bool = True,
    ) -> None:
        self.address = address
        self.trust_data = trust_data
        self.config = config
        self.cache = cache
        self.links = links
        self.routes = routes
        self.discovery = discovery
        self.signalling = signalling
        self.forwarder = forwarder
        self.bus = bus
        self.dsr_bus = dsr_bus
        self.atra = atra
        self.out = out
        self.counters = counters
        self.resend = resend  # this node's own packet, sent again as if new

    def link_broken(
        self, now: float, neighbour: IPv4Address, packet: bytes | None, reason: str
    ) -> None:
        """The link to ``neighbour`` broke (RFC 4728 8.3.1): cut, report, salvage."""
        failed = None
        if packet is not None:
            try:
                failed = _failed_packet(packet)
            except (ValueError, IndexError, struct.error):
                self.counters["malformed"] += 1
        elfn = failed[3] if failed is not None else {}
        self.links.hold(now, self.address, neighbour, local=True)
        lost = self.routes.cut_link(now, self.address, neighbour, reason)
        if lost:
            self.counters["link-breaks"] += 1
        for dst in sorted(lost):
            fields: dict[str, Any] = {
                "dst": str(dst),
                "next_hop": str(neighbour),
                "reason": reason,
                "broken_link": (str(self.address), str(neighbour)),
            }
            if elfn.get("dst") == str(dst):
                fields.update(elfn)
            self.routes.mark_down(dst)
            self.out.notify(ev.RouteDown(**fields))
        if failed is not None:
            self._salvage(now, neighbour, packet, failed)  # type: ignore[arg-type]
        if self.atra is not None:
            self.atra.broken(now, neighbour, packet)

    def _salvage(self, now: float, neighbour: IPv4Address, packet: bytes, failed: Failed) -> None:
        """The packet that hit the break: 8.3.4's Route Error, then 8.4.3's salvage."""
        ip, hdr, inner, fields = failed
        sr = hdr.first(dsr.SourceRoute)
        salvage = sr.option.salvage if sr is not None else 0
        is_error = bool(hdr.find(dsr.RouteError))
        if ip.src == self.address:
            if hdr.next_header == dsr.NO_NEXT_HEADER:
                self.out.drop("link-broken", packet)
                return
            # Our own packet: try another route, else wait for a new discovery.
            self.counters["rerouted"] += 1
            self.resend(now, inner)
            self.discovery.refresh(now, ip.dst)
            return
        if is_error:
            self.out.drop("link-broken", packet)  # never a Route Error about a Route Error
            return
        data = hdr.next_header != dsr.NO_NEXT_HEADER
        flow = flow_from_fields(fields) if data else None
        trusted = self.trust_data or _carries_control(hdr)
        key = None
        if trusted and self.bus.on and flow is not None and flow.proto == ipv4.PROTO_TCP:
            key = (flow.src.packed, flow.dst.packed, flow.sport, flow.dport)
            if key in self.bus.state.holds:
                self.bus.hold(key, packet)  # this flow's break is already being handled
                return
        notices: list[mx.Item] = [flow] if flow is not None else []
        if key is not None and flow is not None:
            ident = self.bus.state.next_ident()
            notices.append(mx.Notice(mx.KIND_ERDN, ident, self.address, flow))
        self.signalling.error(now, ip.src, neighbour, salvage, notices)
        if not data:
            self.out.drop("link-broken", packet)
            return
        if not trusted:
            self.counters["unsigned-not-salvaged"] += 1
            self.out.drop("link-broken", packet)
            return
        if key is not None and flow is not None:
            opt = sr.option if sr is not None else None
            self.dsr_bus.pivot(now, key, ip, opt, packet, flow)  # type: ignore[arg-type]
            return
        if self.config.salvage and salvage < self.config.max_salvage_count:
            route = self.cache.lookup(now, ip.dst)
            if route is not None:
                # 8.4.3: this node becomes Address[1] of the new route.
                self.counters["salvaged"] += 1
                self.forwarder.send_data(now, inner, route, salvage + 1)
                return
        self.out.drop("link-broken", packet)

    def error_seen(self, now: float, err: dsr.RouteError, elfn: mx.Flow | None = None) -> None:
        """Any node handling a Route Error cuts the broken link (RFC 4728 8.3.5).

        At the error's destination (the failed packet's source) an ELFN option adds the
        failed packet's flow to the route-down event (Holland & Vaidya section 6).
        """
        self.counters["errors-seen"] += 1
        bad = err.unreachable
        if bad is None:
            return
        if err.error_src != self.address:
            self.links.hold(now, err.error_src, bad, local=False)
        lost = self.routes.cut_link(now, err.error_src, bad, "rerr")
        if err.error_dst != self.address:
            return
        if elfn is not None and elfn.src == self.address:
            self.discovery.refresh(now, elfn.dst)  # our packet to elfn.dst was lost
        for dst, next_hop in sorted(lost.items()):
            self.routes.mark_down(dst)
            fields: dict[str, Any] = {
                "dst": str(dst),
                "next_hop": str(next_hop),
                "reason": "rerr",
                "broken_link": (str(err.error_src), str(bad)),
                "broken_by": str(err.error_src),
            }
            if elfn is not None and elfn.dst == dst and elfn.src == self.address:
                fields.update(elfn.fields(), elfn=True)
                if elfn.proto == ipv4.PROTO_TCP:
                    fields["seq"] = elfn.seq
                self.counters["elfn-received"] += 1
            self.out.notify(ev.RouteDown(**fields))


def _carries_control(hdr: dsr.DsrHeader) -> bool:
    """An option besides Source Route and padding: the packet was signed (:mod:`.trust`)."""
    return any(not isinstance(p.option, dsr.SourceRoute | dsr.Pad1 | dsr.PadN) for p in hdr.options)


def _failed_packet(packet: bytes) -> Failed:
    """(IP header, DSR header, the packet without DSR, its ELFN fields)."""
    ip, hdr = dsr.parse(packet)
    inner = dsr.strip(packet)
    fields: dict[str, Any] = {"src": str(ip.src), "dst": str(ip.dst), "proto": hdr.next_header}
    if hdr.next_header == ipv4.PROTO_TCP:
        iihl = (inner[0] & 0x0F) * 4
        t = ipv4.tcp_ports_seq(inner[iihl:])
        if t is not None:
            fields.update(sport=t[0], dport=t[1], seq=t[2])
    return ip, hdr, inner, fields
