"""AODV control messages, byte-exact per RFC 3561 section 5, carried as IPv4/UDP port 654.

Pack and parse only; no protocol decisions (those live in ``engines.aodv``).

Layouts (RFC 3561):
  5.1 RREQ      type 1 | J R G D U + 11 reserved bits | hop count | RREQ ID |
                dest addr | dest seq | orig addr | orig seq            (24 bytes)
  5.2 RREP      type 2 | R A + 9 reserved bits + 5-bit prefix size | hop count |
                dest addr | dest seq | orig addr | lifetime (ms)       (20 bytes)
  5.3 RERR      type 3 | N + 15 reserved bits | dest count | (dest, seq) * count
  5.4 RREP-ACK  type 4 | reserved                                       (2 bytes)
  9   extensions after the fixed part: type (1 byte), length (1 byte, excluding these
      two), data. 9.1 defines the Hello Interval extension (type 1, 4-byte ms value).
Reserved bits are sent as zero and ignored on reception (RFC 3561 5.1).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from ipaddress import IPv4Address

from manetkit.daemon.wire import ipv4

AODV_PORT = 654  # RFC 3561 section 4 / IANA
BROADCAST = IPv4Address("255.255.255.255")

TYPE_RREQ = 1
TYPE_RREP = 2
TYPE_RERR = 3
TYPE_RREP_ACK = 4

EXT_HELLO_INTERVAL = 1  # RFC 3561 9.1

# RREQ flag bits, in the byte after the type (RFC 3561 5.1).
RREQ_J, RREQ_R, RREQ_G, RREQ_D, RREQ_U = 0x80, 0x40, 0x20, 0x10, 0x08
# RREP flag bits (RFC 3561 5.2).
RREP_R, RREP_A = 0x80, 0x40
# RERR flag bit (RFC 3561 5.3).
RERR_N = 0x80

_RREQ = struct.Struct("!BBBBI4sI4sI")
_RREP = struct.Struct("!BBBB4sI4sI")
_RERR_HEAD = struct.Struct("!BBBB")
_RERR_DEST = struct.Struct("!4sI")
_RREP_ACK = struct.Struct("!BB")

Extension = tuple[int, bytes]


class MalformedAodv(ValueError):
    """Bytes that are not a well-formed RFC 3561 message; counted and dropped by callers."""


@dataclass(slots=True)
class RREQ:
    """Route Request (RFC 3561 5.1)."""

    hop_count: int
    rreq_id: int
    dest: IPv4Address
    dest_seq: int
    orig: IPv4Address
    orig_seq: int
    join: bool = False
    repair: bool = False
    gratuitous: bool = False  # G: an intermediate replier also sends a RREP to the dest
    dest_only: bool = False  # D: only the destination may reply
    unknown_seq: bool = False  # U: dest_seq is unknown
    extensions: list[Extension] = field(default_factory=list)

    def pack(self) -> bytes:
        flags = (
            (RREQ_J if self.join else 0)
            | (RREQ_R if self.repair else 0)
            | (RREQ_G if self.gratuitous else 0)
            | (RREQ_D if self.dest_only else 0)
            | (RREQ_U if self.unknown_seq else 0)
        )
        body = _RREQ.pack(
            TYPE_RREQ,
            flags,
            0,
            self.hop_count,
            self.rreq_id,
            self.dest.packed,
            self.dest_seq,
            self.orig.packed,
            self.orig_seq,
        )
        return body + pack_extensions(self.extensions)


@dataclass(slots=True)
class RREP:
    """Route Reply (RFC 3561 5.2); a Hello is a RREP with TTL 1 (6.9)."""

    hop_count: int
    dest: IPv4Address
    dest_seq: int
    orig: IPv4Address
    lifetime_ms: int
    repair: bool = False
    ack_required: bool = False  # A: the receiver sends a RREP-ACK (6.8)
    prefix_size: int = 0
    extensions: list[Extension] = field(default_factory=list)

    def pack(self) -> bytes:
        if not 0 <= self.prefix_size < 32:
            raise MalformedAodv(f"prefix size {self.prefix_size} does not fit in 5 bits")
        flags = (RREP_R if self.repair else 0) | (RREP_A if self.ack_required else 0)
        body = _RREP.pack(
            TYPE_RREP,
            flags,
            self.prefix_size,
            self.hop_count,
            self.dest.packed,
            self.dest_seq,
            self.orig.packed,
            self.lifetime_ms,
        )
        return body + pack_extensions(self.extensions)


@dataclass(slots=True)
class RERR:
    """Route Error (RFC 3561 5.3): the listed destinations are unreachable."""

    dests: list[tuple[IPv4Address, int]]
    no_delete: bool = False  # N: a node is repairing locally; do not delete the route
    extensions: list[Extension] = field(default_factory=list)

    def pack(self) -> bytes:
        if not 1 <= len(self.dests) <= 255:
            raise MalformedAodv(f"a RERR carries 1..255 destinations, not {len(self.dests)}")
        head = _RERR_HEAD.pack(TYPE_RERR, RERR_N if self.no_delete else 0, 0, len(self.dests))
        return (
            head
            + b"".join(_RERR_DEST.pack(d.packed, s) for d, s in self.dests)
            + pack_extensions(self.extensions)
        )


@dataclass(slots=True)
class RREPAck:
    """Route Reply Acknowledgment (RFC 3561 5.4)."""

    extensions: list[Extension] = field(default_factory=list)

    def pack(self) -> bytes:
        return _RREP_ACK.pack(TYPE_RREP_ACK, 0) + pack_extensions(self.extensions)


Message = RREQ | RREP | RERR | RREPAck


def pack_extensions(extensions: list[Extension]) -> bytes:
    out = bytearray()
    for ext_type, data in extensions:
        if not 0 <= ext_type <= 255 or len(data) > 255:
            raise MalformedAodv(f"extension type {ext_type} / length {len(data)} out of range")
        out += bytes((ext_type, len(data))) + data
    return bytes(out)


def parse_extensions(data: bytes | memoryview) -> list[Extension]:
    """Type-length-value extensions after a message (RFC 3561 section 9)."""
    out: list[Extension] = []
    i = 0
    while i < len(data):
        if i + 2 > len(data):
            raise MalformedAodv("truncated extension header")
        ext_type, length = data[i], data[i + 1]
        if i + 2 + length > len(data):
            raise MalformedAodv(f"extension type {ext_type} claims {length} bytes, fewer left")
        out.append((ext_type, bytes(data[i + 2 : i + 2 + length])))
        i += 2 + length
    return out


def parse(data: bytes | memoryview) -> Message:
    """Parse one AODV message (the UDP payload). Raises :class:`MalformedAodv`."""
    if len(data) < 2:
        raise MalformedAodv(f"{len(data)} bytes is shorter than any AODV message")
    kind = data[0]
    if kind == TYPE_RREQ:
        if len(data) < _RREQ.size:
            raise MalformedAodv(f"RREQ needs {_RREQ.size} bytes, got {len(data)}")
        _, flags, _, hops, rid, dst, dseq, org, oseq = _RREQ.unpack_from(data)
        return RREQ(
            hop_count=hops,
            rreq_id=rid,
            dest=IPv4Address(dst),
            dest_seq=dseq,
            orig=IPv4Address(org),
            orig_seq=oseq,
            join=bool(flags & RREQ_J),
            repair=bool(flags & RREQ_R),
            gratuitous=bool(flags & RREQ_G),
            dest_only=bool(flags & RREQ_D),
            unknown_seq=bool(flags & RREQ_U),
            extensions=parse_extensions(data[_RREQ.size :]),
        )
    if kind == TYPE_RREP:
        if len(data) < _RREP.size:
            raise MalformedAodv(f"RREP needs {_RREP.size} bytes, got {len(data)}")
        _, flags, prefix, hops, dst, dseq, org, life = _RREP.unpack_from(data)
        return RREP(
            hop_count=hops,
            dest=IPv4Address(dst),
            dest_seq=dseq,
            orig=IPv4Address(org),
            lifetime_ms=life,
            repair=bool(flags & RREP_R),
            ack_required=bool(flags & RREP_A),
            prefix_size=prefix & 0x1F,
            extensions=parse_extensions(data[_RREP.size :]),
        )
    if kind == TYPE_RERR:
        if len(data) < _RERR_HEAD.size:
            raise MalformedAodv("RERR shorter than its header")
        _, flags, _, count = _RERR_HEAD.unpack_from(data)
        if count == 0:
            raise MalformedAodv("RERR with a destination count of 0")
        end = _RERR_HEAD.size + count * _RERR_DEST.size
        if len(data) < end:
            raise MalformedAodv(f"RERR lists {count} destinations but has {len(data)} bytes")
        dests = [
            (IPv4Address(d), s)
            for d, s in (
                _RERR_DEST.unpack_from(data, _RERR_HEAD.size + i * _RERR_DEST.size)
                for i in range(count)
            )
        ]
        return RERR(dests, bool(flags & RERR_N), parse_extensions(data[end:]))
    if kind == TYPE_RREP_ACK:
        return RREPAck(parse_extensions(data[_RREP_ACK.size :]))
    raise MalformedAodv(f"unknown AODV message type {kind}")


def control_packet(
    msg: Message, src: IPv4Address, dst: IPv4Address, ttl: int, ident: int = 0
) -> bytes:
    """The whole IPv4/UDP(654->654) packet that carries ``msg`` from ``src`` to ``dst``,
    marked as network control (DSCP CS6, :data:`ipv4.TOS_NETWORK_CONTROL`)."""
    payload = msg.pack()
    return ipv4.build(
        src,
        dst,
        ipv4.PROTO_UDP,
        ipv4.udp(AODV_PORT, AODV_PORT, payload, src, dst),
        ttl=ttl,
        tos=ipv4.TOS_NETWORK_CONTROL,
        ident=ident,
    )


def is_control(packet: bytes | memoryview) -> bool:
    """True when ``packet`` is UDP to port 654 (cheap check, no validation)."""
    if len(packet) < 20 or packet[9] != ipv4.PROTO_UDP:
        return False
    ihl = (packet[0] & 0x0F) * 4
    return len(packet) >= ihl + 4 and packet[ihl + 2] == 0x02 and packet[ihl + 3] == 0x8E


def parse_control(packet: bytes | memoryview) -> tuple[ipv4.IPv4Header, Message]:
    """IPv4 header and AODV message of a control packet.

    Raises :class:`MalformedAodv` (also for a bad IPv4 or UDP header).
    """
    try:
        hdr = ipv4.parse(packet)
        if hdr.protocol != ipv4.PROTO_UDP:
            raise MalformedAodv(f"IP protocol {hdr.protocol} is not UDP")
        _, dport, payload = ipv4.parse_udp(memoryview(packet)[hdr.ihl : hdr.total_length])
    except ipv4.MalformedPacket as e:
        raise MalformedAodv(str(e)) from e
    if dport != AODV_PORT:
        raise MalformedAodv(f"UDP port {dport} is not AODV's {AODV_PORT}")
    return hdr, parse(payload)


def hello_interval_ms(msg: RREP) -> int | None:
    """The Hello Interval extension (RFC 3561 9.1) of a Hello, if present."""
    for ext_type, data in msg.extensions:
        if ext_type == EXT_HELLO_INTERVAL and len(data) == 4:
            return int.from_bytes(data, "big")
    return None
