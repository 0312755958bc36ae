"""Datagrams between a node's radio and the medium.

One datagram = one message: a 1-byte type, then the fields below (network byte order).
The transport is a datagram socket: AF_UNIX/SOCK_DGRAM for namespace labs (the path is
reachable from every namespace) or UDP for docker labs (``HOST:PORT``, see
:func:`udp_address`). The medium learns a radio's reply address from its ATTACH and
knows the sender of every later datagram by it.

radio -> medium
  ATTACH    u8 type | u16 node_id                      register (or re-register) a radio
  TX        u8 type | ethernet frame                   frame the node puts on the air
  DETACH    u8 type                                    radio leaves (medium drops its queue)
  OVERHEAR  u8 type | u8 on                            on=1: also DELIVER other nodes' unicasts
            this node can hear (its radio0 went promiscuous); on=0: stop. Reset to 0 by
            every ATTACH. The medium ignores it when the scenario has radio.overhear false.

medium -> radio
  ATTACHED  u8 type | u16 node_id | 6s mac             reply to ATTACH: the radio's MAC
  DELIVER   u8 type | i16 rssi_centidbm | frame        a frame received over the air
            (an overheard unicast is a DELIVER whose destination MAC is another node's)
  TXSTATUS  u8 type | 6s dst_mac | u8 retries | u8 ok | frame
            unicast outcome, sent when retries > 0 or ok == 0 (the 802.11 MAC's tx status:
            a failure after the retry limit is the tx-failure notice). ``frame`` is the
            failed frame (empty when ok == 1) so routing can salvage it.
  REFUSED   u8 type | utf-8 reason                     ATTACH refused (unknown node id...)
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

ATTACH = 0x01
TX = 0x02
DETACH = 0x03
OVERHEAR = 0x04
ATTACHED = 0x81
DELIVER = 0x82
TXSTATUS = 0x83
REFUSED = 0x84

BROADCAST_MAC = b"\xff" * 6
# Locally administered OUI-like prefix "02:6d:6b" ("mk"); the last 3 bytes are the node id.
MAC_PREFIX = b"\x02\x6d\x6b"

_U16 = struct.Struct("!H")
_I16 = struct.Struct("!h")
_TXSTATUS = struct.Struct("!6sBB")


class ProtocolError(ValueError):
    """A datagram that does not parse; the receiver counts and drops it."""


def node_mac(node_id: int) -> bytes:
    """MAC address of node ``n<node_id>``'s radio0 (stable, so captures are readable)."""
    if not 1 <= node_id <= 0xFFFFFF:
        raise ValueError(f"node id {node_id} out of range")
    return MAC_PREFIX + node_id.to_bytes(3, "big")


def mac_node(mac: bytes) -> int | None:
    """Inverse of :func:`node_mac`; None for a MAC that is not a lab radio's."""
    if len(mac) != 6 or mac[:3] != MAC_PREFIX:
        return None
    return int.from_bytes(mac[3:], "big")


def udp_address(text: str, passive: bool = False) -> tuple[int, tuple]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6; HOST may be a name, e.g. a docker service)
    to ``(address family, sockaddr)`` for the UDP transport. ValueError if malformed or
    unresolvable. ``passive``: for bind (an empty HOST then means every address)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r}: expected HOST:PORT, e.g. 127.0.0.1:7700")
    host = host.removeprefix("[").removesuffix("]")
    if not host and not passive:
        raise ValueError(f"{text!r}: no host")
    try:
        infos = socket.getaddrinfo(
            host or None,
            int(port),
            type=socket.SOCK_DGRAM,
            flags=socket.AI_PASSIVE if passive else 0,
        )
    except socket.gaierror as exc:
        raise ValueError(f"{text!r}: cannot resolve {host!r}: {exc.strerror}") from None
    family, _, _, _, sockaddr = infos[0]
    return family, sockaddr


# --- radio -> medium -------------------------------------------------------------


