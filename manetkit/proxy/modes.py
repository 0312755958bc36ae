"""Per-destination modes: the mesh leg's socket knobs and the freeze/probe/resume policy.

* ``plain``: not intercepted at all (nft returns before the redirect).
* ``fixed-rto`` (Reno-F, Dyer & Boppana section II): the kernel keeps retransmitting at
  a capped RTO (TCP_RTO_MAX_MS, Linux 6.15+, >= 1000 ms) so retransmissions keep probing
  the route; always paired with TCP_USER_TIMEOUT >= the partition timeout, otherwise the
  kernel gives up after ~15 retries at the cap. TCP_THIN_LINEAR_TIMEOUTS only with
  reno/cubic (the config refuses it otherwise: it never fires under BBR).
* ``elfn`` (Holland & Vaidya section 6): on route-down for the session's flow the
  sender stops (FROZEN) and probes every probe interval (fixed 2 s, the paper's best, or
  RTT-based, its suggested improvement); route-up or a probe answer resumes. A kernel
  connection that has backed off would wait out its RTO before sending anything, so
  it is replaced with a fresh one and the session RESUMEs on it.
* ``bus`` (TCP-BuS, Kim, Toh & Choi section IV): freeze on ERDN; on ERSN resume, and
  if the kernel connection has backed off, replace it so that RESUME retransmits only
  the range the receiver is missing. No ERSN within ``bus_wait``: probe like elfn.

Events consumed from the daemon's event socket (JSON lines):
  {"event":"route-down","dst":D,"src":S,"sport":P,"dport":Q,"seq":N,...}
  {"event":"route-up","dst":D,"hops":H}
  {"event":"erdn","dst":D,"src":S,"sport":P,"dport":Q,"seq":ERDN_GEN_SEQ,"pivot":A}
  {"event":"ersn","dst":D,"src":S,"sport":P,"dport":Q,"last_ack":N,"pivot":A}
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


def probe_interval(cfg: ProxyConfig, info: TcpInfo | None) -> float:
    """ELFN probe period: fixed (2 s was best in the paper) or 4 x RTT, >= 0.2 s."""
    if cfg.probe == "rtt" and info is not None and info.rtt_ms > 0:
        return max(0.2, 4 * info.rtt_ms / 1000)
    return cfg.probe_interval


def backed_off(info: TcpInfo | None) -> bool:
    """The kernel is waiting out a (doubled) RTO: replacing the connection is faster."""
    return info is not None and (info.backoff > 0 or info.retransmits > 0)


def flow_matches(ev: dict[str, Any], peer: str, local: tuple[str, int], remote_port: int) -> bool:
    """Does a route-down / erdn / ersn event concern this session's mesh leg?

    The failed packet may be ours (src = us) or the peer's (dst = us, e.g. our ACKs);
    without ports the event concerns every flow to that destination."""
    dst, src = ev.get("dst"), ev.get("src")
    if peer not in (dst, src):
        return False
    sport, dport = ev.get("sport"), ev.get("dport")
    if sport is None or dport is None:
        return True
    lport = local[1]
    return (sport, dport) in ((lport, remote_port), (remote_port, lport))
