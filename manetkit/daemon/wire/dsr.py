"""DSR options header and options, byte-exact to RFC 4728 section 6.

A DSR packet is an IPv4 packet with protocol 48 whose payload starts with the DSR
Options header (6.1)::

    | Next Header | F | Reserved(7) | Payload Length (16) | options ... | inner payload

``Payload Length`` counts the option bytes only (not the 4-byte fixed part). The
options defined here: Route Request (6.2), Route Reply (6.3), Route Error (6.4),
Acknowledgement Request (6.5), Acknowledgement (6.6), DSR Source Route (6.7), Pad1 (6.8)
and PadN (6.9). Any other option type is kept as :class:`UnknownOption` (type + data) so
later extensions (SMR, Atra, ELFN, ERDN/ERSN) ride on the same header, and so a node that
does not know an option can apply RFC 4728 6.1's rule on the option type's two
high-order bits (:func:`unknown_option_action`).

Pack and parse only; no protocol decisions. Malformed input raises
:class:`MalformedDsr` (a :class:`~manetkit.daemon.wire.ipv4.MalformedPacket`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import Literal

from manetkit.daemon.wire import ipv4

OPT_PADN = 0
OPT_RREQ = 1
OPT_RREP = 2
OPT_RERR = 3
OPT_ACK = 32
OPT_SRCRT = 96
OPT_ACK_REQ = 160
OPT_PAD1 = 224

NO_NEXT_HEADER = 59  # RFC 4728 6.1 / IANA: nothing follows the options (pure control)
HEADER_LEN = 4

ERR_NODE_UNREACHABLE = 1  # 6.4.1
ERR_FLOW_STATE_NOT_SUPPORTED = 2  # 6.4.2
ERR_OPTION_NOT_SUPPORTED = 3  # 6.4.3

_HDR = struct.Struct("!BBH")

Address = IPv4Address


class MalformedDsr(ipv4.MalformedPacket):
    """A DSR options header or option that does not follow RFC 4728 section 6."""


# --- options -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RouteRequest:
    """6.2: ``addresses`` is the route record (initiator excluded, it is the IP source)."""

    ident: int
    target: Address
    addresses: tuple[Address, ...] = ()


@dataclass(frozen=True, slots=True)
class RouteReply:
    """6.3: the route from the reply's IP destination (exclusive) to Address[n] (target)."""

    addresses: tuple[Address, ...]
    last_hop_external: bool = False


@dataclass(frozen=True, slots=True)
class RouteError:
    """6.4: ``type_specific`` is the unreachable node's address for NODE_UNREACHABLE."""

    error_type: int
    error_src: Address
    error_dst: Address
    type_specific: bytes = b""
    salvage: int = 0

    @classmethod
    def node_unreachable(
        cls, error_src: Address, error_dst: Address, unreachable: Address, salvage: int = 0
    ) -> RouteError:
        return cls(ERR_NODE_UNREACHABLE, error_src, error_dst, unreachable.packed, salvage)

    @property
    def unreachable(self) -> Address | None:
        """The Unreachable Node Address of a NODE_UNREACHABLE error (6.4.1)."""
        if self.error_type == ERR_NODE_UNREACHABLE and len(self.type_specific) >= 4:
            return IPv4Address(self.type_specific[:4])
        return None


@dataclass(frozen=True, slots=True)
class AckRequest:
    """6.5."""

    ident: int


@dataclass(frozen=True, slots=True)
class Ack:
    """6.6."""

    ident: int
    ack_src: Address
    ack_dst: Address


@dataclass(frozen=True, slots=True)
class SourceRoute:
    """6.7: ``addresses`` are the hops between the route's start and the IP destination.

    ``segments_left`` counts the listed addresses still to be visited by the packet on
    the air, the receiver included: the source sends with ``len(addresses)``, the node at
    ``addresses[i]`` receives ``len(addresses) - i`` and the destination receives 0.
    When ``salvage`` is 0 the route starts at the IP source; a salvaging node puts its
    own address first (8.4.3), so then the route starts at ``addresses[0]`` and the
    salvager sends ``len(addresses) - 1`` (8.4.3's text says ``n``, which with 8.1.4's
    processing would make ``addresses[1]`` forward to itself).
    """

    addresses: tuple[Address, ...]
    segments_left: int
    salvage: int = 0
    first_hop_external: bool = False
    last_hop_external: bool = False


