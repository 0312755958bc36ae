"""Wire format of the proxy-to-proxy session (the mesh leg): pack and parse, nothing else.

Every frame is ``type:u8 | body_length:u32 | body`` (network byte order), carried over
one kernel TCP connection (a *transport*). Offsets are 64-bit byte offsets of one
direction's application stream, counted from 0 for the life of the session, so they
stay meaningful across transports (docs/proxy.md).

======== =====================================================================
OPEN     session id (16) | epoch u32 | port u16 | mode u8 | addr len u8 | addr
RESUME   session id (16) | epoch u32 | delivered u64 | flags u8 (bit 0: FIN seen)
DATA     offset u64 | payload
ACK      delivered u64 | flags u8 (bit 0: FIN seen)
FIN      final offset u64
RESET    reason (UTF-8)
PROBE    nonce u64
PROBE_ACK nonce u64
======== =====================================================================
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from ipaddress import IPv4Address, IPv6Address, ip_address

HEADER = struct.Struct("!BI")
MAX_BODY = 1 << 20  # a larger length means the stream is not ours (or is corrupt)
MAX_DATA = 64 * 1024  # payload per DATA frame: one read's worth, keeps frames cheap
SID_LEN = 16

_U64 = struct.Struct("!Q")
_ACK = struct.Struct("!QB")
_OPEN_FIXED = struct.Struct("!16sIHBB")
_RESUME = struct.Struct("!16sIQB")
_DATA_HEAD = 5 + 8  # HEADER + offset

MODES = ("plain", "fixed-rto", "elfn", "bus")


class FrameType(IntEnum):
    OPEN = 1
    RESUME = 2
    DATA = 3
    ACK = 4
    FIN = 5
    RESET = 6
    PROBE = 7
    PROBE_ACK = 8


class MalformedFrame(ValueError):
    """The byte stream cannot be a session stream (bad length or body)."""


@dataclass(frozen=True, slots=True)
class Open:
    sid: bytes
    epoch: int
    addr: IPv4Address | IPv6Address
    port: int
    mode: str


@dataclass(frozen=True, slots=True)
class Resume:
    sid: bytes
    epoch: int
    delivered: int
    fin_seen: bool


@dataclass(frozen=True, slots=True)
class Data:
    offset: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Ack:
    delivered: int
    fin_seen: bool


@dataclass(frozen=True, slots=True)
class Fin:
    final: int


@dataclass(frozen=True, slots=True)
class Reset:
    reason: str


@dataclass(frozen=True, slots=True)
class Probe:
    nonce: int


@dataclass(frozen=True, slots=True)
class ProbeAck:
    nonce: int


@dataclass(frozen=True, slots=True)
class Unknown:
    """A frame of a type this version does not know: skipped (forward compatibility)."""

    type: int


Frame = Open | Resume | Data | Ack | Fin | Reset | Probe | ProbeAck | Unknown


def _frame(ftype: FrameType, body: bytes) -> bytes:
    return HEADER.pack(ftype, len(body)) + body


def pack_open(
    sid: bytes, epoch: int, addr: IPv4Address | IPv6Address, port: int, mode: str
) -> bytes:
    raw = addr.packed
    return _frame(
        FrameType.OPEN, _OPEN_FIXED.pack(sid, epoch, port, MODES.index(mode), len(raw)) + raw
    )


def pack_resume(sid: bytes, epoch: int, delivered: int, fin_seen: bool) -> bytes:
    return _frame(FrameType.RESUME, _RESUME.pack(sid, epoch, delivered, int(fin_seen)))


def pack_data(offset: int, payload: bytes | memoryview) -> bytes:
    return HEADER.pack(FrameType.DATA, 8 + len(payload)) + _U64.pack(offset) + payload


def pack_ack(delivered: int, fin_seen: bool) -> bytes:
    return _frame(FrameType.ACK, _ACK.pack(delivered, int(fin_seen)))


def pack_fin(final: int) -> bytes:
    return _frame(FrameType.FIN, _U64.pack(final))


def pack_reset(reason: str) -> bytes:
    return _frame(FrameType.RESET, reason.encode()[:1000])


def pack_probe(nonce: int) -> bytes:
    return _frame(FrameType.PROBE, _U64.pack(nonce))


def pack_probe_ack(nonce: int) -> bytes:
    return _frame(FrameType.PROBE_ACK, _U64.pack(nonce))


def _parse_body(ftype: int, body: bytes) -> Frame:
    try:
        if ftype == FrameType.DATA:
            if len(body) < 8:
                raise MalformedFrame("DATA shorter than its offset")
            return Data(_U64.unpack_from(body)[0], body[8:])
        if ftype == FrameType.ACK:
            delivered, flags = _ACK.unpack(body)
            return Ack(delivered, bool(flags & 1))
        if ftype == FrameType.RESUME:
            sid, epoch, delivered, flags = _RESUME.unpack(body)
            return Resume(sid, epoch, delivered, bool(flags & 1))
        if ftype == FrameType.OPEN:
            sid, epoch, port, mode, alen = _OPEN_FIXED.unpack_from(body)
            raw = body[_OPEN_FIXED.size :]
            if alen not in (4, 16) or len(raw) != alen or mode >= len(MODES):
                raise MalformedFrame("OPEN with a bad address or mode")
            return Open(sid, epoch, ip_address(raw), port, MODES[mode])
        if ftype == FrameType.FIN:
            return Fin(_U64.unpack(body)[0])
        if ftype == FrameType.RESET:
            return Reset(body.decode(errors="replace"))
        if ftype == FrameType.PROBE:
            return Probe(_U64.unpack(body)[0])
        if ftype == FrameType.PROBE_ACK:
            return ProbeAck(_U64.unpack(body)[0])
    except struct.error as exc:
        raise MalformedFrame(f"{FrameType(ftype).name} body of {len(body)} bytes: {exc}") from None
    return Unknown(ftype)


_MAX_OFFSET = (1 << 64) - 1  # offsets are u64 on the wire


class FrameReader:
    """Reassembles frames from a byte stream that may be cut at any byte."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes | memoryview) -> None:
        self._buf += data

    def pending(self) -> bytes:
        """Bytes fed and not yet consumed (handed on when a shell passes the stream on)."""
        return bytes(self._buf)

    def clear(self) -> None:
        self._buf.clear()

    def peek(self) -> Frame | None:
        """The first complete frame without consuming it (the acceptor's routing step)."""
        return self._next(consume=False)

    def next_frame(self) -> Frame | None:
        """The next frame, or None until more bytes arrive.

        A DATA frame is handed on in pieces as its payload arrives (each a :class:`Data`
        at its own offset): the receiver then delivers bytes as soon as TCP does, instead
        of holding up to ``MAX_DATA`` bytes until the frame's last segment is in. Over a
        2 Mbit/s 3-hop chain a whole 64 KiB frame takes ~1.1 s; that was the stall after
        every RESUME (docs/proxy.md, "Where the 1.2 s after RESUME went")."""
        buf = self._buf
        if len(buf) > _DATA_HEAD and buf[0] == FrameType.DATA:
            _, length = HEADER.unpack_from(buf)
            have = len(buf) - _DATA_HEAD
            if 8 <= length <= MAX_BODY and have < length - 8:
                offset = _U64.unpack_from(buf, HEADER.size)[0]
                if offset + length - 8 > _MAX_OFFSET:
                    raise MalformedFrame(f"DATA frame at offset {offset} runs past 2**64")
                payload = bytes(buf[_DATA_HEAD:])
                # what is left becomes a DATA frame of its own, right after this piece
                buf[:] = HEADER.pack(FrameType.DATA, length - have) + _U64.pack(offset + have)
                return Data(offset, payload)
        return self._next(consume=True)

    def _next(self, consume: bool) -> Frame | None:
        buf = self._buf
        if len(buf) < HEADER.size:
            return None
        ftype, length = HEADER.unpack_from(buf)
        if length > MAX_BODY:
            raise MalformedFrame(f"frame body of {length} bytes exceeds {MAX_BODY}")
        end = HEADER.size + length
        if len(buf) < end:
            return None
        body = bytes(buf[HEADER.size : end])
        if consume:
            del buf[:end]
        return _parse_body(ftype, body)
