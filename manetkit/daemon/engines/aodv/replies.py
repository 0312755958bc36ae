"""RREPs that reach an AODV node (RFC 3561 6.7, 6.8).

The sender becomes a one-hop route; a RREP that asks for it gets a RREP-ACK (6.8). The
forward route to the RREP's destination is created or updated if the RREP is fresher
(6.2), and only then (or when it confirms the route held) the RREP goes on towards
its originator, with precursor lists set so a later break reaches everybody using the
route.
"""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv4Address

from manetkit.daemon.engines.aodv.config import AodvConfig
from manetkit.daemon.engines.aodv.linkmetric import AodvLinkMetric
from manetkit.daemon.engines.aodv.routes import Routes
from manetkit.daemon.engines.aodv.routetable import VALID
from manetkit.daemon.engines.aodv.signalling import Signalling
from manetkit.daemon.wire import aodv


class ReplyHandler:
    def __init__(
        self,
        address: IPv4Address,
        config: AodvConfig,
        routes: Routes,
        signalling: Signalling,
        counters: Counter[str],
        link_metric: AodvLinkMetric | None = None,
    ) -> None:
        self.address = address
        self.link_metric = link_metric  # the accumulated path metric (None: hop count)
        self.routes = routes
        self.table = routes.table
        self.signalling = signalling
        self.counters = counters
        self.active_route_timeout = config.active_route_timeout_ms / 1000

    def received(self, now: float, sender: IPv4Address, m: aodv.RREP) -> None:
        self.counters["rrep-received"] += 1
        nbr = self.routes.touch_neighbour(now, sender)
        if m.ack_required:
            self.counters["rrep-ack-sent"] += 1
            self.signalling.unicast(aodv.RREPAck(), sender)
        if m.dest == self.address:
            return
        hops = m.hop_count + 1
        if hops > 255:
            self.counters["rrep-hop-overflow"] += 1
            return
        lqm = self.link_metric
        adv = lqm.advertised(m) if lqm is not None else None
        fwd, changed = self.routes.update(
            now, m.dest, sender, hops, m.dest_seq, m.lifetime_ms / 1000, advertised=adv
        )
        if not changed:
            if not (
                fwd.state is VALID
                and fwd.seq == m.dest_seq
                and fwd.hops == hops
                and fwd.next_hop == sender
            ):
                self.counters["rrep-stale"] += 1
                return  # 6.7: forwarded only if it created or updated the route
            # The RREP confirms the route we hold (a second discovery for the same
            # destination): that is an update of its lifetime, so it goes on.
            t = now + m.lifetime_ms / 1000
            if fwd.expires < t:
                fwd.expires = t
        if m.orig == self.address:
            return  # our discovery is complete (route-up and the buffer: the engine)
        rev = self.table.get(m.orig.packed)
        if rev is None or rev.state is not VALID:
            self.counters["rrep-no-reverse"] += 1
            return
        # 6.7: precursors, so a later break reaches everybody using the route.
        self.table.add_precursor(fwd, rev.next_hop)
        self.table.add_precursor(nbr, rev.next_hop)
        self.table.add_precursor(rev, fwd.next_hop)
        t = now + self.active_route_timeout
        if rev.expires < t:
            rev.expires = t
        out = aodv.RREP(
            hops,
            m.dest,
            m.dest_seq,
            m.orig,
            m.lifetime_ms,
            repair=m.repair,
            prefix_size=m.prefix_size,
            extensions=m.extensions
            if lqm is None
            else lqm.extensions(m.extensions, fwd.cost, fwd.hops),
        )
        self.counters["rrep-forwarded"] += 1
        self.signalling.rrep(now, out, rev)
