"""Control-plane authentication: a MAC and a packet counter on every control frame.

Sans-I/O (docs/style.md): :meth:`Authenticator.sign` takes a packet the engine emits and
the transmitter's MAC address and returns the packet with a MAC trailer;
:meth:`Authenticator.verify` takes a received packet and the transmitter's MAC address
and returns the packet with the trailer removed, :class:`Rejected` with the reason, or
:data:`HANDLED` for the layer's own challenge messages. Challenges to send come out of
:meth:`Authenticator.next_event`. The shell calls ``verify`` BEFORE the engine sees a
frame (so a forgery never changes state) and ``sign`` on every frame it sends; the
engines know nothing of it. Off unless the config has an ``auth:`` section.

The scheme is RFC 8967's (Babel MAC authentication), hop by hop:

* Every sender keeps a 32-bit packet counter (PC) that grows by one per signed packet
  and an *index* drawn at random when it starts (and again if PC would wrap), RFC 8967
  4.1. The receiver keeps, per neighbour (the transmitter's MAC address), the index it
  accepted, the highest PC and a 64-packet window below it (IPsec's anti-replay window,
  RFC 4303 3.4.3): a PC already accepted, or below the window, is a replay (RFC 8967
  4.3).
* An index the receiver does not hold for that neighbour (the neighbour is new, it
  restarted, or the receiver restarted and lost its state) is not trusted: the frame is
  dropped and the receiver sends the neighbour a *challenge request* with a random
  nonce; the neighbour answers with a *challenge reply* echoing it, signed with its
  current index and PC, which the receiver then adopts (RFC 8967 4.3). Frames recorded
  from an earlier run, or from the current run before a receiver restart, are
  therefore never accepted. Requests go at most once per ``CHALLENGE_INTERVAL`` per
  neighbour and a nonce is good for ``CHALLENGE_LIFETIME`` (babeld's 300 ms and 30 s).
* The MAC (HMAC-SHA256, 32 bytes, or keyed BLAKE2s-128, 16 bytes: RFC 8967 4.1's two
  algorithms) covers the transmitter's MAC address, a pseudo-header (IP source,
  destination, protocol and, for UDP, the destination port) and the whole IP payload
  after the IP/UDP headers with the MAC bytes zeroed: options, counters, inner payload.
  Every frame is signed by the node that transmits it (a forwarder verifies, strips and
  re-signs), so every signed frame is a one-hop message and is bound to the radio that
  sent it, as RFC 8967 4.1 binds a Babel packet to its link-local source: relayed from
  another radio, a hello, RREQ or RREP-ACK no longer verifies.
* Trailer body: ``key id u8 | index u32 | PC u32 | MAC``. It rides as the last AODV
  extension (type 248, RFC 3561 section 9's TLV), after a hello beacon's body in the
  same TLV form, and as DSR option 56 (RFC 4728 6.1: high bits ``00``, a node that does
  not know it skips it) with the 2-byte PadN shim of :mod:`..wire.manet_ext`, so tshark
  still decodes the frames as AODV/DSR.
* Challenges ride like a hello beacon (UDP to the beacon port, IP destination
  255.255.255.255, TTL 1) but unicast to the challenged MAC, with a 12-byte body
  ``"MKCQ" | nonce`` (request) or ``"MKCR" | nonce`` (reply) and the trailer.
* Key roll-over: at most two keys; the first signs, either verifies (by key id).

What is signed: AODV messages (UDP 654), manetkit hello beacons, challenges, and every
DSR packet with an option other than Source Route / Pad1 / PadN (RREQ, RREP, RERR, ACK,
ACK request, ELFN/ERDN/ERSN/BUS-ACK notices). NOT signed: DSR data packets whose only
option is a Source Route, and AODV-routed data (plain IPv4); with ``required`` the
engines learn nothing from them (docs/security.md). Nothing is encrypted.

Neighbour state is created only for frames whose MAC verified (a forger cannot fill
it) and bounded by ``max_neighbours`` (least recently verified evicted). Keys are never
logged or shown (``repr=False``); key files must be readable by their owner only
(:mod:`manetkit.keyfile`).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from manetkit.daemon.wire import aodv, dsr, ipv4
from manetkit.daemon.wire.manet_ext import AODV_EXT_AUTH, DSR_OPT_AUTH
from manetkit.errors import UserError
from manetkit.keyfile import read_hex_key

Algorithm = Literal["hmac-sha256", "blake2s128"]
MAC_LEN: dict[str, int] = {"hmac-sha256": 32, "blake2s128": 16}
WINDOW = 64  # accepted PCs remembered below the highest (RFC 4303 3.4.3's default)
MIN_KEY, MAX_KEY = 16, 64  # bytes; BLAKE2s keys are at most 32 (RFC 7693 2.1)
CHALLENGE_INTERVAL = 0.3  # s between challenge requests (or replies) to one neighbour
CHALLENGE_LIFETIME = 30.0  # s a challenge's nonce waits for its reply (babeld's values)
NONCE_LEN = 8
_HEAD = struct.Struct("!BII")  # key id, index, PC
_HELLO_BODY = 12  # manetkit/daemon/linksense/hello.py: MKH1 | seq | interval
_CHALLENGE_REQUEST, _CHALLENGE_REPLY = b"MKCQ", b"MKCR"  # + nonce: 12 bytes too
_DOMAIN = b"MKA2"  # MKA1 did not bind the transmitter's MAC address
_LIMITED_BROADCAST = IPv4Address("255.255.255.255")
_UNSPECIFIED = IPv4Address("0.0.0.0")
_UDP, _DSR, _SRCRT, _AODV_PORT = ipv4.PROTO_UDP, ipv4.PROTO_DSR, dsr.OPT_SRCRT, aodv.AODV_PORT


# --- configuration -------------------------------------------------------------------


class KeyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int = Field(ge=0, le=255, description="key id carried in every trailer")
    algorithm: Algorithm = "hmac-sha256"
    key_file: Path = Field(
        description="file holding the key as hex (16-64 bytes), mode 0600, owned by root or us"
    )


class AuthConfig(BaseModel):
    """``auth:`` section of the daemon config (docs/security.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    keys: list[KeyConfig] = Field(
        min_length=1, max_length=2, description="first signs; any verifies (roll-over)"
    )
    required: bool = Field(
        True,
        description="drop (and count) control frames without a trailer, and learn nothing "
        "from unsigned data; false only while a mesh turns authentication on node by node",
    )
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
    """Read the key files (mode 0600, owned by root or us: :mod:`manetkit.keyfile`);
    :class:`UserError` names the field (never the key)."""
    keys = []
    for i, k in enumerate(cfg.keys):
        where = f"auth.keys[{i}].key_file"
        secret = read_hex_key(k.key_file, where, MIN_KEY, MAX_KEY)
        try:
            keys.append(Key(k.id, k.algorithm, secret))
        except ValueError as exc:
            raise UserError(f"{where}: {exc}") from None
    return keys


# --- the layer -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rejected:
    """Why a frame was dropped: unsigned, malformed, unknown-key, bad-mac, replay,
    new-index (a challenge is under way), stale-challenge."""

    reason: str


@dataclass(frozen=True, slots=True)
class Handled:
    """A challenge request or reply: consumed by the authentication layer."""


HANDLED = Handled()


@dataclass(frozen=True, slots=True)
class SendChallenge:
    """Send ``packet`` (unsigned: the shell signs every frame it sends) to ``mac``."""

    mac: bytes
    packet: bytes


class _Window:
    """Highest accepted PC of one neighbour's index and a bitmap of the 64 below."""

    __slots__ = ("top", "bits")

    def __init__(self, top: int = -1, bits: int = 0) -> None:
        self.top = top
        self.bits = bits

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


class _Peer:
    """What the receiver holds about one neighbour (RFC 8967 3.2's neighbour table)."""

    __slots__ = ("index", "window", "nonce", "nonce_until", "next_request", "next_reply")

    def __init__(self) -> None:
        self.index: int | None = None  # None: no index accepted yet
        self.window = _Window()
        self.nonce: bytes | None = None  # our challenge, waiting for its reply
        self.nonce_until = 0.0
        self.next_request = 0.0  # challenge requests to it are rate-limited ...
        self.next_reply = 0.0  # ... and so are replies to requests from an unknown index


@dataclass(slots=True)
class _Trailer:
    start: int  # offset in the packet of the TLV (type byte)
    key_id: int
    index: int
    pc: int
    mac_at: int  # offset of the MAC bytes
    mac: bytes


Kind = Literal["dsr", "aodv", "hello"]
Verdict = bytes | Rejected | Handled


class Authenticator:
    """Signs outgoing and verifies incoming control frames (see the module docstring)."""

    def __init__(
        self,
        keys: list[Key],
        required: bool = True,
        hello_port: int = 49698,
        max_neighbours: int = 1024,
        random: Callable[[int], bytes] = os.urandom,
        address: IPv4Address = _UNSPECIFIED,
    ) -> None:
        if not keys:
            raise ValueError("at least one key")
        self.keys = {k.id: k for k in keys}
        self.signing = keys[0]
        self.required = required
        self.hello_port = hello_port
        self.max_neighbours = max_neighbours
        self.address = address  # the IP source of the challenges this node sends
        self._random = random
        self.index = int.from_bytes(random(4), "big")
        self.pc = 0
        self._peers: OrderedDict[bytes, _Peer] = OrderedDict()
        self._out: deque[SendChallenge] = deque()
        self.counters: Counter[str] = Counter()

    @classmethod
    def from_config(
        cls, cfg: AuthConfig, hello_port: int, address: IPv4Address = _UNSPECIFIED
    ) -> Authenticator:
        return cls(load_keys(cfg), cfg.required, hello_port, cfg.max_neighbours, address=address)

    def __len__(self) -> int:
        """Neighbours held (bounded by ``max_neighbours``)."""
        return len(self._peers)

    # -- outputs -------------------------------------------------------------------------
    def next_event(self) -> SendChallenge | None:
        """The next challenge request or reply to send, None when there is none."""
        return self._out.popleft() if self._out else None

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
    def sign(self, now: float, packet: bytes, mac: bytes) -> bytes:
        """``packet`` with a fresh trailer (any old one replaced), to be transmitted from
        the radio whose address is ``mac``; data unchanged (the shell's :func:`is_data`
        keeps the data plane from calling this at all)."""
        kind = self.kind(packet)
        if kind is None:
            return packet
        try:
            if kind == "dsr":
                if _dsris_data(packet):
                    return packet
                out, mac_at = self._sign_dsr(packet)
            else:
                out, mac_at = self._sign_udp(packet, kind)
        except (ipv4.MalformedPacket, aodv.MalformedAodv, ValueError):
            self.counters["sign-malformed"] += 1
            return packet
        key = self.signing
        out[mac_at : mac_at + key.mac_len] = key.mac(_covered(out, mac_at, key.mac_len, mac))
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
    def verify(self, now: float, packet: bytes, src_mac: bytes) -> Verdict:
        """The packet without its trailer, why it must be dropped, or :data:`HANDLED`
        (a challenge message). ``src_mac``: the transmitter's MAC address.

        RFC 8967 4.3's order: MAC first (so nothing changes for a forgery), then a
        challenge reply adopts the neighbour's index, a challenge request is answered,
        and any other frame must carry the neighbour's accepted index and a fresh PC.
        """
        kind = self.kind(packet)
        if kind is None:
            return packet
        try:
            trailer = self._find(packet, kind)
        except (ipv4.MalformedPacket, aodv.MalformedAodv):
            return self._reject("malformed")  # a trailer, or a message, that does not parse
        if trailer is None:
            if kind == "dsr" and _dsris_data(packet):
                return packet
            if self.required or (kind == "hello" and _challenge(packet) is not None):
                return self._reject("unsigned")
            self.counters["unsigned-accepted"] += 1
            return packet
        key = self.keys.get(trailer.key_id)
        if key is None:
            return self._reject("unknown-key")
        if len(trailer.mac) != key.mac_len:
            return self._reject("malformed")
        peer = self._peers.get(src_mac)
        known = peer is not None and peer.index == trailer.index
        if known and not peer.window.fresh(trailer.pc):  # type: ignore[union-attr]
            return self._reject("replay")  # before the MAC: a replay flood costs no hash
        expect = key.mac(_covered(bytearray(packet), trailer.mac_at, key.mac_len, src_mac))
        if not hmac.compare_digest(expect, trailer.mac):
            return self._reject("bad-mac")
        if peer is None:
            peer = self._peer(src_mac)
        else:
            self._peers.move_to_end(src_mac)
        challenge = _challenge(packet) if kind == "hello" else None
        if challenge is not None and challenge[0] == _CHALLENGE_REPLY:
            return self._replied(now, peer, trailer, challenge[1], known)
        if not known:
            # RFC 8967 4.3: an index we do not hold is not trusted until it answers.
            self._request(now, src_mac, peer)
            if challenge is not None and now >= peer.next_reply:
                peer.next_reply = now + CHALLENGE_INTERVAL
                self._reply(src_mac, challenge[1])
            return self._reject("new-index") if challenge is None else HANDLED
        peer.window.accept(trailer.pc)
        if challenge is not None:
            self._reply(src_mac, challenge[1])  # a fresh request from a known index
            return HANDLED
        self.counters["verified"] += 1
        return _strip(packet, kind, trailer.start)

    def _replied(
        self, now: float, peer: _Peer, trailer: _Trailer, nonce: bytes, known: bool
    ) -> Verdict:
        """A challenge reply: the nonce we sent, in time, makes its index the one."""
        if (
            peer.nonce is None
            or now > peer.nonce_until
            or not hmac.compare_digest(nonce, peer.nonce)
        ):
            return self._reject("stale-challenge")
        peer.nonce = None
        if known:
            peer.window.accept(trailer.pc)
        else:
            # Every PC up to the reply's is spent: a frame recorded before it is old.
            peer.index = trailer.index
            peer.window = _Window(trailer.pc, (1 << WINDOW) - 1)
        self.counters["challenge-succeeded"] += 1
        return HANDLED

    def _request(self, now: float, mac: bytes, peer: _Peer) -> None:
        if now < peer.next_request:
            self.counters["challenge-ratelimited"] += 1
            return
        peer.next_request = now + CHALLENGE_INTERVAL
        peer.nonce = self._random(NONCE_LEN)
        peer.nonce_until = now + CHALLENGE_LIFETIME
        self.counters["challenge-requests"] += 1
        self._out.append(SendChallenge(mac, self._challenge_packet(_CHALLENGE_REQUEST, peer.nonce)))

    def _reply(self, mac: bytes, nonce: bytes) -> None:
        self.counters["challenge-replies"] += 1
        self._out.append(SendChallenge(mac, self._challenge_packet(_CHALLENGE_REPLY, nonce)))

    def _challenge_packet(self, magic: bytes, nonce: bytes) -> bytes:
        port = self.hello_port
        seg = ipv4.udp(port, port, magic + nonce, self.address, _LIMITED_BROADCAST)
        return ipv4.build(
            self.address, _LIMITED_BROADCAST, ipv4.PROTO_UDP, seg, ttl=1,
            tos=ipv4.TOS_NETWORK_CONTROL,
        )  # fmt: skip

    def _reject(self, reason: str) -> Rejected:
        self.counters[f"rejected-{reason}"] += 1
        return Rejected(reason)

    def _peer(self, mac: bytes) -> _Peer:
        peers = self._peers
        if len(peers) >= self.max_neighbours:
            peers.popitem(last=False)  # least recently verified neighbour
            self.counters["neighbour-evicted"] += 1
        p = peers[mac] = _Peer()
        return p

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


def is_data(p: bytes, hello_port: int) -> bool:
    """Surely data, never signed: neither DSR nor UDP (TCP, ICMP, ...), a DSR packet
    whose one option is a Source Route, UDP to another port than AODV's and the
    beacons'. The per-packet test of the data plane (:meth:`Authenticator.kind`'s
    first cases, with no call and no parsing)."""
    n = len(p)
    if n < 20:
        return True
    proto = p[9]
    ihl = (p[0] & 15) * 4
    if proto == _UDP:
        if n < ihl + 4:
            return False
        dport = (p[ihl + 2] << 8) | p[ihl + 3]
        return dport != _AODV_PORT and dport != hello_port
    if proto != _DSR:
        return True
    return (
        n >= ihl + 6 and p[ihl + 4] == _SRCRT and p[ihl + 5] + 2 == ((p[ihl + 2] << 8) | p[ihl + 3])
    )


def _challenge(packet: bytes) -> tuple[bytes, bytes] | None:
    """(magic, nonce) of a challenge request or reply (a beacon-port packet), else None."""
    at = (packet[0] & 15) * 4 + 8
    magic = bytes(packet[at : at + 4])
    if magic != _CHALLENGE_REQUEST and magic != _CHALLENGE_REPLY:
        return None
    nonce = bytes(packet[at + 4 : at + _HELLO_BODY])
    return (magic, nonce) if len(nonce) == NONCE_LEN else None


def _trailer(start: int, body_at: int, body: bytes) -> _Trailer:
    if len(body) < _HEAD.size:
        raise ipv4.MalformedPacket(f"authentication trailer of {len(body)} bytes")
    key_id, index, pc = _HEAD.unpack_from(body)
    return _Trailer(start, key_id, index, pc, body_at + _HEAD.size, bytes(body[_HEAD.size :]))


def _is_auth_option(opt: dsr.Option) -> bool:
    return isinstance(opt, dsr.UnknownOption) and opt.type == DSR_OPT_AUTH


def _dsris_data(packet: bytes) -> bool:
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


def _covered(packet: bytearray, mac_at: int, mac_len: int, tx_mac: bytes) -> bytes:
    """What the MAC covers: the transmitter's MAC address, a pseudo-header and the IP
    payload (after UDP's header), the MAC bytes zeroed."""
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
            bytes(tx_mac),
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
