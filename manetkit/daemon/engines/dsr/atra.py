"""Atra in DSR (Anantharaman et al. section IV-A: the paper's own protocol).

Mixed into :class:`manetkit.daemon.engines.dsr.DsrEngine`; every method is a hook the
engine calls only when ``atra`` has a mechanism on. DSR's messages carry it:

- RFP: the node that predicts the break of its link to N sends each source that used the
  link in the last T a Route Error (NODE_UNREACHABLE N) with manetkit's PREDICTED
  option (type 52, :mod:`manetkit.daemon.wire.manet_ext`); Wireshark decodes it as a
  Route Error plus a PadN. Nodes that understand PREDICTED leave the link in their
  caches; the source sends one propagating Route Request per destination over the link
  and keeps the current route until a route avoiding the link is cached (then it cuts
  the predicted link from its cache and holds it, RFC 4728 8.3.5's cut, early) or the
  link really breaks (a plain Route Error). A node that predicted the failure of its
  link to P neither forwards nor answers Route Requests that came from P.
- PRE: on TxFailed/LinkDown every source that used the link in the last T gets a plain
  Route Error, not only the failed packet's (RFC 4728 8.3.4 sends that one).
- SRP: the destination sends a flow's pure ACKs along the reversed source route of the
  flow's last data packet.
"""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import TYPE_CHECKING, Any

from manetkit import events as ev
from manetkit.daemon.engines.atra.state import AtraState, predicted_event
from manetkit.daemon.engines.base import Deliver, Notify
from manetkit.daemon.wire import dsr, ipv4
from manetkit.daemon.wire import manet_ext as mx

if TYPE_CHECKING:
    from manetkit.daemon.engines.dsr.cache import Path

    _Base = Any
else:
    _Base = object


def _uses(path: Path, a: IPv4Address, b: IPv4Address) -> bool:
    return any({path[i], path[i + 1]} == {a, b} for i in range(len(path) - 1))