@dataclass(frozen=True, slots=True)
class Pad1:
    """6.8: one byte of padding."""


@dataclass(frozen=True, slots=True)
class PadN:
    """6.9: ``length`` zero bytes of option data."""

    length: int = 0


@dataclass(frozen=True, slots=True)
class UnknownOption:
    """Any other option: kept byte for byte so it can be forwarded or handled later."""

    type: int
    data: bytes


Option = (
    RouteRequest
    | RouteReply
    | RouteError
    | AckRequest
    | Ack
    | SourceRoute
    | Pad1
    | PadN
    | UnknownOption
)

UnknownAction = Literal["skip", "remove", "mark", "drop"]


def unknown_option_action(option_type: int) -> UnknownAction:
    """What a node that does not implement ``option_type`` does (RFC 4728 6.1).

    The two high-order bits: 00 skip the option, 01 remove it and continue, 10 keep it
    but answer with an OPTION_NOT_SUPPORTED Route Error, 11 drop the packet (with that
    Route Error). Extension options manetkit defines use 00, so plain DSR nodes forward
    them untouched.
    """
    return ("skip", "remove", "mark", "drop")[option_type >> 6]


# --- packing -----------------------------------------------------------------------


def _addrs(addresses: Iterable[Address]) -> bytes:
    return b"".join(a.packed for a in addresses)


def _tlv(otype: int, data: bytes) -> bytes:
    if len(data) > 255:
        raise ValueError(f"DSR option {otype} data of {len(data)} bytes exceeds 255")
    return bytes((otype, len(data))) + data


def pack_option(opt: Option) -> bytes:
    """One option's bytes (type, length, data)."""
    match opt:
        case SourceRoute():
            if not 0 <= opt.segments_left <= min(63, len(opt.addresses)):
                raise ValueError(f"segments left {opt.segments_left} out of range")
            if not 0 <= opt.salvage <= 15:
                raise ValueError(f"salvage {opt.salvage} out of range 0..15")
            flags = (
                (opt.first_hop_external << 15)
                | (opt.last_hop_external << 14)
                | (opt.salvage << 6)
                | opt.segments_left
            )
            return _tlv(OPT_SRCRT, struct.pack("!H", flags) + _addrs(opt.addresses))
        case RouteRequest():
            data = struct.pack("!H", opt.ident) + opt.target.packed + _addrs(opt.addresses)
            return _tlv(OPT_RREQ, data)
        case RouteReply():
            return _tlv(OPT_RREP, bytes((opt.last_hop_external << 7,)) + _addrs(opt.addresses))
        case RouteError():
            if not 0 <= opt.salvage <= 15:
                raise ValueError(f"salvage {opt.salvage} out of range 0..15")
            data = (
                bytes((opt.error_type, opt.salvage))
                + opt.error_src.packed
                + opt.error_dst.packed
                + opt.type_specific
            )
            return _tlv(OPT_RERR, data)
        case AckRequest():
            return _tlv(OPT_ACK_REQ, struct.pack("!H", opt.ident))
        case Ack():
            return _tlv(
                OPT_ACK, struct.pack("!H", opt.ident) + opt.ack_src.packed + opt.ack_dst.packed
            )
        case Pad1():
            return bytes((OPT_PAD1,))
        case PadN():
            return _tlv(OPT_PADN, bytes(opt.length))
        case UnknownOption():
            if opt.type in KNOWN_OPTION_TYPES:
                raise ValueError(f"option type {opt.type} is not unknown")
            return _tlv(opt.type, opt.data)
    raise TypeError(f"not a DSR option: {opt!r}")


def pack_options(options: Sequence[Option]) -> bytes:
    return b"".join(pack_option(o) for o in options)


def dsr_header(next_header: int, options: Sequence[Option], flow_state: bool = False) -> bytes:
    """The DSR Options header (6.1) with its options."""
    body = pack_options(options)
    if len(body) > 0xFFFF:
        raise ValueError("DSR options longer than 65535 bytes")
    return _HDR.pack(next_header, flow_state << 7, len(body)) + body


@dataclass(frozen=True, slots=True)
class IPFields:
    """The IPv4 header fields :func:`encapsulate` puts around a DSR header."""

    src: Address
    dst: Address
    ttl: int = 64
    tos: int = 0
    ident: int = 0


