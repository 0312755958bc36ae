"""manetkit's ELFN and TCP-BuS notices on the air, as DSR options and AODV extensions.

The same bodies ride in a DSR options header (RFC 4728 6.1: type, length, data) and
after an AODV message (RFC 3561 section 9: type, length, data). Pack and parse only.

Types. DSR: 48-51, whose two high-order bits are ``00`` ("skip the option if unknown",
RFC 4728 6.1), so a plain DSR node forwards the packet and ignores the notice; IANA has
assigned none of them (RFC 4728 uses 0-3, 32, 96, 160, 224). AODV: RFC 3561 section 9
defines only type 1 (Hello Interval) and no experimental range, so manetkit takes
250-253 from the top of the space, far from IANA's low assignments (RFC 3692 spirit).
An AODV node ignores extensions it does not know.

In DSR the body follows a 2-byte shim ``00 len(body)`` (see :func:`dsr_option`).

Bodies (network byte order)::

    FLOW (18 bytes):  proto u8 | flags u8 | sport u16 | dport u16 | src 4 | dst 4 | seq u32
    ELFN:    FLOW                           (Holland & Vaidya 6: the failed packet)
    ERDN:    ident u16 | pivot 4 | FLOW     (Kim, Toh & Choi IV: seq = ERDN_GEN_SEQ)
    ERSN:    ident u16 | pivot 4 | FLOW     (seq = Last_ACK when flags & LAST_ACK_KNOWN,
                                             else the head-of-queue sequence)
    BUS-ACK: ident u16 | pivot 4 | kind u8  (hop-by-hop acknowledgement of ERDN/ERSN)

``src``/``dst``/``sport``/``dport`` name the TCP flow in its data direction (the
failed packet's); ``pivot`` is the node that detected the break.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from ipaddress import IPv4Address

from manetkit.daemon.wire.dsr import UnknownOption

DSR_OPT_ELFN = 48
DSR_OPT_ERDN = 49
DSR_OPT_ERSN = 50
DSR_OPT_BUS_ACK = 51
DSR_TYPES = (DSR_OPT_ELFN, DSR_OPT_ERDN, DSR_OPT_ERSN, DSR_OPT_BUS_ACK, 52)  # 52: PREDICTED

AODV_EXT_ELFN = 250
AODV_EXT_ERDN = 251
AODV_EXT_ERSN = 252
AODV_EXT_BUS_ACK = 253
AODV_TYPES = (AODV_EXT_ELFN, AODV_EXT_ERDN, AODV_EXT_ERSN, AODV_EXT_BUS_ACK)

# Atra's predicted route failure (Anantharaman et al. IV-A): rides next to a Route Error
# (DSR) / in an RERR (AODV) whose link has not broken yet: the source rediscovers and
# keeps using the route. Body: PREDICTED (4 bytes): eta_ms u16 | signal_centidbm i16.
DSR_OPT_PREDICTED = 52
AODV_EXT_PREDICTED = 249
_PREDICTED = struct.Struct("!Hh")

# Control-plane authentication (manetkit/daemon/auth.py, docs/security.md): the MAC
# trailer rides as DSR option 56 (high bits 00: skip if unknown, RFC 4728 6.1; with the
# same 2-byte shim as the notices) and as AODV extension 248 (RFC 3561 section 9 format),
# also after the body of a manetkit hello beacon. Body: key id u8 | index u32 | PC u32 |
# MAC (RFC 8967 4.1's packet counter and index).
DSR_OPT_AUTH = 56
AODV_EXT_AUTH = 248

KIND_ERDN = 1
KIND_ERSN = 2

FLAG_LAST_ACK_KNOWN = 0x01

_FLOW = struct.Struct("!BBHH4s4sI")
_NOTICE = struct.Struct("!H4s")
_ACK = struct.Struct("!H4sB")


class MalformedNotice(ValueError):
    """An ELFN/ERDN/ERSN/BUS-ACK body of the wrong length or kind."""


@dataclass(frozen=True, slots=True)
class Flow:
    """A TCP flow in its data direction and one sequence number of it."""

    src: IPv4Address
    dst: IPv4Address
    sport: int
    dport: int
    seq: int = 0
    proto: int = 6
    flags: int = 0

    def pack(self) -> bytes:
        return _FLOW.pack(
            self.proto, self.flags, self.sport, self.dport, self.src.packed, self.dst.packed,
            self.seq & 0xFFFFFFFF,
        )  # fmt: skip

    @classmethod
    def parse(cls, data: bytes) -> Flow:
        if len(data) != _FLOW.size:
            raise MalformedNotice(f"flow body of {len(data)} bytes, expected {_FLOW.size}")
        proto, flags, sport, dport, src, dst, seq = _FLOW.unpack(data)
        return cls(IPv4Address(src), IPv4Address(dst), sport, dport, seq, proto, flags)

    @property
    def key(self) -> tuple[IPv4Address, IPv4Address, int, int]:
        return self.src, self.dst, self.sport, self.dport

    def fields(self) -> dict:
        """The flow as event fields (docs/proxy.md names)."""
        return {
            "src": str(self.src),
            "dst": str(self.dst),
            "sport": self.sport,
            "dport": self.dport,
            "proto": self.proto,
        }


@dataclass(frozen=True, slots=True)
class Notice:
    """ERDN or ERSN: ``kind`` is KIND_ERDN / KIND_ERSN."""

    kind: int
    ident: int
    pivot: IPv4Address
    flow: Flow

    def pack(self) -> bytes:
        return _NOTICE.pack(self.ident, self.pivot.packed) + self.flow.pack()

    @classmethod
    def parse(cls, kind: int, data: bytes) -> Notice:
        if len(data) != _NOTICE.size + _FLOW.size:
            raise MalformedNotice(f"ERDN/ERSN body of {len(data)} bytes")
        ident, pivot = _NOTICE.unpack_from(data)
        return cls(kind, ident, IPv4Address(pivot), Flow.parse(data[_NOTICE.size :]))

    @property
    def key(self) -> tuple[int, int, IPv4Address]:
        """What an acknowledgement names."""
        return self.kind, self.ident, self.pivot


@dataclass(frozen=True, slots=True)
class BusAck:
    """A hop's acknowledgement of the ERDN/ERSN ``(kind, ident, pivot)``."""

    kind: int
    ident: int
    pivot: IPv4Address

    def pack(self) -> bytes:
        return _ACK.pack(self.ident, self.pivot.packed, self.kind)

    @classmethod
    def parse(cls, data: bytes) -> BusAck:
        if len(data) != _ACK.size:
            raise MalformedNotice(f"BUS-ACK body of {len(data)} bytes, expected {_ACK.size}")
        ident, pivot, kind = _ACK.unpack(data)
        if kind not in (KIND_ERDN, KIND_ERSN):
            raise MalformedNotice(f"BUS-ACK of unknown kind {kind}")
        return cls(kind, ident, IPv4Address(pivot))

    @property
    def key(self) -> tuple[int, int, IPv4Address]:
        return self.kind, self.ident, self.pivot


