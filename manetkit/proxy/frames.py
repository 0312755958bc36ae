"""Wire format of the proxy-to-proxy session (the mesh leg): pack and parse, nothing else.

Every frame is ``type:u8 | body_length:u32 | body`` (network byte order), carried over
one kernel TCP connection (a *transport*). Offsets are 64-bit byte offsets of one
direction's application stream, counted from 0 for the life of the session, so they
stay meaningful across transports (docs/proxy.md, "Session wire format").

The type byte's low 6 bits are the frame type; bit 7 (``TAGGED``) says the body's last
16 bytes are the frame's MAC tag, bit 6 (``EARLY``, only with ``TAGGED``) that the tag
is under the early (mesh) key rather than the session key (:mod:`manetkit.proxy.channel`
computes and checks tags; this module only carries them).

=========  ===================================================================
OPEN       session id (16) | epoch u32 | port u16 | mode u8 | key id u8 |
           initiator public key (32) | addr len u8 | addr
ACCEPT     session id (16) | epoch u32 | delivered u64 | flags u8 |
           acceptor public key (32)                      (answers OPEN)
RESUME     session id (16) | epoch u32 | delivered u64 | flags u8 (bit 0: FIN seen)
STALE      session id (16) | epoch u32 (the acceptor's current epoch)
DATA       offset u64 | payload
ACK        delivered u64 | flags u8 (bit 0: FIN seen)
FIN        final offset u64
RESET      reason (UTF-8)
PROBE      nonce u64
PROBE_ACK  nonce u64
BUSY       retry after u32 (ms)    (answers a hello: the acceptor is at a session
           limit and took nothing; the initiator dials again after the delay)
=========  ===================================================================
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from ipaddress import IPv4Address, IPv6Address, ip_address

HEADER = struct.Struct("!BI")
MAX_DATA = 16 * 1024  # payload per DATA frame: TLS's record size (RFC 8446 5.1)
TAG_LEN = 16  # the MAC tag at the end of a tagged body (channel.TAG_LEN)
# A larger body means the stream is not ours (or is corrupt). It also bounds what a
# reader holds for one unfinished frame.
MAX_BODY = 8 + MAX_DATA + TAG_LEN + 64
SID_LEN = 16
PUB_LEN = 32

TYPE_MASK = 0x3F
TAGGED = 0x80
EARLY = 0x40

_U64 = struct.Struct("!Q")
_U32 = struct.Struct("!I")
_ACK = struct.Struct("!QB")
_OPEN_FIXED = struct.Struct("!16sIHBB32sB")
_RESUME = struct.Struct("!16sIQB")
_ACCEPT = struct.Struct("!16sIQB32s")
_STALE = struct.Struct("!16sI")
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
    ACCEPT = 9
    STALE = 10
    BUSY = 11


class MalformedFrame(ValueError):
    """The byte stream cannot be a session stream (bad length or body)."""


@dataclass(frozen=True, slots=True)
class Open:
    sid: bytes
    epoch: int
    addr: IPv4Address | IPv6Address
    port: int
    mode: str
    key_id: int  # 0: no mesh key (the initiator's tag-free OPEN)
    pub: bytes  # the initiator's X25519 public key


@dataclass(frozen=True, slots=True)
class Accept:
    sid: bytes
    epoch: int
    delivered: int
    fin_seen: bool
    pub: bytes  # the acceptor's X25519 public key


@dataclass(frozen=True, slots=True)
class Resume:
    sid: bytes
    epoch: int
    delivered: int
    fin_seen: bool


@dataclass(frozen=True, slots=True)
class Stale:
    sid: bytes
    epoch: int  # the acceptor's current epoch: the next RESUME must carry epoch + 1


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
class Busy:
    retry_after_ms: int


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


Frame = (
    Open | Accept | Resume | Stale | Data | Ack | Fin | Reset | Busy | Probe | ProbeAck | Unknown
)
Hello = Open | Resume


@dataclass(frozen=True, slots=True)
class Record:
    """One frame as read: the parsed frame, its flag bits, and for a tagged frame the
    bytes its tag covers (header and body without the tag) and the tag itself."""

    frame: Frame
    flags: int = 0
    signed: bytes = b""
    tag: bytes = b""


# --- packing --------------------------------------------------------------------------
# Every pack_* returns the untagged frame; the session seals it (seal()) when the
# channel is keyed.


def _frame(ftype: FrameType, body: bytes) -> bytes:
    return HEADER.pack(ftype, len(body)) + body


def pack_open(
    sid: bytes,
    epoch: int,
    addr: IPv4Address | IPv6Address,
    port: int,
    mode: str,
    key_id: int = 0,
    pub: bytes = bytes(PUB_LEN),
) -> bytes:
    raw = addr.packed
    body = _OPEN_FIXED.pack(sid, epoch, port, MODES.index(mode), key_id, pub, len(raw)) + raw
    return _frame(FrameType.OPEN, body)


def pack_accept(sid: bytes, epoch: int, delivered: int, fin_seen: bool, pub: bytes) -> bytes:
    return _frame(FrameType.ACCEPT, _ACCEPT.pack(sid, epoch, delivered, int(fin_seen), pub))


def pack_resume(sid: bytes, epoch: int, delivered: int, fin_seen: bool) -> bytes:
    return _frame(FrameType.RESUME, _RESUME.pack(sid, epoch, delivered, int(fin_seen)))


def pack_stale(sid: bytes, epoch: int) -> bytes:
    return _frame(FrameType.STALE, _STALE.pack(sid, epoch))


def data_header(offset: int, n: int, flags: int = 0) -> bytes:
    """Header and offset of a DATA frame of ``n`` payload bytes (tag space included when
    ``flags`` has TAGGED); the payload follows it, then the tag."""
    extra = TAG_LEN if flags & TAGGED else 0
    return HEADER.pack(FrameType.DATA | flags, 8 + n + extra) + _U64.pack(offset)


def pack_data(offset: int, payload: bytes | memoryview) -> bytes:
    return data_header(offset, len(payload)) + payload


def pack_ack(delivered: int, fin_seen: bool) -> bytes:
    return _frame(FrameType.ACK, _ACK.pack(delivered, int(fin_seen)))


def pack_fin(final: int) -> bytes:
    return _frame(FrameType.FIN, _U64.pack(final))


def pack_reset(reason: str) -> bytes:
    return _frame(FrameType.RESET, reason.encode()[:1000])


def pack_busy(retry_after_ms: int) -> bytes:
    return _frame(FrameType.BUSY, _U32.pack(retry_after_ms))


def pack_probe(nonce: int) -> bytes:
    return _frame(FrameType.PROBE, _U64.pack(nonce))


def pack_probe_ack(nonce: int) -> bytes:
    return _frame(FrameType.PROBE_ACK, _U64.pack(nonce))


def tagged_header(frame: bytes, flags: int) -> bytes:
    """``frame`` (untagged) with the flag bits set and room for the tag in its length:
    the bytes the tag covers; the tag is appended after them."""
    ftype, length = HEADER.unpack_from(frame)
    return HEADER.pack(ftype | flags, length + TAG_LEN) + frame[HEADER.size :]


# --- parsing --------------------------------------------------------------------------


def _parse_body(ftype: int, body: bytes | memoryview) -> Frame:
    try:
        if ftype == FrameType.DATA:
            if len(body) < 8:
                raise MalformedFrame("DATA shorter than its offset")
            return Data(_U64.unpack_from(body)[0], bytes(body[8:]))
        if ftype == FrameType.ACK:
            delivered, flags = _ACK.unpack(body)
            return Ack(delivered, bool(flags & 1))
        if ftype == FrameType.RESUME:
            sid, epoch, delivered, flags = _RESUME.unpack(body)
            return Resume(sid, epoch, delivered, bool(flags & 1))
        if ftype == FrameType.ACCEPT:
            sid, epoch, delivered, flags, pub = _ACCEPT.unpack(body)
            return Accept(sid, epoch, delivered, bool(flags & 1), pub)
        if ftype == FrameType.STALE:
            sid, epoch = _STALE.unpack(body)
            return Stale(sid, epoch)
        if ftype == FrameType.OPEN:
            sid, epoch, port, mode, key_id, pub, alen = _OPEN_FIXED.unpack_from(body)
            raw = bytes(body[_OPEN_FIXED.size :])
            if alen not in (4, 16) or len(raw) != alen or mode >= len(MODES):
                raise MalformedFrame("OPEN with a bad address or mode")
            return Open(sid, epoch, ip_address(raw), port, MODES[mode], key_id, pub)
        if ftype == FrameType.FIN:
            return Fin(_U64.unpack(body)[0])
        if ftype == FrameType.RESET:
            return Reset(bytes(body).decode(errors="replace"))
        if ftype == FrameType.BUSY:
            return Busy(_U32.unpack(body)[0])
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

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def clear(self) -> None:
        self._buf.clear()

    def peek(self) -> Record | None:
        """The first complete frame without consuming it (the acceptor's routing step)."""
        return self._next(consume=True, peek=True)

    def next_frame(self) -> Frame | None:
        """The next frame (its tag, if any, unchecked), or None until more bytes arrive."""
        rec = self.next_record()
        return None if rec is None else rec.frame

    def next_record(self) -> Record | None:
        """The next frame and its tag, or None until more bytes arrive.

        An untagged DATA frame is handed on in pieces as its payload arrives (each a
        :class:`Data` at its own offset), so the receiver delivers bytes as soon as TCP
        does (docs/proxy.md, "Where the 1.2 s after RESUME went"). A tagged frame is
        handed on whole: its bytes count only once its tag is checked, which is why
        tagged DATA frames are at most ``MAX_DATA`` (16 KiB) and the sender starts each
        transport with smaller ones."""
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
                return Record(Data(offset, payload))
        return self._next(consume=True, peek=False)

    def _next(self, consume: bool, peek: bool) -> Record | None:
        buf = self._buf
        if len(buf) < HEADER.size:
            return None
        tbyte, length = HEADER.unpack_from(buf)
        if length > MAX_BODY:
            raise MalformedFrame(f"frame body of {length} bytes exceeds {MAX_BODY}")
        end = HEADER.size + length
        if len(buf) < end:
            return None
        flags = tbyte & (TAGGED | EARLY)
        if flags == EARLY:
            raise MalformedFrame("EARLY flag without TAGGED")
        if flags and length < TAG_LEN:
            raise MalformedFrame(f"tagged frame body of {length} bytes has no room for its tag")
        raw = bytes(buf[:end])
        if not peek:
            del buf[:end]
        ftype = tbyte & TYPE_MASK
        if not flags:
            return Record(_parse_body(ftype, memoryview(raw)[HEADER.size :]))
        mv = memoryview(raw)
        frame = _parse_body(ftype, mv[HEADER.size : end - TAG_LEN])
        return Record(frame, flags, raw[: end - TAG_LEN], raw[end - TAG_LEN :])
