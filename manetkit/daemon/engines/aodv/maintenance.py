"""AODV route maintenance (RFC 3561 6.11, 6.12).

- 6.11 (i) a link break (``LinkDown``, Hello loss, or a unicast frame 802.11 gave up on:
  ``TxFailed``) invalidates every valid route over the neighbour, its destination number
  incremented, and one RERR goes to all their precursors (unicast to a single one,
  else broadcast with TTL 1). The failed packet is re-buffered when this node is its
  source (TCP then sees a delay instead of a loss), buffered when the route is being
  repaired, and otherwise dropped as ``link-break``.
- 6.12 local repair when the break is within MAX_REPAIR_TTL hops of the destination,
  the route has precursors and carries data (the failed packet's destination, or data
  forwarded over it within ACTIVE_ROUTE_TIMEOUT; ``repair_idle_routes`` drops that
  last condition): the route stays (REPAIRING), data for it waits, a RREQ goes
  out from here; a repaired route longer than before is reported with the N flag.
  With TCP-BuS on, the pivot always tries a local repair for a TCP flow
  (Kim, Toh & Choi IV; :mod:`.bus`).
- 6.11 (iii) a RERR from the next hop of listed destinations invalidates those routes
  and goes on to their precursors; with the N flag (a repair downstream) the routes
  stay and the RERR goes on. ELFN (Holland & Vaidya 6): the failed packet's flow
  rides the RERR as an extension, and its source hears the error even when it is not a
  listed precursor.
"""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv4Address
from typing import Any

from manetkit import events as ev
from manetkit.daemon.engines.aodv.atra import AodvAtra
from manetkit.daemon.engines.aodv.bus import AodvBus, notices
from manetkit.daemon.engines.aodv.config import AodvConfig
from manetkit.daemon.engines.aodv.discovery import Discovery, Search
from manetkit.daemon.engines.aodv.forwarding import Forwarder
from manetkit.daemon.engines.aodv.links import LinkView
from manetkit.daemon.engines.aodv.routes import Routes
from manetkit.daemon.engines.aodv.routetable import (
    REPAIRING,
    VALID,
    Route,
    seq_newer,
    seq_next,
)
from manetkit.daemon.engines.aodv.signalling import Signalling
from manetkit.daemon.engines.base import Outbox, failed_packet_fields
from manetkit.daemon.engines.shared.bus import Bus, flow_from_fields
from manetkit.daemon.wire import aodv, ipv4
from manetkit.daemon.wire import manet_ext as mx


