"""The static engine (the data plane's baseline stack), driven without sockets or clocks."""

from __future__ import annotations

import struct
from ipaddress import IPv4Address as A

from manetkit.daemon.engines.base import (
    Deliver,
    Dropped,
    LinkDown,
    LinkUp,
    Notify,
    SendFrame,
    TxFailed,
)
from manetkit.daemon.engines.static import StaticEngine
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.wire import ipv4


def drain(e):
    out = []
    while (a := e.next_event()) is not None:
        out.append(a)
    return out


def tcp_packet(src, dst, ttl=64, seq=1234):
    seg = struct.pack("!HHIIBBHHH", 5000, 80, seq, 0, 0x50, 0x10, 1000, 0, 0)
    return ipv4.build(A(src), A(dst), ipv4.PROTO_TCP, seg, ttl=ttl)


def engine():
    nb = NeighbourTable()
    nb.learn(0.0, A("10.42.0.3"), b"\x02" * 6)
    return StaticEngine(A("10.42.0.2"), {A("10.42.0.9"): A("10.42.0.3")}, nb)


def test_forwarding_decrements_ttl_with_a_valid_checksum():
    e = engine()
    p = tcp_packet("10.42.0.1", "10.42.0.9", ttl=9)
    e.receive_frame(0.0, p, b"\x04" * 6)
    (a,) = drain(e)
    assert isinstance(a, SendFrame) and a.next_hop == A("10.42.0.3")
    assert a.packet[8] == 8 and ipv4.checksum(a.packet[:20]) == 0
    assert a.packet[20:] == p[20:]
    # a direct neighbour needs no configured route
    e.receive_frame(0.0, tcp_packet("10.42.0.1", "10.42.0.3"), b"\x04" * 6)
    assert drain(e)[0].next_hop == A("10.42.0.3")


def test_local_delivery_no_route_and_ttl_expiry():
    e = engine()
    e.receive_frame(0.0, tcp_packet("10.42.0.1", "10.42.0.2"))
    e.receive_frame(0.0, tcp_packet("10.42.0.1", "10.42.0.77"))
    e.receive_frame(0.0, tcp_packet("10.42.0.1", "10.42.0.9", ttl=1))
    kinds = [(type(a), getattr(a, "reason", None)) for a in drain(e)]
    assert kinds == [(Deliver, None), (Dropped, "no-route"), (Dropped, "ttl-expired")]
    assert e.status()["counters"] == {"delivered": 1, "no-route": 1, "ttl-expired": 1}


def test_link_down_reports_route_down_with_elfn_fields_and_recovers():
    e = engine()
    failed = tcp_packet("10.42.0.2", "10.42.0.9", seq=777)
    e.link_event(1.0, TxFailed(A("10.42.0.3"), failed))
    assert drain(e) == []  # one failure is the hysteresis' business, not a break
    e.link_event(1.1, LinkDown(A("10.42.0.3"), "tx-failed"))
    (ev,) = drain(e)
    assert isinstance(ev, Notify) and ev.name == "route-down"
    assert ev.fields == {
        "dst": "10.42.0.9",
        "next_hop": "10.42.0.3",
        "reason": "tx-failed",
        "src": "10.42.0.2",
        "proto": 6,
        "sport": 5000,
        "dport": 80,
        "seq": 777,
    }
    e.send_local(1.2, tcp_packet("10.42.0.2", "10.42.0.9"))
    assert isinstance(drain(e)[0], Dropped)
    e.link_event(2.0, LinkUp(A("10.42.0.3")))
    assert [a.name for a in drain(e)] == ["route-up"]
    e.send_local(2.1, tcp_packet("10.42.0.2", "10.42.0.9"))
    assert isinstance(drain(e)[0], SendFrame)