@dataclass(frozen=True, slots=True)
class Predicted:
    """Atra: the error's link is predicted to fail in ``eta_s`` (it still works)."""

    eta_s: float
    signal_dbm: float

    def pack(self) -> bytes:
        eta = max(0, min(0xFFFF, round(self.eta_s * 1000)))
        sig = max(-32768, min(32767, round(self.signal_dbm * 100)))
        return _PREDICTED.pack(eta, sig)

    @classmethod
    def parse(cls, data: bytes) -> Predicted:
        if len(data) != _PREDICTED.size:
            raise MalformedNotice(f"PREDICTED body of {len(data)} bytes, expected 4")
        eta, sig = _PREDICTED.unpack(data)
        return cls(eta / 1000, sig / 100)


Item = Flow | Notice | BusAck | Predicted

_DSR_KIND = {DSR_OPT_ERDN: KIND_ERDN, DSR_OPT_ERSN: KIND_ERSN}
_AODV_KIND = {AODV_EXT_ERDN: KIND_ERDN, AODV_EXT_ERSN: KIND_ERSN}


def _decode(t: int, data: bytes, elfn: int, kinds: dict[int, int], ack: int) -> Item | None:
    if t == elfn:
        return Flow.parse(data)
    if t in kinds:
        return Notice.parse(kinds[t], data)
    if t == ack:
        return BusAck.parse(data)
    return None


def from_dsr(option_type: int, data: bytes) -> Item | None:
    """The notice in a DSR option (see :func:`dsr_option`), None if not one of ours."""
    if option_type not in DSR_TYPES:
        return None
    if len(data) < 2 or data[0] != 0 or data[1] != len(data) - 2:
        raise MalformedNotice(f"DSR option {option_type} without its 2-byte shim")
    data = data[2:]
    if option_type == DSR_OPT_PREDICTED:
        return Predicted.parse(data)
    return _decode(option_type, data, DSR_OPT_ELFN, _DSR_KIND, DSR_OPT_BUS_ACK)


def from_aodv(ext_type: int, data: bytes) -> Item | None:
    """The notice in an AODV extension, None if the type is not one of ours."""
    if ext_type == AODV_EXT_PREDICTED:
        return Predicted.parse(data)
    return _decode(ext_type, data, AODV_EXT_ELFN, _AODV_KIND, AODV_EXT_BUS_ACK)


def _type_of(item: Item, elfn: int, erdn: int, ersn: int, ack: int) -> int:
    if isinstance(item, Flow):
        return elfn
    if isinstance(item, Notice):
        return erdn if item.kind == KIND_ERDN else ersn
    return ack


def dsr_type(item: Item) -> int:
    if isinstance(item, Predicted):
        return DSR_OPT_PREDICTED
    return _type_of(item, DSR_OPT_ELFN, DSR_OPT_ERDN, DSR_OPT_ERSN, DSR_OPT_BUS_ACK)


def aodv_extension(item: Item) -> tuple[int, bytes]:
    """``(type, data)`` for an AODV message's ``extensions`` list."""
    if isinstance(item, Predicted):
        return AODV_EXT_PREDICTED, item.pack()
    t = _type_of(item, AODV_EXT_ELFN, AODV_EXT_ERDN, AODV_EXT_ERSN, AODV_EXT_BUS_ACK)
    return t, item.pack()


def dsr_option(item: Item) -> UnknownOption:
    """The notice as a DSR option: type, length, a 2-byte shim, then the body.

    Why the shim: Wireshark's DSR dissector (packet-dsr.c) has no case for unknown
    option types; it steps over their type and length bytes only and reads the data as
    further options. The shim ``00 n`` makes it read the body as one PadN of ``n``
    bytes (RFC 4728 6.9), so every option after ours still decodes.
    """
    body = item.pack()
    return UnknownOption(dsr_type(item), bytes((0, len(body))) + body)