class Maintenance:
    def __init__(
        self,
        address: IPv4Address,
        config: AodvConfig,
        links: LinkView,
        routes: Routes,
        discovery: Discovery,
        signalling: Signalling,
        forwarder: Forwarder,
        bus: Bus,
        aodv_bus: AodvBus,
        atra: AodvAtra | None,
        out: Outbox,
        counters: Counter[str],
    ) -> None:
        self.address = address
        self.config = config
        self.links = links
        self.routes = routes
        self.table = routes.table
        self.discovery = discovery
        self.signalling = signalling
        self.forwarder = forwarder
        self.bus = bus
        self.aodv_bus = aodv_bus
        self.atra = atra
        self.out = out
        self.counters = counters

    # ------------------------------------------------------------------ 6.11 (i), 6.12
    def link_break(self, now: float, nb: IPv4Address, reason: str, packet: bytes | None) -> None:
        """The link to neighbour ``nb`` is gone: repair or report every route over it."""
        self.links.forget(nb)
        failed = (
            failed_packet_fields(packet)
            if packet is not None and not aodv.is_control(packet)
            else {}
        )
        flow = flow_from_fields(failed) if failed else None
        if flow is not None and flow.src == self.address:
            flow = None  # our own packet: re-buffered here, nobody upstream to tell
        out: list[tuple[IPv4Address, int]] = []
        to: set[IPv4Address] = set()
        exts: list[tuple[int, bytes]] = []
        cfg = self.config
        # 6.11 (i) names a break found "while transmitting data": repair the failed
        # packet's destination and routes that carried data lately, not every valid
        # route over the neighbour. Routes that RREPs of other searches left behind
        # would otherwise each start a repair flood at every break, and on a dense,
        # fast network those floods break more links than they mend.
        idle_s = cfg.active_route_timeout_ms / 1000
        failed_dst = failed.get("dst")
        for r in self.table:
            if r.state is not VALID or r.next_hop != nb:
                continue
            if r.valid_seq:
                r.seq = seq_next(r.seq)
            extra: dict[str, Any] = {"broken_link": (str(self.address), str(nb))}
            mine = flow is not None and flow.dst == r.dst
            mine_dst = failed_dst == str(r.dst)
            if mine_dst:
                extra.update(failed)
            bus = mine and self.bus.on and flow is not None and flow.proto == ipv4.PROTO_TCP
            repairable = (
                cfg.local_repair
                and bool(r.precursors)
                and r.hops <= cfg.max_repair_ttl
                and r.dst != nb
            )
            carries_data = mine_dst or cfg.repair_idle_routes or now - r.used <= idle_s
            if repairable and not carries_data:
                self.counters["local-repairs-idle-skipped"] += 1
            if bus or (repairable and carries_data):
                # TCP-BuS (Kim, Toh & Choi IV): the pivot always tries a local repair
                # for a TCP flow and tells the source with an ERDN.
                self._start_repair(now, r, packet)
                if bus and flow is not None:
                    self.aodv_bus.pivot(now, flow, r)
                fields = {"dst": str(r.dst), "next_hop": str(nb), "reason": reason}
                self.out.notify(ev.RouteDown(**(fields | {"repairing": True} | extra)))
                continue
            if mine and flow is not None:
                # ELFN (Holland & Vaidya 6): the failed packet's flow rides along, and
                # its source hears the error even when it is not a listed precursor.
                up = self.routes.upstream(flow.src.packed)
                if up is not None:
                    self.table.add_precursor(r, up)
                exts = [mx.aodv_extension(flow)]
            if r.precursors:
                out.append((r.dst, r.seq))
                to |= r.precursors
            r.precursors = set()
            self.routes.invalidate(now, r, reason, extra)
        if out:
            self.signalling.rerr(now, out, to, False, exts)
        if packet is not None and not aodv.is_control(packet) and len(packet) >= 20:
            self._reroute_failed(now, packet)

    def _start_repair(self, now: float, r: Route, packet: bytes | None) -> None:
        """6.12: rediscover ``r.dst`` from here; data for it waits in the buffer."""
        c = self.config
        r.state = REPAIRING
        back = 0
        if packet is not None and len(packet) >= 20:
            src = self.table.get(packet[ipv4.SRC])
            back = src.hops if src is not None else 0
        ttl = min(max(r.hops, back // 2) + c.local_add_ttl, c.net_diameter)
        self.discovery.searches.pop(r.dst, None)
        self.counters["local-repairs-started"] += 1
        self.discovery.start(now, r.dst, repair=True, ttl=ttl)

    def repair_failed(self, now: float, d: Search) -> None:
        """6.12: the repair found no route: RERR to the precursors, route invalid."""
        self.counters["local-repairs-failed"] += 1
        r = self.table.get(d.dst.packed)
        # TCP-BuS: the repair failed; the source gets a plain RERR with ELFN.
        exts = self.aodv_bus.repair_failed(d.dst, r)
        if r is not None and r.state is REPAIRING:
            if r.precursors:
                self.signalling.rerr(now, [(r.dst, r.seq)], set(r.precursors), False, exts)
            r.precursors = set()
            self.routes.invalidate(now, r, "repair-failed")
        self.forwarder.send_buffer.discard(d.dst, "no-route")
        self.forwarder.drain_buffer_drops()

    def _reroute_failed(self, now: float, packet: bytes) -> None:
        """The packet 802.11 gave up on: re-buffer ours, wait for a repair, else drop."""
        dst = packet[ipv4.DST]
        r = self.table.get(dst)
        if r is not None and r.state is VALID:
            self.forwarder.send_on(now, r, packet)  # a route appeared meanwhile (TTL done)
        elif packet[ipv4.SRC] == self.address.packed or (r is not None and r.state is REPAIRING):
            self.forwarder.buffer(now, IPv4Address(dst), packet)
        else:
            self.out.drop("link-break", packet)

    def control_tx_failed(self, now: float, nb: IPv4Address, packet: bytes) -> None:
        """6.8: a RREP that could not be delivered marks ``nb`` as unidirectional."""
        try:
            _, msg = aodv.parse_control(packet)
        except aodv.MalformedAodv:
            return
        if isinstance(msg, aodv.RREP):
            self.links.unidirectional(now, nb)

    # ------------------------------------------------------------------ 6.11 (iii)
    def rerr_received(self, now: float, sender: IPv4Address, m: aodv.RERR) -> None:
        """6.11 (iii): routes through ``sender`` to the listed destinations are gone."""
        self.counters["rerr-received"] += 1
        items = notices(m, self.counters)
        pred = next((i for i in items if isinstance(i, mx.Predicted)), None)
        if pred is not None and self.atra is not None:
            self.atra.rerr(now, sender, m, pred)  # Atra: the link still works
            return
        bus_notices = [i for i in items if isinstance(i, mx.Notice)]
        if bus_notices:
            # An ERDN/ERSN (N set: plain nodes keep their routes): relayed towards the
            # flow's source by the BuS path, not to the precursors.
            self.aodv_bus.rerr(now, sender, m, bus_notices)
            return
        elfn = [i for i in items if isinstance(i, mx.Flow)]
        out: list[tuple[IPv4Address, int]] = []
        to: set[IPv4Address] = set()
        for dst, seq in m.dests:
            r = self.table.get(dst.packed)
            if r is None or r.state is not VALID or r.next_hop != sender:
                continue
            if m.no_delete:
                # 6.12: a repair is under way downstream: keep the route, pass it on.
                if r.precursors:
                    out.append((dst, r.seq))
                    to |= r.precursors
                continue
            if not r.valid_seq or seq_newer(seq, r.seq):
                r.seq = seq
            extra: dict[str, Any] = {"broken_by": str(sender)}
            for f in elfn:
                if f.dst != dst:
                    continue
                if f.src == self.address:
                    # Holland & Vaidya 6: the source learns which packet hit the break.
                    extra.update(_elfn_fields(f))
                    self.counters["elfn-received"] += 1
                else:
                    up = self.routes.upstream(f.src.packed)
                    if up is not None:
                        self.table.add_precursor(r, up)  # the flow's source must hear of it
            if r.precursors:
                out.append((dst, r.seq))
                to |= r.precursors
            r.precursors = set()
            self.routes.invalidate(now, r, "rerr", extra)
        if out:
            exts = [mx.aodv_extension(f) for f in elfn if any(f.dst == d for d, _ in out)]
            self.signalling.rerr(now, out, to, m.no_delete, exts)


def _elfn_fields(f: mx.Flow) -> dict[str, Any]:
    """route-down fields at the source from a received ELFN extension."""
    out: dict[str, Any] = f.fields() | {"elfn": True}
    if f.proto == ipv4.PROTO_TCP:
        out["seq"] = f.seq
    return out
