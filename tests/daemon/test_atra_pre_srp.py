"""Atra PRE and SRP tables (Anantharaman et al. IV-A), fake clock, real TCP headers."""

from __future__ import annotations

import struct
from ipaddress import IPv4Address

from manetkit.daemon.engines.atra import PreTable, SrpTable, is_pure_ack
from manetkit.daemon.wire import ipv4

A, B, C, D, X = (IPv4Address(f"10.42.0.{i}") for i in (1, 2, 3, 4, 9))


def tcp(src, dst, sport, dport, flags: int, payload: bytes = b"") -> bytes:
    seg = struct.pack("!HHIIBBHHH", sport, dport, 1000, 2000, 5 << 4, flags, 65535, 0, 0)
    return ipv4.build(src, dst, ipv4.PROTO_TCP, seg + payload)


ACK, PSH, SYN, FIN = 0x10, 0x08, 0x02, 0x01


def test_pre_reaches_every_source_of_the_last_window() -> None:
    pre = PreTable(window_s=1.0)
    pre.used(0.0, B, A)  # A used A->B 1.5 s before the break: too old
    pre.used(0.8, B, C)
    pre.used(1.2, B, D)
    pre.used(1.4, X, A)  # another link
    pre.used(1.45, B, C)  # C again: still one source
    assert pre.link_failed(1.5, B) == [D, C]
    assert pre.link_failed(1.6, B) == []  # the table forgot the broken link
    assert pre.sources(1.6, X) == [A]
    assert pre.sources(2.41, X) == []


def test_pure_ack_detection() -> None:
    assert is_pure_ack(tcp(D, A, 80, 5000, ACK))
    assert not is_pure_ack(tcp(D, A, 80, 5000, ACK | PSH, b"data"))  # piggybacked
    assert not is_pure_ack(tcp(D, A, 80, 5000, SYN | ACK))
    assert not is_pure_ack(tcp(D, A, 80, 5000, FIN | ACK))
    assert not is_pure_ack(ipv4.udp(1, 2, b"", D, A))
    assert not is_pure_ack(b"\x45garbage")


def test_srp_pins_the_reverse_data_path_for_pure_acks_only() -> None:
    srp = SrpTable(timeout_s=10.0)
    data = tcp(A, D, 5000, 80, ACK | PSH, b"x" * 100)
    srp.data_arrived(1.0, data, (A, B, D))  # data came A -> B -> D
    ack = tcp(D, A, 80, 5000, ACK)
    assert srp.route_for(1.1, ack) == (D, B, A)
    assert srp.route_for(1.1, tcp(D, A, 80, 5000, ACK | PSH, b"reply")) is None
    assert srp.route_for(1.1, tcp(D, A, 81, 5000, ACK)) is None  # another flow
    assert srp.pinned_acks == 1
    assert srp.pinned_flows(1.2) == 1
    # the next data packet moved to A -> C -> D: the pin follows it
    srp.data_arrived(2.0, data, (A, C, D))
    assert srp.route_for(2.1, ack) == (D, C, A)
    # a pure ACK in the data direction pins nothing, and pins expire
    srp.data_arrived(3.0, tcp(D, A, 80, 5000, ACK), (D, B, A))
    assert srp.route_for(12.5, ack) is None
    assert srp.pinned_flows(12.5) == 0


def test_srp_unpins_routes_through_a_broken_hop() -> None:
    srp = SrpTable()
    srp.data_arrived(0.0, tcp(A, D, 5000, 80, ACK, b"x"), (A, B, D))
    srp.unpin_via(B)
    assert srp.route_for(0.1, tcp(D, A, 80, 5000, ACK)) is None


def test_srp_unpins_routes_over_a_cut_link_only() -> None:
    srp = SrpTable()
    srp.data_arrived(0.0, tcp(A, D, 5000, 80, ACK, b"x"), (A, B, D))
    srp.data_arrived(0.0, tcp(C, D, 5001, 80, ACK, b"x"), (C, B, D))
    assert srp.unpin_link(A, B) == 1  # D-B-A crosses A-B; D-B-C does not
    assert srp.route_for(0.1, tcp(D, A, 80, 5000, ACK)) is None
    assert srp.route_for(0.1, tcp(D, C, 80, 5001, ACK)) == (D, B, C)


def test_only_breaks_of_links_in_use_count_as_not_predicted() -> None:
    """AtraState scores an unpredicted break only if some source used the link in the
    last T (the PRE table): a neighbour merely heard is not an active route's link."""
    from manetkit.daemon.engines.atra import AtraConfig
    from manetkit.daemon.engines.atra.state import AtraState

    me, used, idle = IPv4Address("10.42.0.1"), IPv4Address("10.42.0.2"), IPv4Address("10.42.0.3")
    st = AtraState(AtraConfig(rfp=True), me)
    for i in range(5):
        st.signal(i * 0.2, used, -60.0)
        st.signal(i * 0.2, idle, -60.0)
    st.pre.used(0.9, used, me)
    st.link_failed(1.0, used)
    st.link_failed(1.0, idle)
    assert st.status(1.0)["breaks_not_predicted"] == 1


def test_waiting_for_a_way_around_ends_at_the_horizon_or_the_break() -> None:
    from manetkit.daemon.engines.atra import AtraConfig
    from manetkit.daemon.engines.atra.state import AtraState

    me, nh, dst = (IPv4Address(f"10.42.0.{i}") for i in (1, 2, 4))
    st = AtraState(AtraConfig(rfp=True, lookahead_s=2.0), me)
    st.wait_for_route(10.0, dst, (me, nh, dst), (me, nh))
    assert st.still_waiting(13.9, dst)
    assert not st.still_waiting(14.1, dst)  # 2x the look-ahead: give up quietly
    assert dst not in st.waiting and st.status(14.1)["rediscoveries_expired"] == 1
    st.wait_for_route(20.0, dst, (me, nh, dst), (me, nh))
    st.link_failed(21.0, nh)  # the link broke first: normal recovery takes over
    assert not st.still_waiting(21.0, dst)


def test_source_side_atra_maps_and_break_history_are_bounded() -> None:
    from manetkit.daemon.engines.atra import AtraConfig
    from manetkit.daemon.engines.atra.rfp import MAX_FAILED, RfpPredictor
    from manetkit.daemon.engines.atra.state import MAX_WAITING, AtraState

    me, nh = IPv4Address("10.42.0.1"), IPv4Address("10.42.0.2")
    st = AtraState(AtraConfig(rfp=True), me)
    for i in range(MAX_WAITING + 50):
        dst = IPv4Address(0x0A2B0000 + i)
        st.wait_for_route(0.0, dst, (me, nh, dst), (me, nh))
        st.avoid_link(0.0, nh, dst)
    assert len(st.waiting) == MAX_WAITING and len(st.avoid) == MAX_WAITING
    # once they expired, new ones are kept again
    late = IPv4Address("10.44.0.1")
    st.wait_for_route(10.0, late, (me, nh, late), (me, nh))
    assert late in st.waiting and len(st.waiting) == 1
    # one remembered break per neighbour that ever broke, bounded
    rfp = RfpPredictor(AtraConfig(rfp=True))
    for i in range(MAX_FAILED + 100):
        nb = IPv4Address(0x0A2D0000 + i)
        for k in range(5):
            rfp.sample(i + k * 0.2, nb, -60.0)
        rfp.link_failed(i + 1.0, nb)
    assert len(rfp.book.failed) <= MAX_FAILED