def attach(node_id: int) -> bytes:
    return bytes([ATTACH]) + _U16.pack(node_id)


def tx(frame: bytes) -> bytes:
    return bytes([TX]) + frame


def detach() -> bytes:
    return bytes([DETACH])


def overhear(on: bool) -> bytes:
    return bytes([OVERHEAR, 1 if on else 0])


# --- medium -> radio -------------------------------------------------------------


def attached(node_id: int) -> bytes:
    return bytes([ATTACHED]) + _U16.pack(node_id) + node_mac(node_id)


def deliver(rssi_dbm: float, frame: bytes) -> bytes:
    centi = max(-32768, min(32767, round(rssi_dbm * 100)))
    return bytes([DELIVER]) + _I16.pack(centi) + frame


def txstatus(dst_mac: bytes, retries: int, ok: bool, frame: bytes = b"") -> bytes:
    return (
        bytes([TXSTATUS])
        + _TXSTATUS.pack(dst_mac, retries, 1 if ok else 0)
        + (b"" if ok else frame)
    )


def refused(reason: str) -> bytes:
    return bytes([REFUSED]) + reason.encode()


# --- parsing (either direction) --------------------------------------------------


@dataclass(frozen=True, slots=True)
class Attach:
    node_id: int


@dataclass(frozen=True, slots=True)
class Tx:
    frame: bytes


@dataclass(frozen=True, slots=True)
class Detach:
    pass


@dataclass(frozen=True, slots=True)
class Overhear:
    on: bool


@dataclass(frozen=True, slots=True)
class Attached:
    node_id: int
    mac: bytes


@dataclass(frozen=True, slots=True)
class Deliver:
    rssi_dbm: float
    frame: bytes


@dataclass(frozen=True, slots=True)
class TxStatus:
    dst_mac: bytes
    retries: int
    ok: bool
    frame: bytes


@dataclass(frozen=True, slots=True)
class Refused:
    reason: str


Message = Attach | Tx | Detach | Overhear | Attached | Deliver | TxStatus | Refused

MIN_FRAME = 14  # an Ethernet header


def parse(data: bytes) -> Message:
    """Parse one datagram. Raises :class:`ProtocolError` on anything malformed.

    Hot paths (TX in the medium, DELIVER in the radio) may test ``data[0]`` and slice
    directly instead of calling this; this function is the reference.
    """
    if not data:
        raise ProtocolError("empty datagram")
    kind = data[0]
    body = data[1:]
    if kind == TX:
        if len(body) < MIN_FRAME:
            raise ProtocolError(f"TX frame of {len(body)} bytes is shorter than an Ethernet header")
        return Tx(bytes(body))
    if kind == DELIVER:
        if len(body) < 2 + MIN_FRAME:
            raise ProtocolError("DELIVER too short")
        return Deliver(_I16.unpack_from(body)[0] / 100.0, bytes(body[2:]))
    if kind == ATTACH:
        if len(body) != 2:
            raise ProtocolError("ATTACH must carry exactly a u16 node id")
        return Attach(_U16.unpack(body)[0])
    if kind == DETACH:
        return Detach()
    if kind == OVERHEAR:
        if len(body) != 1 or body[0] > 1:
            raise ProtocolError("OVERHEAR must carry exactly one byte, 0 or 1")
        return Overhear(bool(body[0]))
    if kind == ATTACHED:
        if len(body) != 8:
            raise ProtocolError("ATTACHED must carry a node id and a MAC")
        return Attached(_U16.unpack_from(body)[0], bytes(body[2:8]))
    if kind == TXSTATUS:
        if len(body) < _TXSTATUS.size:
            raise ProtocolError("TXSTATUS too short")
        mac, retries, ok = _TXSTATUS.unpack_from(body)
        return TxStatus(mac, retries, bool(ok), bytes(body[_TXSTATUS.size :]))
    if kind == REFUSED:
        return Refused(body.decode(errors="replace"))
    raise ProtocolError(f"unknown message type 0x{kind:02x}")
