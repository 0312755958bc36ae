"""AODV's data path (RFC 3561 6.2, 6.3, 6.11 (ii)).

A packet for this node is delivered; one for a valid route goes to its next hop, the
lifetimes of the routes 6.2 names refreshed; this node's own packet (and one whose
route is under local repair, 6.12) waits in the send buffer while a discovery runs;
any other packet without an active route is dropped and its source's neighbour gets a
RERR (6.11 (ii)). Multicast and broadcast data travel one hop only (no flooding).

The hot path reads only the destination bytes, does one dict lookup keyed by the
4-byte address, refreshes the lifetimes and decrements the TTL in a bytearray: no
parsing. Its counters are plain ints (cheaper than a Counter).
"""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv4Address

from manetkit.daemon.engines.aodv.config import AodvConfig
from manetkit.daemon.engines.aodv.deadline import Deadline
from manetkit.daemon.engines.aodv.discovery import Discovery
from manetkit.daemon.engines.aodv.links import LinkView
from manetkit.daemon.engines.aodv.routetable import REPAIRING, VALID, Route, RouteTable, seq_next
from manetkit.daemon.engines.aodv.signalling import Signalling
from manetkit.daemon.engines.base import Deliver, Outbox, SendFrame
from manetkit.daemon.engines.shared.bus import Bus
from manetkit.daemon.sendbuffer import SendBuffer
from manetkit.daemon.wire import ipv4

_BCAST_B = b"\xff\xff\xff\xff"

# SendBuffer's reasons -> the engine's Dropped reasons.
BUFFER_REASONS = {
    "timeout": "send-buffer-timeout",
    "full": "send-buffer-full",
    "full-destination": "send-buffer-full-destination",
}


class Forwarder:
    def __init__(
        self,
        address: IPv4Address,
        config: AodvConfig,
        table: RouteTable,
        links: LinkView,
        signalling: Signalling,
        discovery: Discovery,
        send_buffer: SendBuffer,
        bus: Bus,
        deadline: Deadline,
        out: Outbox,
        counters: Counter[str],
    ) -> None:
        self._me_b = address.packed
        self._routes = table
        self.links = links
        self.signalling = signalling
        self.discovery = discovery
        self.send_buffer = send_buffer
        self.bus = bus
        self.deadline = deadline
        self.out = out
        self._queue = out.queue
        self.counters = counters
        self._art = config.active_route_timeout_ms / 1000
        self.last_data = float("-inf")  # when data last went through (6.9's Hellos)
        self.forwarded = 0
        self.delivered = 0
        self.originated = 0

    def data(self, now: float, packet: bytes, from_radio: bool, src_mac: bytes | None) -> None:
        """Deliver, forward by next hop (6.2), buffer and discover, or report (6.11 ii)."""
        dst = packet[ipv4.DST]
        if dst == self._me_b:
            self.delivered += 1
            self.last_data = now
            self._queue.append(Deliver(packet))
            return
        if dst[0] >= 224 or dst == _BCAST_B:
            # Multicast/broadcast data: one hop only (no flooding in AODV).
            if from_radio:
                self.out.deliver(packet)
            else:
                self.out.send(None, packet)
            return
        if from_radio:
            if packet[ipv4.TTL] <= 1:
                self.out.drop("ttl-expired", packet)
                return
            buf = bytearray(packet)
            ipv4.decrement_ttl(buf)
            packet = bytes(buf)
        bus = self.bus
        if bus.on:
            ihl = (packet[0] & 0x0F) * 4
            if bus.forwarding(packet, packet[ipv4.PROTOCOL], ihl, packet, pivot_holds=False):
                return
        r = self._routes.get(dst)
        if r is not None and r.state is VALID:
            self.send_on(now, r, packet)
            return
        if not from_radio or (r is not None and r.state is REPAIRING):
            # Our own packet, or one waiting for a local repair: buffer it (6.3, 6.12).
            self.buffer(now, IPv4Address(dst), packet)
            return
        # 6.11 (ii): a data packet for which we have no active route.
        self.out.drop("no-route", packet)
        seq = 0
        if r is not None:
            if r.valid_seq:
                r.seq = seq_next(r.seq)
            seq = r.seq
        prev = self.links.neighbours.address_of(src_mac) if src_mac is not None else None
        self.signalling.rerr(now, [(IPv4Address(dst), seq)], {prev} if prev else set(), False)

    def send_on(self, now: float, r: Route, packet: bytes) -> None:
        """Forward over a valid route, refreshing the lifetimes 6.2 names."""
        t = now + self._art
        if r.expires < t:
            r.expires = t
        r.used = now
        routes = self._routes
        nh = routes.get(r.next_hop_b)
        if nh is not None and nh.state is VALID and nh.expires < t:
            nh.expires = t
        back = routes.get(packet[ipv4.SRC])
        if back is not None and back.state is VALID:
            if back.expires < t:
                back.expires = t
            prev = routes.get(back.next_hop_b)
            if prev is not None and prev.state is VALID and prev.expires < t:
                prev.expires = t
        self.last_data = now
        self.forwarded += 1
        self._queue.append(SendFrame(r.next_hop, packet))

    def send_or_buffer(self, now: float, packet: bytes) -> None:
        """A packet that waited (a released hold): on by its route, else buffered."""
        r = self._routes.get(packet[ipv4.DST])
        if r is not None and r.state is VALID:
            self.send_on(now, r, packet)
        else:
            self.buffer(now, IPv4Address(packet[ipv4.DST]), packet)

    def buffer(self, now: float, dst: IPv4Address, packet: bytes) -> None:
        """Wait for a route to ``dst``; a discovery starts only for a packet that waits
        (the buffer took it) and while there is room for one (:data:`MAX_SEARCHES`)."""
        searching = dst in self.discovery.searches
        if not searching and self.discovery.full():
            self.counters["discoveries-refused"] += 1
            self.out.drop("discovery-limit", packet)
            return
        waits = self.send_buffer.add(now, dst, packet)
        if waits:
            self.deadline.lower(now + self.send_buffer.timeout)
        self.drain_buffer_drops()
        if waits and not searching:
            self.discovery.start(now, dst)

    def release(self, now: float, r: Route) -> None:
        """Packets waiting for ``r.dst`` go out in arrival order (the route just came)."""
        for p in self.send_buffer.release(r.dst):
            self.send_on(now, r, p)

    def drain_buffer_drops(self) -> None:
        for reason, _dst, p in self.send_buffer.take_dropped():
            self.out.drop(BUFFER_REASONS.get(reason, reason), p)

    def counters_view(self) -> dict[str, int]:
        return {
            "data-forwarded": self.forwarded,
            "data-delivered": self.delivered,
            "data-originated": self.originated,
        }
