"""Control-plane authentication: a MAC and a packet counter on every control frame.

Sans-I/O (docs/style.md): :meth:`Authenticator.sign` takes a packet the engine emits and
returns it with a MAC trailer; :meth:`Authenticator.verify` takes a received packet and
the sender's link-layer address and returns the packet with the trailer removed, or
:class:`Rejected` with the reason. The shell calls ``verify`` BEFORE the engine sees a
frame (so a forgery never changes state) and ``sign`` on every frame the engine sends;
the engines know nothing of it. Off unless the config has an ``auth:`` section.

The scheme is RFC 8967's (Babel MAC authentication), hop by hop:

* Every sender keeps a 32-bit packet counter (PC) that grows by one per signed packet
  and an *index* drawn at random when it starts (and again if PC would wrap), RFC 8967
  4.1. The receiver keeps, per neighbour (source MAC) and per index, the highest PC it
  accepted and a 64-packet window below it (IPsec's anti-replay window, RFC 4303
  3.4.3): a PC at or below an accepted one is a replay (RFC 8967 4.3).
* The MAC (HMAC-SHA256, 32 bytes, or keyed BLAKE2s-128, 16 bytes: RFC 8967 4.1's two
  algorithms) covers a pseudo-header (IP source, destination, protocol and, for UDP,
  the destination port) and the whole IP payload after the IP/UDP headers with the MAC
  bytes zeroed: options, counters, inner payload. A forwarder re-signs what it sends.
* Trailer body: ``key id u8 | index u32 | PC u32 | MAC``. It rides as the last AODV
  extension (type 248, RFC 3561 section 9's TLV), after a hello beacon's body in the
  same TLV form, and as DSR option 56 (RFC 4728 6.1: high bits ``00``, a node that does
  not know it skips it) with the 2-byte PadN shim of :mod:`..wire.manet_ext`, so tshark
  still decodes the frames as AODV/DSR.
* Key roll-over: at most two keys; the first signs, either verifies (by key id).

What is signed: AODV messages (UDP 654), manetkit hello beacons, and every DSR packet
with an option other than Source Route / Pad1 / PadN (RREQ, RREP, RERR, ACK, ACK
request, ELFN/ERDN/ERSN/BUS-ACK notices). NOT signed: DSR data packets whose only
option is a Source Route, and AODV-routed data (plain IPv4). Nothing is encrypted.

Neighbour state is created only for frames whose MAC verified (a forger cannot fill
it) and bounded by ``max_neighbours`` (least recently heard evicted) and
:data:`MAX_INDICES` indices per neighbour (oldest evicted). Keys are never logged or
shown (``repr=False``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from manetkit.daemon.wire import aodv, dsr, ipv4
from manetkit.daemon.wire.manet_ext import AODV_EXT_AUTH, DSR_OPT_AUTH
from manetkit.errors import UserError

Algorithm = Literal["hmac-sha256", "blake2s128"]
MAC_LEN: dict[str, int] = {"hmac-sha256": 32, "blake2s128": 16}
WINDOW = 64  # accepted PCs remembered below the highest (RFC 4303 3.4.3's default)
MAX_INDICES = 4  # indices (sender restarts) remembered per neighbour
MIN_KEY, MAX_KEY = 16, 64  # bytes; BLAKE2s keys are at most 32 (RFC 7693 2.1)
_HEAD = struct.Struct("!BII")  # key id, index, PC
_HELLO_BODY = 12  # manetkit/daemon/linksense/hello.py: MKH1 | seq | interval
_DOMAIN = b"MKA1"


# --- configuration -------------------------------------------------------------------


class KeyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int = Field(ge=0, le=255, description="key id carried in every trailer")
    algorithm: Algorithm = "hmac-sha256"
    key_file: Path = Field(description="file holding the key as hex (16-64 bytes)")


class AuthConfig(BaseModel):
    """``auth:`` section of the daemon config (docs/security.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    keys: list[KeyConfig] = Field(
        min_length=1, max_length=2, description="first signs; any verifies (roll-over)"
    )
    required: bool = Field(False, description="drop (and count) control frames without a trailer")
    max_neighbours: int = Field(1024, ge=1, le=1_000_000)

    @model_validator(mode="after")
    def _unique(self) -> AuthConfig:
        ids = [k.id for k in self.keys]
        if len(set(ids)) != len(ids):
            raise ValueError(f"keys: duplicate key id in {ids}")
        return self


@dataclass(frozen=True, slots=True)
class Key:
    id: int
    algorithm: Algorithm
    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not MIN_KEY <= len(self.secret) <= MAX_KEY:
            raise ValueError(f"key {self.id}: {len(self.secret)} bytes, need {MIN_KEY}-{MAX_KEY}")
        if self.algorithm == "blake2s128" and len(self.secret) > 32:
            raise ValueError(f"key {self.id}: blake2s128 keys are at most 32 bytes")

    @property
    def mac_len(self) -> int:
        return MAC_LEN[self.algorithm]

    def mac(self, data: bytes) -> bytes:
        if self.algorithm == "hmac-sha256":
            return hmac.digest(self.secret, data, "sha256")
        return hashlib.blake2s(data, key=self.secret, digest_size=16).digest()


def load_keys(cfg: AuthConfig) -> list[Key]:
    """Read the key files; :class:`UserError` names the field (never the key)."""
    keys = []
    for i, k in enumerate(cfg.keys):
        where = f"auth.keys[{i}].key_file"
        try:
            text = k.key_file.read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"{where}: cannot read {k.key_file}: {exc}") from None
        try:
            secret = bytes.fromhex(text)
        except ValueError:
            raise UserError(f"{where}: {k.key_file} does not hold a hex key") from None
        try:
            keys.append(Key(k.id, k.algorithm, secret))
        except ValueError as exc:
            raise UserError(f"{where}: {exc}") from None
    return keys


