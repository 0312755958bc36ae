"""Atra in DSR (Anantharaman et al. section IV-A: the paper's own protocol).

The protocol-neutral state is :class:`~manetkit.daemon.engines.atra.state.AtraState`;
this component carries it on DSR's messages. The engine calls it only when ``atra``
has a mechanism on.

- RFP: the node that predicts the break of its link to N sends each source that used the
  link in the last T a Route Error (NODE_UNREACHABLE N) with manetkit's PREDICTED
  option (type 52, :mod:`manetkit.daemon.wire.manet_ext`); Wireshark decodes it as a
  Route Error plus a PadN. Nodes that understand PREDICTED leave the link in their
  caches; the source sends one propagating Route Request per destination over the link
  and keeps the current route until a route avoiding the link is cached (then it cuts
  the predicted link from its cache and holds it, RFC 4728 8.3.5's cut, early) or the
  link really breaks (a plain Route Error). A node that predicted the failure of its
  link to P neither forwards nor answers Route Requests that came from P
  (:mod:`.requests`).
- PRE: on TxFailed/LinkDown every source that used the link in the last T gets a plain
  Route Error, not only the failed packet's (RFC 4728 8.3.4 sends that one).
- SRP: the destination sends a flow's pure ACKs along the reversed source route of the
  flow's last data packet (pinned by :mod:`.forwarding`).
"""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv4Address
from typing import Any

from manetkit import events as ev
from manetkit.daemon.engines.atra.state import AtraState, predicted_event
from manetkit.daemon.engines.base import Outbox
from manetkit.daemon.engines.dsr.cache import Path, RouteCache
from manetkit.daemon.engines.dsr.discovery import Discovery
from manetkit.daemon.engines.dsr.forwarding import Forwarder
from manetkit.daemon.engines.dsr.links import LinkView
from manetkit.daemon.engines.dsr.routes import Routes
from manetkit.daemon.engines.dsr.signalling import Signalling
from manetkit.daemon.engines.dsr.strategy import PathStrategy
from manetkit.daemon.wire import dsr, ipv4
from manetkit.daemon.wire import manet_ext as mx


def _uses(path: Path, a: IPv4Address, b: IPv4Address) -> bool:
    return any({path[i], path[i + 1]} == {a, b} for i in range(len(path) - 1))


class DsrAtra:
    def __init__(
        self,
        address: IPv4Address,
        state: AtraState,
        cache: RouteCache,
        links: LinkView,
        routes: Routes,
        strategy: PathStrategy,
        discovery: Discovery,
        signalling: Signalling,
        forwarder: Forwarder,
        out: Outbox,
        counters: Counter[str],
    ) -> None:
        self.address = address
        self.state = state
        self.cache = cache
        self.links = links
        self.routes = routes
        self.strategy = strategy
        self.discovery = discovery
        self.signalling = signalling
        self.forwarder = forwarder
        self.out = out
        self.counters = counters

    def signal(self, now: float, neighbour: IPv4Address, dbm: float) -> None:
        """A received power from ``neighbour`` (link sensing's SignalSample)."""
        st = self.state
        p = st.signal(now, neighbour, dbm)
        if p is None:
            return
        self.out.notify(predicted_event(p))
        self.strategy.predicted_failure(now, neighbour)  # SMR moves to a backup path
        self._avoid(now, self.address, neighbour)
        notice = mx.Predicted(p.eta_s, p.signal_dbm)
        for src in st.pre.sources(now, neighbour):
            if src == self.address:
                continue
            err = dsr.RouteError.node_unreachable(self.address, src, neighbour, 0)
            if self.signalling.control(now, src, [err], [notice]):
                st.counters["predicted-errors-sent"] += 1

    def error_seen(self, now: float, err: dsr.RouteError) -> None:
        """A PREDICTED Route Error: the link works for now; its source looks for another."""
        self.counters["atra-predicted-errors-seen"] += 1
        if err.error_dst == self.address and err.unreachable is not None:
            self._avoid(now, err.error_src, err.unreachable)

    def _avoid(self, now: float, a: IPv4Address, b: IPv4Address) -> None:
        """Routes of ours over link a-b: switch to a cached route that avoids it, else
        ask for one and keep the current route meanwhile (section IV-A)."""
        st = self.state
        uses = []
        for d in st.active_destinations(now):
            route = self.strategy.route_for(now, d)
            if route is not None and _uses(route, a, b):
                uses.append((d, route))
        if not uses:
            return
        st.avoid_link(now, a, b)
        for d, route in uses:
            st.wait_for_route(now, d, route, (a, b))
            if self.cache.lookup(now, d, avoid=(a, b)) is not None:
                self._switch(now, d)
            elif self.discovery.around(now, d):
                st.counters["rediscoveries"] += 1

    def _switch(self, now: float, dst: IPv4Address) -> bool:
        """A route to ``dst`` avoiding the predicted link is cached: cut that link from
        the cache (held, so packets still in flight on it do not teach it again) and use
        the new route."""
        st = self.state
        if not st.still_waiting(now, dst):
            return False
        old, link = st.waiting[dst]
        if self.cache.lookup(now, dst, avoid=link) is None:
            return False
        st.done_waiting(dst)
        self.links.hold(now, link[0], link[1], local=False)
        self.routes.cut_link(now, link[0], link[1], "predicted-failure")
        self.forwarder.forget_routes()
        new = self.strategy.route_for(now, dst)
        if new is None:
            return False
        st.counters["predicted-switches"] += 1
        self.out.notify(
            ev.PathSwitch(
                dst=str(dst),
                from_path=tuple(str(x) for x in old),
                to_path=tuple(str(x) for x in new),
                reason="predicted-failure",
            )
        )
        return True

    def learned(self, now: float) -> None:
        """A new path was cached: maybe the route a prediction is waiting for."""
        if self.state.waiting:
            for d in list(self.state.waiting):
                self._switch(now, d)

    def broken(self, now: float, neighbour: IPv4Address, packet: bytes | None) -> None:
        """PRE (and RFP's scoring) when the link to ``neighbour`` really broke."""
        failed_src = None
        if packet is not None and len(packet) >= 20:
            failed_src = IPv4Address(packet[ipv4.SRC])
        for src in self.state.link_failed(now, neighbour):
            if src in (self.address, failed_src):
                continue
            self.signalling.error(now, src, neighbour, 0)
            self.state.counters["proactive-errors-sent"] += 1

    def pinned_send(self, now: float, packet: bytes) -> bool:
        """SRP at the destination: a pure ACK goes along its flow's pinned route."""
        if not self.state.cfg.srp:
            return False
        route = self.state.srp.route_for(now, packet)
        if route is None or len(route) < 2 or route[1] in self.routes.down:
            return False
        self.counters["data-originated"] += 1
        self.forwarder.send_data(now, packet, route)
        return True

    def status(self, now: float) -> dict[str, Any]:
        return self.state.status(now)