def encapsulate(
    ip: IPFields, options: Sequence[Option], inner_protocol: int, inner_payload: bytes = b""
) -> bytes:
    """A whole IPv4/DSR packet: IP header (protocol 48), DSR header, inner payload."""
    payload = dsr_header(inner_protocol, options) + inner_payload
    return ipv4.build(
        ip.src, ip.dst, ipv4.PROTO_DSR, payload, ttl=ip.ttl, tos=ip.tos, ident=ip.ident
    )


def add_header(packet: bytes, options: Sequence[Option]) -> bytes:
    """Insert a DSR header into an existing IPv4 packet (the source's step, 8.1.3).

    Keeps the IP header (TTL, TOS, ident, options), sets protocol 48, fixes the total
    length and checksum. The original protocol goes into Next Header.
    """
    hdr = ipv4.parse(packet)
    dsr = dsr_header(hdr.protocol, options)
    return _rebuild(
        packet, hdr.ihl, ipv4.PROTO_DSR, dsr + bytes(packet[hdr.ihl : hdr.total_length])
    )


def strip(packet: bytes | bytearray | memoryview) -> bytes:
    """The original packet: DSR header removed, Next Header back as the IP protocol.

    Done by the destination before delivering (RFC 4728 8.1.4).
    """
    hdr = ipv4.parse(packet)
    if hdr.protocol != ipv4.PROTO_DSR:
        raise MalformedDsr(f"IP protocol {hdr.protocol} is not DSR (48)")
    off = hdr.ihl
    if hdr.total_length - off < HEADER_LEN:
        raise MalformedDsr("packet shorter than the DSR options header")
    nh, _flags, plen = _HDR.unpack_from(packet, off)
    end = off + HEADER_LEN + plen
    if end > hdr.total_length:
        raise MalformedDsr(f"DSR payload length {plen} runs past the packet")
    return _rebuild(packet, off, nh, bytes(packet[end : hdr.total_length]))


def _rebuild(
    packet: bytes | bytearray | memoryview, ihl: int, protocol: int, payload: bytes
) -> bytes:
    head = bytearray(packet[:ihl])
    struct.pack_into("!H", head, 2, ihl + len(payload))
    head[9] = protocol
    head[10:12] = b"\0\0"
    struct.pack_into("!H", head, 10, ipv4.checksum(head))
    return bytes(head) + payload


# --- parsing -----------------------------------------------------------------------

KNOWN_OPTION_TYPES = {
    OPT_PADN,
    OPT_RREQ,
    OPT_RREP,
    OPT_RERR,
    OPT_ACK,
    OPT_SRCRT,
    OPT_ACK_REQ,
    OPT_PAD1,
}


def _addr_list(data: bytes, what: str) -> tuple[Address, ...]:
    if len(data) % 4:
        raise MalformedDsr(f"{what}: address list of {len(data)} bytes is not a multiple of 4")
    return tuple(IPv4Address(data[i : i + 4]) for i in range(0, len(data), 4))


def parse_option(otype: int, data: bytes) -> Option:
    """Decode one option's data (everything after type and length)."""
    n = len(data)
    if otype == OPT_SRCRT:
        if n < 2:
            raise MalformedDsr(f"source route option data length {n} < 2")
        (flags,) = struct.unpack_from("!H", data)
        addrs = _addr_list(data[2:], "source route")
        sl = flags & 0x3F
        if sl > len(addrs):
            raise MalformedDsr(f"segments left {sl} exceeds the {len(addrs)} addresses")
        return SourceRoute(addrs, sl, (flags >> 6) & 0x0F, bool(flags >> 15), bool(flags >> 14 & 1))
    if otype == OPT_RREQ:
        if n < 6:
            raise MalformedDsr(f"route request option data length {n} < 6")
        (ident,) = struct.unpack_from("!H", data)
        return RouteRequest(ident, IPv4Address(data[2:6]), _addr_list(data[6:], "route request"))
    if otype == OPT_RREP:
        if n < 1:
            raise MalformedDsr("route reply option without its flags byte")
        return RouteReply(_addr_list(data[1:], "route reply"), bool(data[0] >> 7))
    if otype == OPT_RERR:
        if n < 10:
            raise MalformedDsr(f"route error option data length {n} < 10")
        etype = data[0]
        if etype == ERR_NODE_UNREACHABLE and n < 14:
            raise MalformedDsr("NODE_UNREACHABLE route error without the unreachable address")
        return RouteError(
            etype, IPv4Address(data[2:6]), IPv4Address(data[6:10]), bytes(data[10:]), data[1] & 0x0F
        )
    if otype == OPT_ACK_REQ:
        if n != 2:
            raise MalformedDsr(f"acknowledgement request data length {n} != 2")
        return AckRequest(struct.unpack("!H", data)[0])
    if otype == OPT_ACK:
        if n != 10:
            raise MalformedDsr(f"acknowledgement data length {n} != 10")
        return Ack(
            struct.unpack_from("!H", data)[0], IPv4Address(data[2:6]), IPv4Address(data[6:10])
        )
    if otype == OPT_PADN:
        return PadN(n)
    return UnknownOption(otype, bytes(data))