# --- the layer -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rejected:
    """Why a frame was dropped: unsigned, malformed, unknown-key, bad-mac, replay."""

    reason: str


class _Window:
    """Highest accepted PC of one (neighbour, index) and a bitmap of the 64 below."""

    __slots__ = ("top", "bits")

    def __init__(self) -> None:
        self.top = -1
        self.bits = 0

    def fresh(self, pc: int) -> bool:
        if pc > self.top:
            return True
        off = self.top - pc
        return off < WINDOW and not (self.bits >> off) & 1

    def accept(self, pc: int) -> None:
        if pc > self.top:
            shift = pc - self.top
            self.bits = ((self.bits << shift) | 1) & ((1 << WINDOW) - 1) if shift < WINDOW else 1
            self.top = pc
        else:
            self.bits |= 1 << (self.top - pc)


@dataclass(slots=True)
class _Trailer:
    start: int  # offset in the packet of the TLV (type byte)
    key_id: int
    index: int
    pc: int
    mac_at: int  # offset of the MAC bytes
    mac: bytes


Kind = Literal["dsr", "aodv", "hello"]


class Authenticator:
    """Signs outgoing and verifies incoming control frames (see the module docstring)."""

    def __init__(
        self,
        keys: list[Key],
        required: bool = False,
        hello_port: int = 49698,
        max_neighbours: int = 1024,
        random: Callable[[int], bytes] = os.urandom,
    ) -> None:
        if not keys:
            raise ValueError("at least one key")
        self.keys = {k.id: k for k in keys}
        self.signing = keys[0]
        self.required = required
        self.hello_port = hello_port
        self.max_neighbours = max_neighbours
        self._random = random
        self.index = int.from_bytes(random(4), "big")
        self.pc = 0
        self._windows: OrderedDict[int, _Window] = OrderedDict()
        self.counters: Counter[str] = Counter()

    @classmethod
    def from_config(cls, cfg: AuthConfig, hello_port: int) -> Authenticator:
        return cls(load_keys(cfg), cfg.required, hello_port, cfg.max_neighbours)

    # -- classification ------------------------------------------------------------------
    def kind(self, p: bytes) -> Kind | None:
        """Which signed family ``p`` belongs to; None for data (never signed)."""
        if len(p) < 20:
            return None
        ihl = (p[0] & 15) * 4
        proto = p[9]
        if proto == ipv4.PROTO_DSR:
            # Fast path: a data packet whose one option is a Source Route.
            if len(p) >= ihl + 6:
                plen = (p[ihl + 2] << 8) | p[ihl + 3]
                if p[ihl + 4] == dsr.OPT_SRCRT and p[ihl + 5] + 2 == plen:
                    return None
            return "dsr"
        if proto == ipv4.PROTO_UDP and len(p) >= ihl + 4:
            dport = (p[ihl + 2] << 8) | p[ihl + 3]
            if dport == aodv.AODV_PORT:
                return "aodv"
            if dport == self.hello_port:
                return "hello"
        return None

    # -- signing -------------------------------------------------------------------------
    def sign(self, now: float, packet: bytes) -> bytes:
        """``packet`` with a fresh trailer (any old one replaced); data unchanged."""
        kind = self.kind(packet)
        if kind is None:
            return packet
        try:
            if kind == "dsr":
                if _dsr_is_data(packet):
                    return packet
                out, mac_at = self._sign_dsr(packet)
            else:
                out, mac_at = self._sign_udp(packet, kind)
        except (ipv4.MalformedPacket, aodv.MalformedAodv, ValueError):
            self.counters["sign-malformed"] += 1
            return packet
        key = self.signing
        out[mac_at : mac_at + key.mac_len] = key.mac(_covered(out, mac_at, key.mac_len))
        self.counters["signed"] += 1
        return bytes(out)

    def _next_head(self) -> bytes:
        if self.pc >= 0xFFFFFFFF:  # RFC 8967 4.1: a new index rather than a wrap
            self.index = int.from_bytes(self._random(4), "big")
            self.pc = 0
        self.pc += 1
        key = self.signing
        return _HEAD.pack(key.id, self.index, self.pc) + bytes(key.mac_len)

    def _sign_dsr(self, packet: bytes) -> tuple[bytearray, int]:
        hdr, dh = dsr.parse(packet)
        kept = b"".join(
            _option_bytes(packet, po) for po in dh.options if not _is_auth_option(po.option)
        )
        body = self._next_head()
        opt = bytes((DSR_OPT_AUTH, len(body) + 2, 0, len(body))) + body
        options = kept + opt
        inner = bytes(packet[dh.end : hdr.total_length])
        head = bytes(packet[dh.offset : dh.offset + 2]) + struct.pack("!H", len(options))
        out = _with_payload(packet, hdr.ihl, head + options + inner)
        mac_at = hdr.ihl + 4 + len(kept) + 4 + _HEAD.size
        return out, mac_at

    def _sign_udp(self, packet: bytes, kind: Kind) -> tuple[bytearray, int]:
        hdr = ipv4.parse(packet)
        sport, dport, payload = ipv4.parse_udp(packet[hdr.ihl : hdr.total_length])
        if kind == "aodv":
            msg = aodv.parse(payload)
            msg.extensions = [e for e in msg.extensions if e[0] != AODV_EXT_AUTH]
            payload = msg.pack()
        else:
            payload = payload[:_HELLO_BODY]
        body = self._next_head()
        payload = payload + bytes((AODV_EXT_AUTH, len(body))) + body
        mac_at = ipv4.MIN_HEADER + 8 + len(payload) - self.signing.mac_len  # build(): no IP options
        out = bytearray(
            ipv4.build(
                hdr.src, hdr.dst, ipv4.PROTO_UDP,
                ipv4.udp(sport, dport, payload, hdr.src, hdr.dst),
                ttl=hdr.ttl, tos=hdr.tos, ident=hdr.ident,
                dont_fragment=bool(hdr.flags_frag & 0x4000),
            )
        )  # fmt: skip
        return out, mac_at

    # -- verifying -----------------------------------------------------------------------
    def verify(self, now: float, packet: bytes, src_mac: bytes) -> bytes | Rejected:
        """The packet without its trailer, or why it must be dropped.

        State (the replay window) changes only once the MAC verified.
        """
        kind = self.kind(packet)
        if kind is None:
            return packet
        try:
            trailer = self._find(packet, kind)
        except (ipv4.MalformedPacket, aodv.MalformedAodv):
            return self._reject("malformed") if self.required else packet
        if trailer is None:
            if kind == "dsr" and _dsr_is_data(packet):
                return packet
            if self.required:
                return self._reject("unsigned")
            self.counters["unsigned-accepted"] += 1
            return packet
        key = self.keys.get(trailer.key_id)
        if key is None:
            return self._reject("unknown-key")
        if len(trailer.mac) != key.mac_len:
            return self._reject("malformed")
        # Keyed by the sender's random index, not by src_mac: a replay sent from another
        # MAC address must meet the same window (found by the lab replay test).
        window = self._windows.get(trailer.index)
        if window is not None and not window.fresh(trailer.pc):
            return self._reject("replay")
        expect = key.mac(_covered(bytearray(packet), trailer.mac_at, key.mac_len))
        if not hmac.compare_digest(expect, trailer.mac):
            return self._reject("bad-mac")
        if window is None:
            window = self._window(trailer.index)
        self._windows.move_to_end(trailer.index)
        window.accept(trailer.pc)
        self.counters["verified"] += 1
        return _strip(packet, kind, trailer.start)

    def _reject(self, reason: str) -> Rejected:
        self.counters[f"rejected-{reason}"] += 1
        return Rejected(reason)

    def _window(self, index: int) -> _Window:
        windows = self._windows
        if len(windows) >= self.max_neighbours * MAX_INDICES:
            windows.popitem(last=False)  # least recently verified sender index
            self.counters["neighbour-evicted"] += 1
        w = windows[index] = _Window()
        return w

    def _find(self, packet: bytes, kind: Kind) -> _Trailer | None:
        if kind == "dsr":
            _hdr, dh = dsr.parse(packet)
            found = [po for po in dh.options if _is_auth_option(po.option)]
            if not found:
                return None
            if len(found) > 1:
                raise ipv4.MalformedPacket("more than one authentication option")
            po = found[0]
            data = po.option.data  # type: ignore[union-attr]
            if len(data) < 2 + _HEAD.size or data[0] != 0 or data[1] != len(data) - 2:
                raise ipv4.MalformedPacket("authentication option without its shim")
            return _trailer(po.offset, po.offset + 4, data[2:])
        hdr = ipv4.parse(packet)
        _s, _d, payload = ipv4.parse_udp(packet[hdr.ihl : hdr.total_length])
        base = hdr.ihl + 8
        if kind == "aodv":
            msg = aodv.parse(payload)
            exts = msg.extensions
            if not exts or exts[-1][0] != AODV_EXT_AUTH:
                if any(t == AODV_EXT_AUTH for t, _ in exts):
                    raise aodv.MalformedAodv("authentication extension is not the last")
                return None
            data = exts[-1][1]
            start = base + len(payload) - 2 - len(data)
        else:
            if len(payload) <= _HELLO_BODY:
                return None
            tail = payload[_HELLO_BODY:]
            if tail[0] != AODV_EXT_AUTH or len(tail) < 2 or tail[1] != len(tail) - 2:
                raise ipv4.MalformedPacket("hello beacon with a malformed trailer")
            data = tail[2:]
            start = base + _HELLO_BODY
        return _trailer(start, start + 2, data)


