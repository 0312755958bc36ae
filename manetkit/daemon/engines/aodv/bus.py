"""TCP-BuS in AODV (Kim, Toh & Choi section IV; docs/elfn-bus.md): the shared
:class:`~manetkit.daemon.engines.shared.bus.Bus` with its notices carried on RFC 3561's
messages.

- ERDN/ERSN travel as a RERR with the N flag (6.12: plain nodes keep their routes) and
  manetkit's extensions, unicast hop by hop towards the flow's source along the
  reverse route; each hop acknowledges with a BUS-ACK extension in a RREP-ACK.
- The pivot (the node whose link broke under a TCP flow) always tries a local repair
  (6.12) and sends the ERDN with the sequence number at the head of its queue; its own
  packets wait in the repair's send buffer. When the repair finds a route it sends the
  ERSN; when it fails, the source gets a plain RERR with ELFN (Holland & Vaidya 6).
"""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv4Address

from manetkit.daemon.engines.aodv.deadline import Deadline
from manetkit.daemon.engines.aodv.forwarding import Forwarder
from manetkit.daemon.engines.aodv.routes import Routes
from manetkit.daemon.engines.aodv.routetable import Route
from manetkit.daemon.engines.aodv.signalling import Signalling
from manetkit.daemon.engines.shared.bus import Bus, flow_key
from manetkit.daemon.wire import aodv
from manetkit.daemon.wire import manet_ext as mx


class AodvBus:
    def __init__(
        self,
        address: IPv4Address,
        bus: Bus,
        routes: Routes,
        signalling: Signalling,
        forwarder: Forwarder,
        deadline: Deadline,
        counters: Counter[str],
    ) -> None:
        self.address = address
        self.bus = bus
        self.state = bus.state
        self.routes = routes
        self.signalling = signalling
        self.forwarder = forwarder
        self.deadline = deadline
        self.counters = counters
        self.hold_s = bus.state.settings.bus_hold_s

    def _send(self, now: float, notice: mx.Notice, msg: aodv.RERR) -> None:
        """Unicast an ERDN/ERSN RERR towards the flow's source; retransmitted until
        the next hop acknowledges it (BUS-ACK in a RREP-ACK)."""
        up = self.routes.upstream(notice.flow.src.packed)
        if up is None:
            self.counters["bus-notice-unroutable"] += 1
            return
        pkt = self.signalling.packet(msg, up)
        self.bus.out.send(up, pkt)
        self.state.sent(now, notice.key, up, pkt, flow_key(notice.flow))
        self.deadline.lower(now + self.state.rexmt)

    def pivot(self, now: float, flow: mx.Flow, r: Route) -> None:
        """This node is the pivot of ``flow`` (its route to ``r.dst`` broke): ERDN
        with the sequence at the head of its queue; the repair is under way."""
        key = flow_key(flow)
        h = self.state.start(now, key, pivot=True)
        h.head_seq = flow.seq
        self.deadline.lower(now + self.hold_s)
        self.counters["bus-pivot"] += 1
        n = mx.Notice(mx.KIND_ERDN, self.state.next_ident(), self.address, flow)
        exts = [mx.aodv_extension(flow), mx.aodv_extension(n)]
        self._send(now, n, aodv.RERR([(r.dst, r.seq)], True, exts))

    def repaired(self, now: float, r: Route) -> None:
        """The local repair found a route: ERSN to every held flow (the pivot's own
        packets wait in the repair's send buffer, so the hold itself is empty)."""
        st = self.state
        for key in st.pivot_keys(r.dst_b):
            n = st.ersn_for(key, r.dst, self.address)
            st.holds.pop(key)
            self._send(now, n, aodv.RERR([(r.dst, r.seq)], True, [mx.aodv_extension(n)]))

    def repair_failed(self, dst: IPv4Address, r: Route | None) -> list[tuple[int, bytes]]:
        """The local repair for ``dst`` failed: the pivot's holds end, and their flows
        ride the plain RERR (ELFN) to their sources, who must hear it."""
        exts = []
        st = self.state
        for key in st.pivot_keys(dst.packed):
            h = st.holds.pop(key)
            f = mx.Flow(IPv4Address(key[0]), dst, key[2], key[3], h.head_seq)
            exts.append(mx.aodv_extension(f))
            up = self.routes.upstream(key[0])
            if r is not None and up is not None:
                self.routes.table.add_precursor(r, up)
        return exts

    def rerr(self, now: float, sender: IPv4Address, m: aodv.RERR, notices: list[mx.Notice]) -> None:
        """An ERDN/ERSN from ``sender``: acknowledge it, act on it once, relay it."""
        for n in notices:
            ack = mx.BusAck(n.kind, n.ident, n.pivot)
            self.signalling.unicast(aodv.RREPAck([mx.aodv_extension(ack)]), sender)
            if not self.state.first_time(now, n.key):
                continue
            got = self.bus.first_copy(now, n, self.address, self.forwarder.send_or_buffer)
            if got.event is None and got.relay and n.kind == mx.KIND_ERDN and self.bus.on:
                self.deadline.lower(now + self.hold_s)
            if got.event is None and got.relay:
                self._send(now, n, aodv.RERR(list(m.dests), m.no_delete, list(m.extensions)))

    def acked(self, sender: IPv4Address, acks: list[mx.BusAck]) -> None:
        for a in acks:
            self.state.acked(a.key, sender)


def notices(msg: aodv.Message, counters: Counter[str]) -> list[mx.Item]:
    """manetkit's extensions on ``msg`` (docs/elfn-bus.md); malformed ones counted."""
    out: list[mx.Item] = []
    for t, data in msg.extensions:
        try:
            item = mx.from_aodv(t, data)
        except mx.MalformedNotice:
            counters["malformed-extension"] += 1
            continue
        if item is not None:
            out.append(item)
    return out
