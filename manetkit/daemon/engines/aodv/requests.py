"""RREQs that reach an AODV node (RFC 3561 6.5, 6.6).

6.5: a RREQ from a blacklisted neighbour (6.8), over a link the admission policy
refuses or (Atra) one predicted to fail is ignored; otherwise the sender becomes a
one-hop route, a copy already processed within PATH_DISCOVERY_TIME is dropped, and
the reverse route to the originator is created or refreshed. 6.6.1: the destination
replies (its sequence number at least the requested one); 6.6.2: an intermediate node
with a fresh enough route replies for it, and 6.6.3 with the G flag also tells the
destination; otherwise the RREQ is rebroadcast with the larger destination number.
"""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv4Address

from manetkit.daemon.engines.aodv.config import AodvConfig
from manetkit.daemon.engines.aodv.discovery import RreqSeen
from manetkit.daemon.engines.aodv.linkmetric import AodvLinkMetric
from manetkit.daemon.engines.aodv.links import LinkView
from manetkit.daemon.engines.aodv.routes import Routes
from manetkit.daemon.engines.aodv.routetable import VALID, OwnSequence, seq_newer
from manetkit.daemon.engines.aodv.signalling import Signalling
from manetkit.daemon.engines.atra.state import AtraState
from manetkit.daemon.wire import aodv, ipv4


class RequestHandler:
    def __init__(
        self,
        address: IPv4Address,
        config: AodvConfig,
        links: LinkView,
        routes: Routes,
        seen: RreqSeen,
        seq: OwnSequence,
        signalling: Signalling,
        atra: AtraState | None,
        counters: Counter[str],
        link_metric: AodvLinkMetric | None = None,
    ) -> None:
        self.address = address
        self.config = config
        self.links = links
        self.routes = routes
        self.table = routes.table
        self.seen = seen
        self.seq = seq
        self.signalling = signalling
        self.atra = atra
        self.link_metric = link_metric  # the accumulated path metric (None: hop count)
        self.counters = counters
        self.net_traversal = config.net_traversal_time_ms / 1000
        self.node_traversal = config.node_traversal_time_ms / 1000

    def received(self, now: float, hdr: ipv4.IPv4Header, m: aodv.RREQ, rssi: float | None) -> None:
        sender = hdr.src
        self.counters["rreq-received"] += 1
        if self.links.blacklisted(now, sender):
            return  # 6.8: ignore RREQs from blacklisted neighbours
        if not self.links.admits(now, sender, rssi):
            return  # not over a link that may not build routes
        if self.atra is not None and self.atra.suppress_request(now, sender):
            return  # Atra: not over a link predicted to fail
        self.routes.touch_neighbour(now, sender)
        if m.orig == self.address:
            return
        lqm = self.link_metric
        adv = lqm.advertised(m) if lqm is not None else None
        duplicate = not self.seen.first(now, (m.orig, m.rreq_id))
        if adv is not None:
            cost = adv + self.routes.metric.link_cost(now, self.address, sender)
            if lqm.copy(m.orig, m.rreq_id, cost, duplicate):  # type: ignore[union-attr]
                duplicate = False  # a clearly cheaper copy: processed again (HWMP, LQSR)
        if duplicate:
            self.counters["rreq-duplicate"] += 1
            return  # 6.5: already processed within PATH_DISCOVERY_TIME
        hops = m.hop_count + 1
        if hops > 255:
            self.counters["rreq-hop-overflow"] += 1
            return
        # 6.5: reverse route to the originator.
        min_life = 2 * self.net_traversal - 2 * hops * self.node_traversal
        rev, _ = self.routes.update(
            now, m.orig, sender, hops, m.orig_seq, max(min_life, 0), advertised=adv
        )
        if rev.state is not VALID:
            # Our (invalid) entry holds a newer number than the RREQ: the originator
            # will ask again with a higher one; answering now could point backwards.
            self.counters["rreq-stale-reverse"] += 1
            return
        if rev.expires < now + min_life:
            rev.expires = now + min_life
        if m.dest == self.address:
            # 6.6.1: the destination replies; its number is at least the requested one.
            if not m.unknown_seq and seq_newer(m.dest_seq, self.seq.value):
                self.seq.value = m.dest_seq
            rrep = aodv.RREP(
                0, self.address, self.seq.value, m.orig, self.config.my_route_timeout_ms
            )
            if lqm is not None:
                rrep.extensions = lqm.extensions([], 0.0, 0)
            self.counters["rrep-sent"] += 1
            self.signalling.rrep(now, rrep, rev)
            return
        fwd = self.table.get(m.dest.packed)
        if (
            not m.dest_only
            and fwd is not None
            and fwd.state is VALID
            and fwd.valid_seq
            and (m.unknown_seq or not seq_newer(m.dest_seq, fwd.seq))
            and fwd.next_hop != sender  # never answer with a route through the asker
        ):
            # 6.6.2: an intermediate node with a fresh enough route replies.
            self.table.add_precursor(fwd, rev.next_hop)
            self.table.add_precursor(rev, fwd.next_hop)
            life = max(int((fwd.expires - now) * 1000), 0)
            rrep = aodv.RREP(fwd.hops, m.dest, fwd.seq, m.orig, life)
            if lqm is not None:
                rrep.extensions = lqm.extensions([], fwd.cost, fwd.hops)
            self.counters["rrep-sent-intermediate"] += 1
            self.signalling.rrep(now, rrep, rev)
            if m.gratuitous:
                # 6.6.3: tell the destination the route to the originator.
                glife = max(int((rev.expires - now) * 1000), 0)
                g = aodv.RREP(rev.hops, m.orig, m.orig_seq, m.dest, glife)
                if lqm is not None:
                    g.extensions = lqm.extensions([], rev.cost, rev.hops)
                self.counters["rrep-sent-gratuitous"] += 1
                self.signalling.rrep(now, g, fwd)
            return
        if hdr.ttl <= 1:
            return
        # 6.5: rebroadcast with the larger of the two destination numbers.
        dest_seq, unknown = m.dest_seq, m.unknown_seq
        if fwd is not None and fwd.valid_seq and (unknown or seq_newer(fwd.seq, dest_seq)):
            dest_seq, unknown = fwd.seq, False
        out = aodv.RREQ(
            hops,
            m.rreq_id,
            m.dest,
            dest_seq,
            m.orig,
            m.orig_seq,
            join=m.join,
            repair=m.repair,
            gratuitous=m.gratuitous,
            dest_only=m.dest_only,
            unknown_seq=unknown,
            extensions=m.extensions
            if lqm is None or adv is None
            else lqm.extensions(m.extensions, cost, hops),
        )
        self.counters["rreq-forwarded"] += 1
        self.signalling.broadcast(now, out, hdr.ttl - 1)
