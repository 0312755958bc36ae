"""AODV Hello messages (RFC 3561 6.9).

While on an active route (data went through within ACTIVE_ROUTE_TIMEOUT) a node
broadcasts a Hello (a RREP with TTL 1 for itself, carrying its Hello interval) when it
sent no other broadcast within HELLO_INTERVAL. A Hello heard keeps (or creates) a
one-hop route with the neighbour's number, and, with ``hellos`` on, the neighbour is
declared lost after ``allowed_hello_loss`` of its intervals without a packet from it
(:class:`~manetkit.daemon.engines.aodv.links.LinkView`).
"""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv4Address

from manetkit.daemon.engines.aodv.config import AodvConfig
from manetkit.daemon.engines.aodv.deadline import INF
from manetkit.daemon.engines.aodv.forwarding import Forwarder
from manetkit.daemon.engines.aodv.links import LinkView
from manetkit.daemon.engines.aodv.routes import Routes
from manetkit.daemon.engines.aodv.routetable import OwnSequence
from manetkit.daemon.engines.aodv.signalling import Signalling
from manetkit.daemon.wire import aodv


class Hellos:
    def __init__(
        self,
        address: IPv4Address,
        config: AodvConfig,
        links: LinkView,
        routes: Routes,
        signalling: Signalling,
        forwarder: Forwarder,
        seq: OwnSequence,
        counters: Counter[str],
    ) -> None:
        self.address = address
        self.config = config
        self.links = links
        self.routes = routes
        self.signalling = signalling
        self.forwarder = forwarder
        self.seq = seq
        self.counters = counters
        self.interval = config.hello_interval_ms / 1000
        self.active_route_timeout = config.active_route_timeout_ms / 1000
        self.next_at = INF if not config.hellos else 0.0

    def received(self, now: float, sender: IPv4Address, m: aodv.RREP, rssi: float | None) -> None:
        """6.9: a Hello keeps (or creates) a one-hop route with the neighbour's number."""
        self.counters["hello-received"] += 1
        if not self.links.admits(now, sender, rssi):
            return  # not a link that may build routes
        iv = aodv.hello_interval_ms(m)
        window = self.config.allowed_hello_loss * ((iv / 1000) if iv else self.interval)
        if self.config.hellos:
            self.links.hello(now, sender, window)
        r, _ = self.routes.update(now, sender, sender, 1, m.dest_seq, window)
        if r.next_hop == sender and r.expires < now + window:
            r.expires = now + window

    def handle_timer(self, now: float) -> None:
        if now < self.next_at:
            return
        active = now - self.forwarder.last_data < self.active_route_timeout
        last = self.signalling.last_broadcast
        if active and now - last >= self.interval:
            life = self.config.allowed_hello_loss * self.config.hello_interval_ms
            ext = (aodv.EXT_HELLO_INTERVAL, self.config.hello_interval_ms.to_bytes(4, "big"))
            hello = aodv.RREP(0, self.address, self.seq.value, self.address, life, extensions=[ext])
            self.counters["hello-sent"] += 1
            self.signalling.broadcast(now, hello, 1)
        self.next_at = max(self.signalling.last_broadcast + self.interval, now + self.interval / 2)
        if not active:
            self.next_at = now + self.interval
