"""Atra's symmetric route pinning, SRP (Anantharaman et al. section IV-A), sans-I/O.

"The ACK path of a TCP connection is always kept the same as the data path", and only
for non-piggybacked ACKs: pinning ACKs that carry data would load one path with both
directions of a bidirectional connection. The destination remembers, per TCP flow, the
route its data arrived on (DSR: the source route, reversed; AODV: the previous hop) and
sends the flow's pure ACKs back along it until the pin expires.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address

from manetkit.daemon.wire import ipv4

# TCP flags (RFC 9293 3.1)
_FIN, _SYN, _RST, _ACK = 0x01, 0x02, 0x04, 0x10

FlowId = tuple[IPv4Address, int, IPv4Address, int]  # src, sport, dst, dport (data direction)


def tcp_flow(packet: bytes) -> tuple[FlowId, bool, int] | None:
    """(the packet's flow, True if it is a pure ACK, payload bytes) for TCP, else None.

    A pure ACK has the ACK flag, no SYN/FIN/RST and no payload (section IV-A's
    "non-piggybacked ACK").
    """
    t = ipv4.tcp_segment(packet)
    if t is None:
        return None
    flags, payload = t.flags, max(t.payload, 0)
    pure = bool(flags & _ACK) and not flags & (_SYN | _FIN | _RST) and payload == 0
    return (IPv4Address(t.src), t.sport, IPv4Address(t.dst), t.dport), pure, payload


def is_pure_ack(packet: bytes) -> bool:
    got = tcp_flow(packet)
    return got is not None and got[1]


@dataclass(slots=True)
class Pin:
    route: tuple[IPv4Address, ...]  # the reverse route, from the destination back
    until: float


MAX_PINS = 1024


class SrpTable:
    """Per-flow reverse-path pins with expiry; DSR pins whole routes, AODV one hop."""

    def __init__(self, timeout_s: float = 10.0) -> None:
        self.timeout_s = timeout_s
        self._pins: dict[FlowId, Pin] = {}
        self.pinned_acks = 0
        self.evicted = 0  # pins pushed out at MAX_PINS (the one expiring first)

    def data_arrived(self, now: float, packet: bytes, route: tuple[IPv4Address, ...]) -> None:
        """A TCP data packet for us arrived along ``route`` (source .. us); pin its reverse.

        Only segments carrying payload pin: they are the data path.
        """
        got = tcp_flow(packet)
        if got is None or got[2] == 0:
            return
        (src, sport, dst, dport), _, _ = got
        rev: FlowId = (dst, dport, src, sport)  # the ACK's direction
        if rev not in self._pins and len(self._pins) >= MAX_PINS:
            self.purge(now)
            if len(self._pins) >= MAX_PINS:
                del self._pins[min(self._pins, key=lambda k: self._pins[k].until)]
                self.evicted += 1
        self._pins[rev] = Pin(tuple(reversed(route)), now + self.timeout_s)

    def route_for(self, now: float, packet: bytes) -> tuple[IPv4Address, ...] | None:
        """The pinned route for a pure ACK we are sending, or None (route normally)."""
        got = tcp_flow(packet)
        if got is None or not got[1]:
            return None
        pin = self._pins.get(got[0])
        if pin is None:
            return None
        if pin.until < now:
            del self._pins[got[0]]
            return None
        self.pinned_acks += 1
        return pin.route

    def unpin_via(self, hop: IPv4Address) -> None:
        """Forget pins through a hop whose link broke (route normally again)."""
        for k in [k for k, p in self._pins.items() if hop in p.route]:
            del self._pins[k]

    def unpin_link(self, a: IPv4Address, b: IPv4Address) -> int:
        """Forget pins whose route crosses the link a-b (either way): a Route Error or
        our own cache cut it, and an ACK pinned there would be lost until the next data
        packet re-pins its flow. Returns how many were dropped."""
        link = {a, b}
        gone = [
            k
            for k, p in self._pins.items()
            if any({p.route[i], p.route[i + 1]} == link for i in range(len(p.route) - 1))
        ]
        for k in gone:
            del self._pins[k]
        return len(gone)

    def purge(self, now: float) -> None:
        for k in [k for k, p in self._pins.items() if p.until < now]:
            del self._pins[k]

    def pinned_flows(self, now: float) -> int:
        self.purge(now)
        return len(self._pins)
