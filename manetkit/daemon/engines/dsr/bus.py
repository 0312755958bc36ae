"""TCP-BuS in DSR (Kim, Toh & Choi section IV; docs/elfn-bus.md): the shared
:class:`~manetkit.daemon.engines.shared.bus.Bus` with its notices carried as manetkit's
DSR options (:mod:`manetkit.daemon.wire.manet_ext`).

- The pivot (the node whose link broke under a TCP flow) holds the flow's packets and
  repairs locally: with a cached route at once, else by a Route Discovery from here.
  Once repaired it sends the ERSN to the source along the path back (with the new full
  route as a Route Reply, so the source and the nodes on the way learn it) and its
  held packets go on in order over the new route.
- A node on the way acknowledges each notice to the hop it came from (BUS-ACK); the
  next hop relaying it is a passive acknowledgement.
"""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv4Address

from manetkit.daemon.engines.dsr.cache import RouteCache
from manetkit.daemon.engines.dsr.config import DsrConfig
from manetkit.daemon.engines.dsr.discovery import Discovery
from manetkit.daemon.engines.dsr.forwarding import Forwarder
from manetkit.daemon.engines.dsr.links import LinkView
from manetkit.daemon.engines.dsr.signalling import Signalling
from manetkit.daemon.engines.shared.bus import Bus, FlowKey, flow_key
from manetkit.daemon.wire import dsr, ipv4
from manetkit.daemon.wire import manet_ext as mx


class DsrBus:
    def __init__(
        self,
        address: IPv4Address,
        config: DsrConfig,
        bus: Bus,
        cache: RouteCache,
        links: LinkView,
        signalling: Signalling,
        forwarder: Forwarder,
        discovery: Discovery,
        counters: Counter[str],
    ) -> None:
        self.address = address
        self.config = config
        self.bus = bus
        self.state = bus.state
        self.cache = cache
        self.links = links
        self.signalling = signalling
        self.forwarder = forwarder
        self.discovery = discovery
        self.counters = counters

    def pivot_waits(self, target: IPv4Address) -> bool:
        """A pivot hold waits for a route to ``target``."""
        t = target.packed
        return any(h.pivot and k[1] == t for k, h in self.state.holds.items())

    def pivot(
        self,
        now: float,
        key: FlowKey,
        ip: ipv4.IPv4Header,
        sr: dsr.SourceRoute | None,
        packet: bytes,
        flow: mx.Flow,
    ) -> None:
        """This node is the pivot of ``flow``: hold its packets and repair locally (a
        cached route at once, else a Route Discovery from here), then ERSN."""
        h = self.state.start(now, key, pivot=True)
        h.head_seq = flow.seq
        if sr is not None:
            full = ([ip.src] if sr.salvage == 0 else []) + list(sr.addresses) + [ip.dst]
            if self.address in full:
                h.upstream = tuple(full[: full.index(self.address) + 1])
        self.bus.hold(key, packet)
        self.counters["bus-pivot"] += 1
        if self.cache.lookup(now, ip.dst) is not None:
            self.repaired(now, ip.dst)
        elif ip.dst not in self.discovery.searches:
            self.discovery.start(now, ip.dst)

    def repaired(self, now: float, dst: IPv4Address) -> None:
        """A route to ``dst`` exists again: every pivot hold for it sends its ERSN and
        its packets go out in order over the new route."""
        route = self.cache.lookup(now, dst)
        if route is None:
            return
        st = self.state
        for key in st.pivot_keys(dst.packed):
            h = st.holds[key]
            ersn = st.ersn_for(key, dst, self.address)
            options: list = []
            full = (*h.upstream, *route[1:])
            src = ersn.flow.src
            if h.upstream and h.upstream[0] == src and len(set(full)) == len(full):
                options.append(dsr.RouteReply(full[1:]))
            back = tuple(reversed(h.upstream))
            self.signalling.control(now, src, options, [ersn], back)
            for pkt in st.release(key):
                self.resend(now, pkt)

    def resend(self, now: float, packet: bytes) -> None:
        """Send a held packet on: over this node's route to its destination (salvaged,
        RFC 4728 8.4.3), else along its own source route."""
        try:
            ip, hdr = dsr.parse(packet)
            inner = dsr.strip(packet)
        except ValueError:
            self.bus.out.drop("malformed", packet)
            return
        sr = hdr.first(dsr.SourceRoute)
        salvage = sr.option.salvage if sr is not None else 0
        route = self.cache.lookup(now, ip.dst)
        if route is not None and salvage < self.config.max_salvage_count:
            self.forwarder.send_data(now, inner, route, salvage + 1)
        elif sr is not None:
            self.forwarder.source_routed(
                now, packet, ip.ihl, sr.offset, ip.total_length, None, None, False,
                self.forwarder.trust_data,
            )  # fmt: skip
        else:
            self.bus.out.drop("bus-no-route", packet)

    def give_up(self, dst: IPv4Address) -> None:
        """Discovery for ``dst`` failed: the pivot holds for it are dropped."""
        st = self.state
        for key in st.pivot_keys(dst.packed):
            for pkt in st.release(key):
                self.bus.out.drop("no-route", pkt)

    def notices(
        self,
        now: float,
        ip: ipv4.IPv4Header,
        sr: dsr.ParsedOption | None,
        src_mac: bytes | None,
        items: list[mx.Item],
    ) -> list[mx.Notice] | None:
        """manetkit notices in a control packet. Returns the ERDN/ERSN this node must
        relay reliably, or None for a duplicate (acknowledged again, not relayed)."""
        receiver, prev, final = self._position(ip, sr)
        relay: list[mx.Notice] = []
        st = self.state
        for it in items:
            if isinstance(it, mx.BusAck):
                if ip.dst == self.address:
                    st.acked(it.key)
            elif isinstance(it, mx.Notice):
                if not receiver:
                    # Overheard the next hop relaying it: a passive acknowledgement.
                    by = self.links.address_of(src_mac)
                    if by is not None:
                        st.acked(it.key, by)
                    continue
                if prev is not None:
                    self.signalling.bus_ack(prev, mx.BusAck(it.kind, it.ident, it.pivot))
                if not st.first_time(now, it.key):
                    return None
                got = self.bus.first_copy(now, it, self.address, self.resend)
                if (got.relay or got.event is not None) and not final:
                    relay.append(it)
        return relay

    def relayed(
        self, now: float, notices: list[mx.Notice], frame_to: IPv4Address, pkt: bytes
    ) -> None:
        """The notices went on to ``frame_to`` in ``pkt``: keep them until acknowledged."""
        for n in notices:
            self.state.sent(now, n.key, frame_to, pkt, flow_key(n.flow))

    def _position(
        self, ip: ipv4.IPv4Header, sr: dsr.ParsedOption | None
    ) -> tuple[bool, IPv4Address | None, bool]:
        """(this node is the packet's receiver, the previous hop, it is the final one)."""
        final = ip.dst == self.address
        if sr is None:
            return final, ip.src, final
        opt = sr.option
        assert isinstance(opt, dsr.SourceRoute)
        full = ([ip.src] if opt.salvage == 0 else []) + list(opt.addresses) + [ip.dst]
        idx = len(full) - 1 - opt.segments_left
        if full[idx] != self.address or idx == 0:
            return False, None, False
        return True, full[idx - 1], idx == len(full) - 1