class DsrAtraHooks(_Base):
    """Atra's hooks on DsrEngine (attributes are the engine's)."""

    _atra: AtraState

    def _atra_signal(self, now: float, neighbour: IPv4Address, dbm: float) -> None:
        """A received power from ``neighbour`` (link sensing's SignalSample)."""
        p = self._atra.signal(now, neighbour, dbm)
        if p is None:
            return
        self._emit(Notify(predicted_event(p)))
        self.link_predicted_to_fail(now, neighbour)  # SMR moves to a backup path
        self._atra_avoid(now, self.address, neighbour)
        notice = mx.Predicted(p.eta_s, p.signal_dbm)
        for src in self._atra.pre.sources(now, neighbour):
            if src == self.address:
                continue
            err = dsr.RouteError.node_unreachable(self.address, src, neighbour, 0)
            if self._send_control(now, src, [err], [notice]):
                self._atra.counters["predicted-errors-sent"] += 1

    def _atra_error_seen(self, now: float, err: dsr.RouteError) -> None:
        """A PREDICTED Route Error: the link works for now; its source looks for another."""
        self.counters["atra-predicted-errors-seen"] += 1
        if err.error_dst == self.address and err.unreachable is not None:
            self._atra_avoid(now, err.error_src, err.unreachable)

    def _atra_avoid(self, now: float, a: IPv4Address, b: IPv4Address) -> None:
        """Routes of ours over link a-b: switch to a cached route that avoids it, else
        ask for one and keep the current route meanwhile (section IV-A)."""
        uses = []
        for d in self._atra.active_destinations(now):
            route = self._route_for(now, d)
            if route is not None and _uses(route, a, b):
                uses.append((d, route))
        if not uses:
            return
        self._atra.avoid_link(now, a, b)
        for d, route in uses:
            self._atra.wait_for_route(now, d, route, (a, b))
            if self.cache.lookup(now, d, avoid=(a, b)) is not None:
                self._atra_switch(now, d)
            else:
                self._atra_rediscover(now, d)

    def _atra_rediscover(self, now: float, dst: IPv4Address) -> None:
        from manetkit.daemon.engines.dsr.engine import _TIMER_DISCOVERY, _Discovery

        if dst in self._discoveries:
            return
        d = self._discoveries[dst] = _Discovery(dst, now, attempts=1)
        self._send_request(now, d, ttl=self.config.discovery_hop_limit)
        d.next_at = now + self.config.request_period_ms / 1000
        self._schedule(d.next_at, _TIMER_DISCOVERY, dst)
        self._atra.counters["rediscoveries"] += 1

    def _atra_switch(self, now: float, dst: IPv4Address) -> bool:
        """A route to ``dst`` avoiding the predicted link is cached: cut that link from
        the cache (held, so packets still in flight on it do not teach it again) and use
        the new route."""
        if not self._atra.still_waiting(now, dst):
            return False
        old, link = self._atra.waiting[dst]
        if self.cache.lookup(now, dst, avoid=link) is None:
            return False
        self._atra.done_waiting(dst)
        self._hold_link(now, link[0], link[1], local=False)
        self._purge_link(now, link[0], link[1], "predicted-failure")
        self._out.clear()
        new = self._route_for(now, dst)
        if new is None:
            return False
        self._atra.counters["predicted-switches"] += 1
        self._emit(
            Notify(
                ev.PathSwitch(
                    dst=str(dst),
                    from_path=tuple(str(x) for x in old),
                    to_path=tuple(str(x) for x in new),
                    reason="predicted-failure",
                )
            )
        )
        return True

    def _atra_learned(self, now: float) -> None:
        """A new path was cached: maybe the route a prediction is waiting for."""
        for d in list(self._atra.waiting):
            self._atra_switch(now, d)

    def _atra_broken(self, now: float, neighbour: IPv4Address, packet: bytes | None) -> None:
        """PRE (and RFP's scoring) when the link to ``neighbour`` really broke."""
        failed_src = None
        if packet is not None and len(packet) >= 20:
            failed_src = IPv4Address(packet[ipv4.SRC])
        for src in self._atra.link_failed(now, neighbour):
            if src in (self.address, failed_src):
                continue
            self._send_error(now, src, neighbour, 0)
            self._atra.counters["proactive-errors-sent"] += 1

    def _atra_originated(self, packet: bytes, next_hop: IPv4Address) -> None:
        now = self._now
        dst = self._addr(packet[ipv4.DST])
        self._atra.sent_to(now, dst)
        self._atra.pre.used(now, next_hop, self.address)

    def _atra_pin(self, now: float, packet: bytes, o: int) -> None:
        """SRP at the destination: pin the reverse of the data packet's source route."""
        last = self._actions[-1] if self._actions else None
        if not isinstance(last, Deliver):
            return  # nothing was handed up (an empty packet)
        inner = last.packet
        n = (packet[o + 1] - 2) >> 2
        salvage = ((packet[o + 2] & 0x03) << 2) | (packet[o + 3] >> 6)
        if salvage:
            return  # a salvaged packet's route does not start at its source
        a0 = o + 4
        route = (
            self._addr(packet[ipv4.SRC]),
            *(self._addr(packet[a0 + 4 * i : a0 + 4 * i + 4]) for i in range(n)),
            self.address,
        )
        self._atra.srp.data_arrived(now, inner, route)

    def _atra_pinned_send(self, now: float, packet: bytes) -> bool:
        """SRP at the destination: a pure ACK goes along its flow's pinned route."""
        route = self._atra.srp.route_for(now, packet)
        if route is None or len(route) < 2 or route[1] in self._down:
            return False
        self.counters["data-originated"] += 1
        self._send_data(packet, route)
        return True

    def _atra_status(self) -> dict[str, Any]:
        return self._atra.status(self._now)
