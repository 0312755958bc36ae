"""Atra in AODV, with the same semantics as in DSR (:mod:`..dsr.atra`), on RFC 3561's
RERR/RREQ machinery. The protocol-neutral state is
:class:`~manetkit.daemon.engines.atra.state.AtraState`; the engine calls this component
only when ``atra`` has a mechanism on.

- RFP: a node that predicts the break of its link to N sends, for every valid route
  over N with precursors, a RERR with the N flag (RFC 3561 6.12: "keep the route") and
  manetkit's PREDICTED extension (type 249) to the precursors. A plain AODV node keeps
  the route and passes the RERR on, as for a repair; an Atra node passes it on with the
  extension. The source (a node that sends to the destination itself) floods one RREQ
  with the D flag (only the destination answers, so no cached route over the predicted
  link comes back) and keeps using its route; the destination's fresher RREP replaces
  it (6.2), and the source reports ``path-switch`` when the next hop changed. A node
  that predicted its link to P ignores RREQs from P (Atra's suppression,
  :mod:`.requests`).
- PRE: RFC 3561 6.11 already sends one RERR to every precursor of every route over a
  broken link, i.e. to all upstream users at once; Atra adds nothing there.
- SRP: AODV routes are symmetric by construction (the RREP sets the forward route along
  the reverse route of the RREQ), so there is nothing to pin.
"""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv4Address
from typing import Any

from manetkit import events as ev
from manetkit.daemon.engines.aodv.config import AodvConfig
from manetkit.daemon.engines.aodv.discovery import Discovery
from manetkit.daemon.engines.aodv.routes import Routes
from manetkit.daemon.engines.aodv.routetable import VALID, seq_next
from manetkit.daemon.engines.aodv.signalling import Signalling
from manetkit.daemon.engines.atra.state import AtraState, predicted_event
from manetkit.daemon.engines.base import Outbox
from manetkit.daemon.wire import aodv
from manetkit.daemon.wire import manet_ext as mx


class AodvAtra:
    def __init__(
        self,
        address: IPv4Address,
        config: AodvConfig,
        state: AtraState,
        routes: Routes,
        discovery: Discovery,
        signalling: Signalling,
        out: Outbox,
        counters: Counter[str],
    ) -> None:
        self.address = address
        self.config = config
        self.state = state
        self.routes = routes
        self.table = routes.table
        self.discovery = discovery
        self.signalling = signalling
        self.out = out
        self.counters = counters

    def signal(self, now: float, neighbour: IPv4Address, dbm: float) -> None:
        """A received power from ``neighbour`` (link sensing's SignalSample)."""
        st = self.state
        st.handle_timer(now)  # scores predictions that timed out
        p = st.signal(now, neighbour, dbm)
        if p is None:
            return
        self.out.notify(predicted_event(p))
        ext = mx.aodv_extension(mx.Predicted(p.eta_s, p.signal_dbm))
        out: list[tuple[IPv4Address, int]] = []
        to: set[IPv4Address] = set()
        for r in self.table:
            if r.state is not VALID or r.next_hop != neighbour:
                continue
            if r.precursors:
                out.append((r.dst, r.seq))
                to |= r.precursors
            self._rediscover(now, r.dst, neighbour)
        if out:
            self.signalling.rerr(now, out, to, True, [ext])
            st.counters["predicted-errors-sent"] += 1

    def rerr(self, now: float, sender: IPv4Address, m: aodv.RERR, pred: mx.Predicted) -> None:
        """A PREDICTED RERR: keep the routes, pass it upstream, rediscover if a source."""
        self.counters["atra-predicted-errors-seen"] += 1
        out: list[tuple[IPv4Address, int]] = []
        to: set[IPv4Address] = set()
        for dst, _seq in m.dests:
            r = self.table.get(dst.packed)
            if r is None or r.state is not VALID or r.next_hop != sender:
                continue
            if r.precursors:
                out.append((dst, r.seq))
                to |= r.precursors
            self._rediscover(now, dst, sender)
        if out:
            ext = mx.aodv_extension(pred)
            self.signalling.rerr(now, out, to, True, [ext])

    def _rediscover(self, now: float, dst: IPv4Address, via: IPv4Address) -> None:
        """At a source of traffic to ``dst``: one destination-only RREQ, route kept."""
        st = self.state
        if dst not in st.active_destinations(now):
            return
        if dst in st.waiting and frozenset(st.waiting[dst][1]) in {
            frozenset(link) for link in st.avoided(now)
        }:
            return  # asked already for this prediction
        r = self.table.get(dst.packed)
        if r is None:
            return
        st.avoid_link(now, self.address, via)
        st.wait_for_route(now, dst, (self.address, r.next_hop, dst), (self.address, via))
        ident = self.discovery.new_request(now)
        msg = aodv.RREQ(
            hop_count=0,
            rreq_id=ident,
            dest=dst,
            # one more than known: the destination answers with a fresher number (6.6.1),
            # so the reply replaces the working route (6.2) instead of tying with it
            dest_seq=seq_next(r.seq),
            orig=self.address,
            orig_seq=self.discovery.seq.value,
            gratuitous=self.config.gratuitous_rrep,
            dest_only=True,
            unknown_seq=not r.valid_seq,
        )
        self.counters["rreq-sent"] += 1
        st.counters["rediscoveries"] += 1
        self.signalling.broadcast(now, msg, self.config.net_diameter)

    def rrep(self, now: float) -> None:
        """After a RREP: a source waiting for a route around a predicted link got one?"""
        st = self.state
        for dst, (old, _link) in list(st.waiting.items()):
            if not st.still_waiting(now, dst):
                continue
            r = self.table.get(dst.packed)
            if r is None or r.state is not VALID:
                st.done_waiting(dst)
                continue
            if r.next_hop == old[1]:
                continue
            st.done_waiting(dst)
            st.counters["predicted-switches"] += 1
            self.out.notify(
                ev.PathSwitch(
                    dst=str(dst),
                    from_path=tuple(str(a) for a in old),
                    to_path=(str(self.address), str(r.next_hop), str(dst)),
                    reason="predicted-failure",
                )
            )

    def status(self, now: float) -> dict[str, Any]:
        return self.state.status(now)