@dataclass(frozen=True, slots=True)
class ParsedOption:
    """An option and where it sits in the packet (offset of its type byte)."""

    offset: int
    option: Option


@dataclass(frozen=True, slots=True)
class DsrHeader:
    next_header: int
    flow_state: bool
    options: tuple[ParsedOption, ...]
    offset: int  # where the DSR header starts in the packet (the IP header length)
    end: int  # first byte of the inner payload

    def find(self, kind: type) -> list:
        return [p.option for p in self.options if isinstance(p.option, kind)]

    def first(self, kind: type) -> ParsedOption | None:
        return next((p for p in self.options if isinstance(p.option, kind)), None)


def parse_header(packet: bytes | bytearray | memoryview, offset: int, limit: int) -> DsrHeader:
    """Parse the DSR header at ``offset`` in a packet whose IP total length is ``limit``."""
    if limit - offset < HEADER_LEN:
        raise MalformedDsr("packet shorter than the DSR options header")
    nh, flags, plen = _HDR.unpack_from(packet, offset)
    end = offset + HEADER_LEN + plen
    if end > limit:
        raise MalformedDsr(f"DSR payload length {plen} runs past the packet")
    opts: list[ParsedOption] = []
    i = offset + HEADER_LEN
    while i < end:
        otype = packet[i]
        if otype == OPT_PAD1:
            opts.append(ParsedOption(i, Pad1()))
            i += 1
            continue
        if i + 2 > end:
            raise MalformedDsr(f"option type {otype} truncated before its length")
        olen = packet[i + 1]
        if i + 2 + olen > end:
            raise MalformedDsr(f"option type {otype} of length {olen} runs past the header")
        opts.append(ParsedOption(i, parse_option(otype, bytes(packet[i + 2 : i + 2 + olen]))))
        i += 2 + olen
    return DsrHeader(nh, bool(flags >> 7), tuple(opts), offset, end)


def parse(packet: bytes | bytearray | memoryview) -> tuple[ipv4.IPv4Header, DsrHeader]:
    """IPv4 header and DSR header of a DSR packet. Raises :class:`MalformedDsr`."""
    hdr = ipv4.parse(packet)
    if hdr.protocol != ipv4.PROTO_DSR:
        raise MalformedDsr(f"IP protocol {hdr.protocol} is not DSR (48)")
    return hdr, parse_header(packet, hdr.ihl, hdr.total_length)


def is_control(packet: bytes | bytearray | memoryview) -> bool:
    """True when ``packet`` is DSR with nothing after its options: Next Header 59 (RFC
    4728 section 6.1), i.e. a request, reply or error sent on its own rather than
    piggybacked on data (cheap check, no validation)."""
    if len(packet) < 21 or packet[9] != ipv4.PROTO_DSR:
        return False
    ihl = (packet[0] & 0x0F) * 4
    return len(packet) > ihl and packet[ihl] == NO_NEXT_HEADER


def max_overhead(max_route_length: int) -> int:
    """Bytes the DSR header adds to a data packet in the worst case.

    A data packet carries the 4-byte options header and one Source Route option
    (2 + 2 + 4 per address). A route of ``h`` hops lists ``h - 1`` intermediate nodes;
    a salvaged packet also lists the salvaging node (8.4.3), so at most
    ``max_route_length`` addresses. The shell sets the TUN MTU to the radio MTU minus
    this, so no packet ever needs fragmenting.
    """
    if max_route_length < 1:
        raise ValueError("max_route_length must be at least 1")
    return HEADER_LEN + 4 + 4 * max_route_length