def _trailer(start: int, body_at: int, body: bytes) -> _Trailer:
    if len(body) < _HEAD.size:
        raise ipv4.MalformedPacket(f"authentication trailer of {len(body)} bytes")
    key_id, index, pc = _HEAD.unpack_from(body)
    return _Trailer(start, key_id, index, pc, body_at + _HEAD.size, bytes(body[_HEAD.size :]))


def _is_auth_option(opt: dsr.Option) -> bool:
    return isinstance(opt, dsr.UnknownOption) and opt.type == DSR_OPT_AUTH


def _dsr_is_data(packet: bytes) -> bool:
    """A DSR packet carrying only Source Route / padding options (never signed)."""
    _hdr, dh = dsr.parse(packet)
    return all(
        isinstance(po.option, dsr.SourceRoute | dsr.Pad1 | dsr.PadN) or _is_auth_option(po.option)
        for po in dh.options
    )


def _option_bytes(packet: bytes, po: dsr.ParsedOption) -> bytes:
    if isinstance(po.option, dsr.Pad1):
        return bytes(packet[po.offset : po.offset + 1])
    return bytes(packet[po.offset : po.offset + 2 + packet[po.offset + 1]])


def _covered(packet: bytearray, mac_at: int, mac_len: int) -> bytes:
    """What the MAC covers: pseudo-header + IP payload (after UDP's header), MAC zeroed."""
    ihl = (packet[0] & 15) * 4
    total = (packet[2] << 8) | packet[3]
    proto = packet[9]
    if proto == ipv4.PROTO_UDP:
        pseudo = bytes(packet[12:20]) + bytes((proto,)) + bytes(packet[ihl + 2 : ihl + 4])
        start = ihl + 8
    else:
        pseudo = bytes(packet[12:20]) + bytes((proto,))
        start = ihl
    return b"".join(
        (
            _DOMAIN,
            pseudo,
            bytes(packet[start:mac_at]),
            bytes(mac_len),
            bytes(packet[mac_at + mac_len : total]),
        )
    )


