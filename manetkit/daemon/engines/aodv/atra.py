"""Atra in AODV, with the same semantics as in DSR (:mod:`.dsrhooks`), on RFC 3561's
RERR/RREQ machinery. Mixed into :class:`manetkit.daemon.engines.aodv.AodvEngine`.

- RFP: a node that predicts the break of its link to N sends, for every valid route
  over N with precursors, a RERR with the N flag (RFC 3561 6.12: "keep the route") and
  manetkit's PREDICTED extension (type 249) to the precursors. A plain AODV node keeps
  the route and passes the RERR on, as for a repair; an Atra node passes it on with the
  extension. The source (a node that sends to the destination itself) floods one RREQ
  with the D flag (only the destination answers, so no cached route over the predicted
  link comes back) and keeps using its route; the destination's fresher RREP replaces
  it (6.2), and the source reports ``path-switch`` when the next hop changed. A node
  that predicted its link to P ignores RREQs from P (Atra's suppression).
- PRE: RFC 3561 6.11 already sends one RERR to every precursor of every route over a
  broken link, i.e. to all upstream users at once; Atra adds nothing there.
- SRP: AODV routes are symmetric by construction (the RREP sets the forward route along
  the reverse route of the RREQ), so there is nothing to pin.
"""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import TYPE_CHECKING, Any

from manetkit import events as ev
from manetkit.daemon.engines.atra.state import AtraState, predicted_event
from manetkit.daemon.engines.base import Notify
from manetkit.daemon.wire import aodv
from manetkit.daemon.wire import manet_ext as mx

if TYPE_CHECKING:
    _Base = Any
else:
    _Base = object


class AodvAtraHooks(_Base):
    """Atra's hooks on AodvEngine (attributes are the engine's)."""

    _atra: AtraState

    def _atra_signal(self, now: float, neighbour: IPv4Address, dbm: float) -> None:
        p = self._atra.signal(now, neighbour, dbm)
        if p is None:
            return
        self._emit(Notify(predicted_event(p)))
        ext = mx.aodv_extension(mx.Predicted(p.eta_s, p.signal_dbm))
        out: list[tuple[IPv4Address, int]] = []
        to: set[IPv4Address] = set()
        for r in self._routes:
            if r.state.name != "VALID" or r.next_hop != neighbour:
                continue
            if r.precursors:
                out.append((r.dst, r.seq))
                to |= r.precursors
            self._atra_rediscover(now, r.dst, neighbour)
        if out:
            self._send_rerr(now, out, to, True, [ext])
            self._atra.counters["predicted-errors-sent"] += 1

    def _atra_rerr(self, now: float, sender: IPv4Address, m: aodv.RERR, pred: mx.Predicted) -> None:
        """A PREDICTED RERR: keep the routes, pass it upstream, rediscover if a source."""
        self.counters["atra-predicted-errors-seen"] += 1
        out: list[tuple[IPv4Address, int]] = []
        to: set[IPv4Address] = set()
        for dst, _seq in m.dests:
            r = self._routes.get(dst.packed)
            if r is None or r.state.name != "VALID" or r.next_hop != sender:
                continue
            if r.precursors:
                out.append((dst, r.seq))
                to |= r.precursors
            self._atra_rediscover(now, dst, sender)
        if out:
            ext = mx.aodv_extension(pred)
            self._send_rerr(now, out, to, True, [ext])

    def _atra_rediscover(self, now: float, dst: IPv4Address, via: IPv4Address) -> None:
        """At a source of traffic to ``dst``: one destination-only RREQ, route kept."""
        if dst not in self._atra.active_destinations(now):
            return
        if dst in self._atra.waiting and frozenset(self._atra.waiting[dst][1]) in {
            frozenset(link) for link in self._atra.avoided(now)
        }:
            return  # asked already for this prediction
        r = self._routes.get(dst.packed)
        if r is None:
            return
        self._atra.avoid_link(now, self.address, via)
        self._atra.wait_for_route(now, dst, (self.address, r.next_hop, dst), (self.address, via))
        self.seq = aodv_seq_next(self.seq)
        self._rreq_id = (self._rreq_id + 1) & 0xFFFFFFFF
        self._seen[(self.address, self._rreq_id)] = now + self._pdt
        msg = aodv.RREQ(
            hop_count=0,
            rreq_id=self._rreq_id,
            dest=dst,
            # one more than known: the destination answers with a fresher number (6.6.1),
            # so the reply replaces the working route (6.2) instead of tying with it
            dest_seq=aodv_seq_next(r.seq),
            orig=self.address,
            orig_seq=self.seq,
            gratuitous=self.config.gratuitous_rrep,
            dest_only=True,
            unknown_seq=not r.valid_seq,
        )
        self.counters["rreq-sent"] += 1
        self._atra.counters["rediscoveries"] += 1
        self._broadcast(now, msg, self.config.net_diameter)

    def _atra_rrep(self, now: float) -> None:
        """After a RREP: a source waiting for a route around a predicted link got one?"""
        for dst, (old, _link) in list(self._atra.waiting.items()):
            if not self._atra.still_waiting(now, dst):
                continue
            r = self._routes.get(dst.packed)
            if r is None or r.state.name != "VALID":
                self._atra.done_waiting(dst)
                continue
            if r.next_hop == old[1]:
                continue
            self._atra.done_waiting(dst)
            self._atra.counters["predicted-switches"] += 1
            self._emit(
                Notify(
                    ev.PathSwitch(
                        dst=str(dst),
                        from_path=tuple(str(a) for a in old),
                        to_path=(str(self.address), str(r.next_hop), str(dst)),
                        reason="predicted-failure",
                    )
                )
            )

    def _atra_status(self) -> dict[str, Any]:
        return self._atra.status(self._now)


def aodv_seq_next(seq: int) -> int:
    from manetkit.daemon.engines.aodv.routes import seq_next

    return seq_next(seq)
