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
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Any

from manetkit.proxy.config import ProxyConfig

TCP_RTO_MAX_MS = 44  # include/uapi/linux/tcp.h, Linux 6.15+
TCP_USER_TIMEOUT = 18
TCP_THIN_LINEAR_TIMEOUTS = 16
TCP_LINGER2 = 8
TCP_CONGESTION = 13
FIN_WAIT2_S = 5  # orphaned FIN_WAIT2 lifetime: no pile-up from peers that never close

_TCP_INFO = struct.Struct("=8B24I")


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


def tcp_info(sock: socket.socket) -> TcpInfo | None:
    """The kernel's view of a connection (struct tcp_info, include/uapi/linux/tcp.h)."""
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO.size)
    except OSError:
        return None
    if len(raw) < _TCP_INFO.size:
        return None
    v = _TCP_INFO.unpack(raw)
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


def apply_leg_options(sock: socket.socket, mode: str, cfg: ProxyConfig) -> None:
    """Socket knobs of a mesh-leg connection (before connect)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.IPPROTO_TCP, TCP_LINGER2, FIN_WAIT2_S)
    if cfg.congestion_control:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cfg.congestion_control.encode())
    # Every mode: a transport that cannot deliver for the partition timeout is dead.
    sock.setsockopt(socket.IPPROTO_TCP, TCP_USER_TIMEOUT, int(cfg.partition_timeout * 1000))
    if mode == "fixed-rto":
        sock.setsockopt(socket.IPPROTO_TCP, TCP_RTO_MAX_MS, cfg.rto_max_ms)
        if cfg.thin_linear_timeouts:
            sock.setsockopt(socket.IPPROTO_TCP, TCP_THIN_LINEAR_TIMEOUTS, 1)


def backed_off(info: TcpInfo | None) -> bool:
    """The kernel is waiting out a (doubled) RTO: replacing the connection is faster."""
    return info is not None and (info.backoff > 0 or info.retransmits > 0)
