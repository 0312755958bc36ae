"""The modes' socket knobs and TCP_INFO as plain values (manetkit/proxy/modes.py is sans-I/O;
manetkit/proxy/sockets.py applies them)."""

from __future__ import annotations

import socket

from manetkit.proxy import modes
from manetkit.proxy.config import ProxyConfig
from manetkit.proxy.sockets import apply_options, tcp_info


def names(opts: list[modes.SockOpt]) -> dict[int, int | bytes]:
    assert all(o.level == modes.IPPROTO_TCP for o in opts)
    return {o.name: o.value for o in opts}


def test_every_leg_has_nodelay_linger2_and_the_partition_user_timeout() -> None:
    got = names(modes.leg_options("elfn", ProxyConfig(partition_timeout=12)))
    assert got == {modes.TCP_NODELAY: 1, modes.TCP_LINGER2: 5, modes.TCP_USER_TIMEOUT: 12_000}


def test_fixed_rto_caps_the_rto_and_thin_timeouts_come_only_when_asked() -> None:
    cfg = ProxyConfig(rto_max_ms=1500, congestion_control="reno", thin_linear_timeouts=True)
    got = names(modes.leg_options("fixed-rto", cfg))
    assert got[modes.TCP_RTO_MAX_MS] == 1500
    assert got[modes.TCP_THIN_LINEAR_TIMEOUTS] == 1
    assert got[modes.TCP_CONGESTION] == b"reno"
    assert modes.TCP_RTO_MAX_MS not in names(modes.leg_options("elfn", cfg))


def test_tcp_info_is_parsed_from_the_kernel_bytes() -> None:
    u8 = [1, 0, 3, 0, 2, 0, 0, 0]  # state, ca_state, retransmits, probes, backoff ...
    u32 = [0] * 24
    u32[0], u32[4], u32[15], u32[18] = 204_000, 7, 12_500, 10
    info = modes.parse_tcp_info(modes.TCP_INFO_STRUCT.pack(*u8, *u32) + b"more fields")
    assert info == modes.TcpInfo(
        state=1, retransmits=3, backoff=2, rto_ms=204.0, unacked=7, rtt_ms=12.5, cwnd=10
    )
    assert modes.backed_off(info) and not modes.backed_off(None)
    assert modes.parse_tcp_info(b"short") is None


def test_the_shell_applies_the_knobs_and_reads_tcp_info() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        apply_options(s, modes.leg_options("elfn", ProxyConfig(partition_timeout=7)))
        assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        assert s.getsockopt(socket.IPPROTO_TCP, modes.TCP_USER_TIMEOUT) == 7000
        info = tcp_info(s)
        assert info is not None and info.state == 7  # TCP_CLOSE