def _with_payload(packet: bytes, ihl: int, payload: bytes) -> bytearray:
    head = bytearray(packet[:ihl])
    struct.pack_into("!H", head, 2, ihl + len(payload))
    head[10:12] = b"\0\0"
    struct.pack_into("!H", head, 10, ipv4.checksum(head))
    return head + payload


def _strip(packet: bytes, kind: Kind, start: int) -> bytes:
    """``packet`` without the trailer at ``start`` (what the engine would have sent)."""
    hdr = ipv4.parse(packet)
    if kind == "dsr":
        olen = 2 + packet[start + 1]
        off = hdr.ihl
        plen = ((packet[off + 2] << 8) | packet[off + 3]) - olen
        dsr_part = (
            bytes(packet[off : off + 2])
            + struct.pack("!H", plen)
            + bytes(packet[off + 4 : start])
            + bytes(packet[start + olen : hdr.total_length])
        )
        return bytes(_with_payload(packet, hdr.ihl, dsr_part))
    sport, dport, payload = ipv4.parse_udp(packet[hdr.ihl : hdr.total_length])
    payload = payload[: start - hdr.ihl - 8]
    return ipv4.build(
        hdr.src, hdr.dst, ipv4.PROTO_UDP, ipv4.udp(sport, dport, payload, hdr.src, hdr.dst),
        ttl=hdr.ttl, tos=hdr.tos, ident=hdr.ident, dont_fragment=bool(hdr.flags_frag & 0x4000),
    )  # fmt: skip
