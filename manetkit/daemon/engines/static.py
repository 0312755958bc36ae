"""Static routing: destination -> next hop from the config, nothing on the air.

A legitimate stack for baselines (the lab's "what if routing were perfect") and for
benchmarking the data plane alone. It still behaves like a router: TTL is decremented
on forwarding (RFC 791 3.2, RFC 1624 for the checksum), packets for unknown
destinations are dropped by reason, and a neighbour's link going down raises route-down
for the routes through it (with the ELFN fields of the packet that hit the break).
"""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Any

from manetkit import events as ev
from manetkit.daemon.engines.base import (
    Deliver,
    Dropped,
    LinkDown,
    LinkEvent,
    LinkUp,
    RoutingEngine,
    SendFrame,
    TxFailed,
    failed_packet_fields,
)
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.wire import ipv4


class StaticEngine(RoutingEngine):
    name = "static"

    def __init__(
        self,
        address: IPv4Address,
        routes: dict[IPv4Address, IPv4Address],
        neighbours: NeighbourTable,
    ) -> None:
        super().__init__()
        self.address = address
        self.neighbours = neighbours
        self.routes = dict(routes)
        # Hot path keys: 4-byte packed addresses, so forwarding never builds IPv4Address.
        self._routes_packed = {d.packed: h for d, h in self.routes.items()}
        self._self = address.packed
        self._down: set[IPv4Address] = set()
        self._last_failed: dict[IPv4Address, bytes] = {}
        # Hot-path cache: packed destination -> next hop, so forwarding builds no objects.
        self._hops: dict[bytes, IPv4Address] = {}

    # -- inputs
    def receive_frame(
        self, now: float, packet: bytes, src_mac: bytes | None = None, rssi_dbm: float | None = None
    ) -> None:
        dst = packet[ipv4.DST]
        if dst == self._self:
            self.counters["delivered"] += 1
            self.out.queue.append(Deliver(packet))
            return
        ttl = packet[ipv4.TTL]
        if ttl <= 1:
            self.counters["ttl-expired"] += 1
            self.out.queue.append(Dropped("ttl-expired", packet))
            return
        # TTL - 1 and the checksum + 0x0100 with end-around carry (RFC 1624 section 3;
        # the same result as ipv4.decrement_ttl, built in one concatenation).
        c = ((packet[10] << 8) | packet[11]) + 0x100
        c = (c & 0xFFFF) + (c >> 16)
        head = packet[: ipv4.TTL]
        self._forward(
            head + bytes((ttl - 1, packet[ipv4.PROTOCOL], c >> 8, c & 0xFF)) + packet[12:], dst
        )

    def send_local(self, now: float, packet: bytes) -> None:
        dst = packet[ipv4.DST]
        if dst == self._self:
            self.out.queue.append(Deliver(packet))
            return
        self._forward(packet, dst)

    def _forward(self, packet: bytes, dst: bytes) -> None:
        hop = self._hops.get(dst)
        if hop is None:
            hop = self._routes_packed.get(dst)
            if hop is None:
                # A directly reachable neighbour needs no configured route.
                d = IPv4Address(dst)
                if self.neighbours.mac_of(d) is not None:
                    hop = d
            if hop is None or hop in self._down:
                self.counters["no-route"] += 1
                self.out.queue.append(Dropped("no-route", packet))
                return
            self._hops[dst] = hop  # cleared on every link event
        self.counters["forwarded"] += 1
        self.out.queue.append(SendFrame(hop, packet))

    def link_event(self, now: float, event: LinkEvent) -> None:
        self._hops.clear()
        if isinstance(event, LinkUp):
            if event.neighbour in self._down:
                self._down.discard(event.neighbour)
                for dst, hop in self.routes.items():
                    if hop == event.neighbour:
                        self.out.notify(ev.RouteUp(dst=str(dst), next_hop=str(hop)))
        elif isinstance(event, TxFailed):
            # The shell's hysteresis decides when failures mean a broken link (LinkDown);
            # remember the packet so route-down can carry its ELFN fields.
            if event.packet:
                self._last_failed[event.neighbour] = event.packet
        elif isinstance(event, LinkDown):
            if event.neighbour in self._down:
                return
            self._down.add(event.neighbour)
            packet = self._last_failed.pop(event.neighbour, None)
            failed = failed_packet_fields(packet) if packet else {}
            for dst, hop in self.routes.items():
                if hop != event.neighbour:
                    continue
                fields: dict[str, Any] = {
                    "dst": str(dst),
                    "next_hop": str(hop),
                    "reason": event.reason,
                }
                if failed.get("dst") == str(dst):
                    # ELFN: the failed packet's own src, ports and sequence number
                    fields.update(failed)
                self.out.notify(ev.RouteDown(**fields))

    def handle_timer(self, now: float) -> None:
        return None

    def get_timer(self) -> float | None:
        return None

    def status(self) -> dict[str, Any]:
        return {
            "protocol": self.name,
            "routes": [
                {"dst": str(d), "next_hop": str(h), "up": h not in self._down}
                for d, h in sorted(self.routes.items())
            ],
            "counters": dict(self.counters),
        }
