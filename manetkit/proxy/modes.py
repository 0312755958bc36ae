"""Per-destination modes: the mesh leg's socket knobs and the kernel's view of it.

* ``plain``: not intercepted at all (nft returns before the redirect).
* ``fixed-rto`` (Reno-F, Dyer & Boppana section II): the kernel keeps retransmitting at
  a capped RTO (TCP_RTO_MAX_MS, Linux 6.15+, >= 1000 ms) so retransmissions keep probing
  the route; always paired with TCP_USER_TIMEOUT >= the partition timeout, otherwise the
  kernel gives up after ~15 retries at the cap. TCP_THIN_LINEAR_TIMEOUTS only with
  reno/cubic (the config refuses it otherwise: it never fires under BBR).
* ``elfn`` and ``bus``: plain sockets here; their freeze / probe / thaw decisions are the
  sans-I/O :mod:`manetkit.proxy.policy` (Holland & Vaidya section 6; Kim, Toh & Choi
  section IV), fed with :func:`tcp_info` (has the kernel connection backed off?) and the
  daemon's typed events (:mod:`manetkit.events`).

Sans-I/O, like the other cores: the knobs are plain values (:class:`SockOpt`) and the
kernel's ``struct tcp_info`` is parsed from bytes; :mod:`manetkit.proxy.sockets` is the
shell that calls setsockopt/getsockopt.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from manetkit.proxy.config import ProxyConfig

# include/uapi/linux/in.h and include/uapi/linux/tcp.h (no socket import: a core does no I/O)
IPPROTO_TCP = 6
TCP_NODELAY = 1
TCP_INFO = 11
TCP_CONGESTION = 13
TCP_THIN_LINEAR_TIMEOUTS = 16
TCP_USER_TIMEOUT = 18
TCP_LINGER2 = 8
TCP_RTO_MAX_MS = 44  # Linux 6.15+
FIN_WAIT2_S = 5  # orphaned FIN_WAIT2 lifetime: no pile-up from peers that never close

TCP_INFO_STRUCT = struct.Struct("=8B24I")


@dataclass(frozen=True, slots=True)
class SockOpt:
    """One setsockopt(2) call: level, option name and an int or bytes value."""

    level: int
    name: int
    value: int | bytes


@dataclass(frozen=True, slots=True)
class TcpInfo:
    state: int
    retransmits: int
    backoff: int
    rto_ms: float
    unacked: int
    rtt_ms: float
    cwnd: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "rto_ms": self.rto_ms,
            "backoff": self.backoff,
            "unacked": self.unacked,
            "retransmits": self.retransmits,
            "rtt_ms": self.rtt_ms,
            "cwnd": self.cwnd,
        }


def parse_tcp_info(raw: bytes) -> TcpInfo | None:
    """The kernel's view of a connection (struct tcp_info, include/uapi/linux/tcp.h), or
    None when ``raw`` is shorter than the fields read here."""
    if len(raw) < TCP_INFO_STRUCT.size:
        return None
    v = TCP_INFO_STRUCT.unpack_from(raw)
    u8, u32 = v[:8], v[8:]
    # u32 fields: rto, ato, snd_mss, rcv_mss, unacked, sacked, lost, retrans, fackets,
    # last_data_sent, last_ack_sent, last_data_recv, last_ack_recv, pmtu, rcv_ssthresh,
    # rtt, rttvar, snd_ssthresh, snd_cwnd, ...
    return TcpInfo(
        state=u8[0],
        retransmits=u8[2],
        backoff=u8[4],
        rto_ms=u32[0] / 1000,
        unacked=u32[4],
        rtt_ms=u32[15] / 1000,
        cwnd=u32[18],
    )


def fin_wait2_options() -> list[SockOpt]:
    """Every proxy TCP socket: orphaned FIN_WAIT2 sockets never pile up."""
    return [SockOpt(IPPROTO_TCP, TCP_LINGER2, FIN_WAIT2_S)]


def leg_options(mode: str, cfg: ProxyConfig) -> list[SockOpt]:
    """Socket knobs of a mesh-leg connection (set before connect, or on an accepted leg:
    every mode's leg is TCP_NODELAY, with a user timeout of ``partition_timeout``)."""
    opts = [SockOpt(IPPROTO_TCP, TCP_NODELAY, 1), *fin_wait2_options()]
    if cfg.congestion_control:
        opts.append(SockOpt(IPPROTO_TCP, TCP_CONGESTION, cfg.congestion_control.encode()))
    # Every mode: a transport that cannot deliver for the partition timeout is dead.
    opts.append(SockOpt(IPPROTO_TCP, TCP_USER_TIMEOUT, int(cfg.partition_timeout * 1000)))
    if mode == "fixed-rto":
        opts.append(SockOpt(IPPROTO_TCP, TCP_RTO_MAX_MS, cfg.rto_max_ms))
        if cfg.thin_linear_timeouts:
            opts.append(SockOpt(IPPROTO_TCP, TCP_THIN_LINEAR_TIMEOUTS, 1))
    return opts


def backed_off(info: TcpInfo | None) -> bool:
    """The kernel is waiting out a (doubled) RTO: replacing the connection is faster."""
    return info is not None and (info.backoff > 0 or info.retransmits > 0)
