"""IPv4 header: the few fields routing needs, read in place (RFC 791 section 3.1).

The hot path reads fields straight from the packet bytes; only control-plane code
builds packets. Checksums follow RFC 1071; TTL decrements use the incremental update of
RFC 1624 so forwarding never re-sums the header.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from ipaddress import IPv4Address

PROTO_ICMP = 1
PROTO_TCP = 6
PROTO_UDP = 17
PROTO_DSR = 48  # RFC 4728 section 6.1: DSR Options header

# Where the fields routing reads in place sit in the header (RFC 791 section 3.1).
TTL = 8
PROTOCOL = 9
CHECKSUM = 10
SRC = slice(12, 16)
DST = slice(16, 20)

_HDR = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")
MIN_HEADER = 20
# DSCP CS6 (class selector 6, RFC 2474 4.2.2) in the TOS byte: "network control", the
# service class of routing protocols (RFC 4594 3.2). The daemon marks the control
# packets it originates so, as babeld marks its own, so that a medium with 802.11e
# access categories serves routing control before data; data keeps the app's TOS.
TOS_NETWORK_CONTROL = 0xC0


class MalformedPacket(ValueError):
    """A packet that is not a well-formed IPv4 packet; counted and dropped by callers."""


@dataclass(frozen=True, slots=True)
class IPv4Header:
    ihl: int  # header length in bytes
    tos: int
    total_length: int
    ident: int
    flags_frag: int
    ttl: int
    protocol: int
    src: IPv4Address
    dst: IPv4Address

    @property
    def payload_offset(self) -> int:
        return self.ihl


def checksum(data: bytes | memoryview) -> int:
    """RFC 1071 Internet checksum."""
    if len(data) % 2:
        data = bytes(data) + b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def parse(packet: bytes | memoryview) -> IPv4Header:
    """Validate and parse the header. Raises :class:`MalformedPacket`."""
    if len(packet) < MIN_HEADER:
        raise MalformedPacket(f"{len(packet)} bytes is shorter than an IPv4 header")
    vihl, tos, total, ident, ff, ttl, proto, _csum, src, dst = _HDR.unpack_from(packet)
    if vihl >> 4 != 4:
        raise MalformedPacket(f"IP version {vihl >> 4}, not 4")
    ihl = (vihl & 0x0F) * 4
    if ihl < MIN_HEADER or ihl > len(packet):
        raise MalformedPacket(f"bad IHL {ihl}")
    if total < ihl or total > len(packet):
        raise MalformedPacket(f"total length {total} does not fit the {len(packet)}-byte frame")
    return IPv4Header(ihl, tos, total, ident, ff, ttl, proto, IPv4Address(src), IPv4Address(dst))


def src_dst(packet: bytes | memoryview) -> tuple[bytes, bytes]:
    """Source and destination as 4-byte strings, without validation (hot path)."""
    return bytes(packet[12:16]), bytes(packet[16:20])


def build(
    src: IPv4Address,
    dst: IPv4Address,
    protocol: int,
    payload: bytes,
    ttl: int = 64,
    tos: int = 0,
    ident: int = 0,
    dont_fragment: bool = True,
) -> bytes:
    """A complete IPv4 packet with a correct header checksum (no options)."""
    total = MIN_HEADER + len(payload)
    ff = 0x4000 if dont_fragment else 0
    hdr = _HDR.pack(0x45, tos, total, ident, ff, ttl, protocol, 0, src.packed, dst.packed)
    csum = checksum(hdr)
    return hdr[:10] + struct.pack("!H", csum) + hdr[12:] + payload


def decrement_ttl(packet: bytearray) -> int:
    """Decrement TTL in place, updating the checksum incrementally (RFC 1624 eqn. 3).

    Returns the new TTL; the caller drops the packet when it was already <= 1.
    """
    ttl = packet[8]
    if ttl == 0:
        return 0
    packet[8] = ttl - 1
    # HC' = ~(~HC + ~m + m'); the TTL is the high byte of the word m at offset 8, so
    # m' - m = -0x0100, which is ~0x0100 in ones' complement arithmetic.
    old = (packet[10] << 8) | packet[11]
    s = (~old & 0xFFFF) + (~0x0100 & 0xFFFF)
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    new = ~s & 0xFFFF
    packet[10] = new >> 8
    packet[11] = new & 0xFF
    return ttl - 1


def udp(sport: int, dport: int, payload: bytes, src: IPv4Address, dst: IPv4Address) -> bytes:
    """A UDP datagram (header + payload) with the checksum over the RFC 768 pseudo-header."""
    length = 8 + len(payload)
    pseudo = src.packed + dst.packed + struct.pack("!BBH", 0, PROTO_UDP, length)
    hdr = _UDP.pack(sport, dport, length, 0)
    csum = checksum(pseudo + hdr + payload) or 0xFFFF
    return _UDP.pack(sport, dport, length, csum) + payload


def parse_udp(segment: bytes | memoryview) -> tuple[int, int, bytes]:
    """(sport, dport, payload) of a UDP datagram. Raises :class:`MalformedPacket`."""
    if len(segment) < 8:
        raise MalformedPacket("UDP datagram shorter than its header")
    sport, dport, length, _ = _UDP.unpack_from(segment)
    if length < 8 or length > len(segment):
        raise MalformedPacket(f"UDP length {length} does not fit")
    return sport, dport, bytes(segment[8:length])


_TCP = struct.Struct("!HHIIBB")


@dataclass(frozen=True, slots=True)
class TcpSegment:
    """The fields of a TCP segment that routing decisions read (RFC 9293 3.1)."""

    src: bytes  # 4-byte addresses, as on the wire
    dst: bytes
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int
    payload: int  # bytes after the TCP header


def tcp_segment(packet: bytes | memoryview) -> TcpSegment | None:
    """The TCP header of an IPv4 packet, or None: not TCP, malformed, a fragment (only an
    unfragmented packet holds a whole segment), or shorter than a TCP header."""
    try:
        h = parse(packet)
    except MalformedPacket:
        return None
    if h.protocol != PROTO_TCP or h.flags_frag & 0x3FFF or h.total_length < h.ihl + 20:
        return None
    sport, dport, seq, ack, doff, flags = _TCP.unpack_from(packet, h.ihl)
    payload = h.total_length - h.ihl - (doff >> 4) * 4
    return TcpSegment(
        bytes(packet[12:16]), bytes(packet[16:20]), sport, dport, seq, ack, flags, payload
    )


def tcp_ports_seq(segment: bytes | memoryview) -> tuple[int, int, int] | None:
    """(sport, dport, seq) of a TCP segment, or None if too short (for ELFN notices)."""
    if len(segment) < 8:
        return None
    sport, dport, seq = struct.unpack_from("!HHI", segment)
    return sport, dport, seq
