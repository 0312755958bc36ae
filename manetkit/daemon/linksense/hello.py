"""Neighbour beacons: link sensing for any interface, and the MAC <-> address mapping.

Every ``interval_s`` (with +-10 % jitter so neighbours do not synchronise, as RFC 3561
6.9 and RFC 5444-based protocols advise) the daemon broadcasts one small packet inside
a manetkit frame:

    IPv4  src = this node's mesh address, dst = 255.255.255.255, TTL 1
    UDP   sport = dport = 49698 (configurable; in the IANA dynamic range, so it collides
          with no assigned service; the packet never leaves the daemon's data plane)
    body  b"MKH1" | u32 sequence | u32 interval in ms

This is protocol-agnostic (AODV's own RFC 3561 HELLO is the AODV engine's business):
the receiver learns which mesh address sits behind the source MAC and that the link is
alive. The shell consumes beacons; they never reach an engine or the kernel.
"""

from __future__ import annotations

import asyncio
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv4Address

from manetkit.daemon.linksense.base import EventSink, LinkSenseBackend, StationInfo, StationSeen
from manetkit.daemon.wire import ipv4

MAGIC = b"MKH1"
DEFAULT_PORT = 49698
_BODY = struct.Struct("!4sII")
_LIMITED_BROADCAST = IPv4Address("255.255.255.255")
_BCAST_PACKED = _LIMITED_BROADCAST.packed


@dataclass(frozen=True, slots=True)
class Hello:
    address: IPv4Address
    seq: int
    interval_ms: int


def build_hello(
    address: IPv4Address, seq: int, interval_s: float, port: int = DEFAULT_PORT
) -> bytes:
    body = _BODY.pack(MAGIC, seq & 0xFFFFFFFF, round(interval_s * 1000))
    seg = ipv4.udp(port, port, body, address, _LIMITED_BROADCAST)
    return ipv4.build(
        address, _LIMITED_BROADCAST, ipv4.PROTO_UDP, seg, ttl=1, tos=ipv4.TOS_NETWORK_CONTROL
    )


def is_hello(packet: bytes, port: int = DEFAULT_PORT) -> bool:
    """Cheap test on a packet that already passed the data plane's IPv4 checks."""
    if packet[16:20] != _BCAST_PACKED or packet[9] != ipv4.PROTO_UDP:
        return False
    off = (packet[0] & 15) * 4
    return len(packet) >= off + 8 and ((packet[off + 2] << 8) | packet[off + 3]) == port


def parse_hello(packet: bytes, port: int = DEFAULT_PORT) -> Hello | None:
    """The beacon's contents, or None if ``packet`` is not a well-formed beacon."""
    try:
        h = ipv4.parse(packet)
        if h.protocol != ipv4.PROTO_UDP:
            return None
        _sport, dport, body = ipv4.parse_udp(packet[h.ihl : h.total_length])
    except ipv4.MalformedPacket:
        return None
    if dport != port or len(body) < _BODY.size:
        return None
    magic, seq, interval_ms = _BODY.unpack_from(body)
    if magic != MAGIC:
        return None
    return Hello(h.src, seq, interval_ms)


class HelloBackend(LinkSenseBackend):
    """Sends beacons through ``send_broadcast``; reports beacons the shell hands back."""

    name = "hello"

    def __init__(
        self,
        interface: str,
        sink: EventSink,
        address: IPv4Address,
        interval_s: float,
        send_broadcast: Callable[[bytes], None],
        clock: Callable[[], float],
        port: int = DEFAULT_PORT,
        capacity: int = 1024,
    ) -> None:
        super().__init__(interface, sink)
        self.capacity = capacity  # stations remembered (least recently heard evicted)
        self.evicted = 0
        self.address = address
        self.interval_s = interval_s
        self.port = port
        self._send = send_broadcast
        self._clock = clock
        self._seq = 0
        self._rows: dict[bytes, StationInfo] = {}
        self._last: dict[bytes, float] = {}
        self.sent = 0

    def beacon(self) -> None:
        self._seq += 1
        self._send(build_hello(self.address, self._seq, self.interval_s, self.port))
        self.sent += 1

    async def run(self) -> None:
        # First beacon at once, so neighbours learn us before any routing traffic.
        while True:
            self.beacon()
            await asyncio.sleep(self.interval_s * random.uniform(0.9, 1.1))

    def received(self, now: float, mac: bytes) -> None:
        """The shell got a beacon from ``mac`` (it already learned the address)."""
        old = self._rows.get(mac)
        if old is None and len(self._rows) >= self.capacity:
            gone = min(self._last, key=self._last.__getitem__)
            del self._rows[gone], self._last[gone]
            self.evicted += 1
        self._rows[mac] = StationInfo(mac=mac, rx_packets=(old.rx_packets + 1) if old else 1)
        self._last[mac] = now
        self.sink(now, StationSeen(mac))

    def stations(self) -> list[StationInfo]:
        now = self._clock()
        return [
            StationInfo(
                mac=r.mac,
                rx_packets=r.rx_packets,
                inactive_ms=int((now - self._last[m]) * 1000),
            )
            for m, r in self._rows.items()
        ]
