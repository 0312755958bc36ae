"""DSR's overheard-frame input (RFC 4728 8.4.4): learn and shorten, never relay."""

from __future__ import annotations

from manetkit.daemon.engines.aodv import AodvEngine
from manetkit.daemon.engines.base import Deliver, Dropped, SendFrame
from manetkit.daemon.engines.dsr import DsrConfig, DsrEngine
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.wire import dsr, ipv4
from tests.daemon.dsrutil import A, first


def data(src: int, dst: int, hops: list[int], segments_left: int) -> bytes:
    """A UDP packet from ``src`` to ``dst`` over ``hops``, as it is on the air."""
    inner = ipv4.udp(5000, 6000, b"x", A(src), A(dst))
    sr = dsr.SourceRoute(tuple(A(h) for h in hops), segments_left)
    return dsr.encapsulate(dsr.IPFields(A(src), A(dst)), [sr], ipv4.PROTO_UDP, inner)


def actions(eng: DsrEngine) -> list:
    out = []
    while (a := eng.next_event()) is not None:
        out.append(a)
    return out


def test_only_dsr_asks_for_overheard_frames():
    assert DsrEngine.wants_overheard is True
    assert AodvEngine.wants_overheard is False


def test_overheard_packet_later_in_the_route_gives_one_gratuitous_reply():
    eng = DsrEngine(A(4), DsrConfig(seed=1), NeighbourTable())
    # 1 -> 2 -> 3 -> 4 -> 5; node 4 overhears 2 sending to 3.
    pkt = data(1, 5, [2, 3, 4], segments_left=2)
    eng.overhear_frame(1.0, pkt, b"\x02" * 6, -70.0)
    out = actions(eng)
    assert not any(isinstance(a, (Deliver, Dropped)) for a in out)
    (reply,) = [a for a in out if isinstance(a, SendFrame)]
    assert reply.next_hop == A(2)  # back towards the source over the shortened route
    rrep = first(reply.packet, dsr.RouteReply)
    assert rrep.addresses == (A(2), A(4), A(5))
    assert eng.counters["grat-replies"] == 1
    eng.overhear_frame(1.5, pkt, b"\x02" * 6, -70.0)  # within GratReplyHoldoff
    assert actions(eng) == [] and eng.counters["grat-reply-holdoff"] == 1


def test_overheard_packet_for_us_is_neither_delivered_nor_forwarded():
    eng = DsrEngine(A(3), DsrConfig(seed=1, gratuitous_replies=False), NeighbourTable())
    # 1 -> 2 -> 3 (us) and 1 -> 2 -> 4 -> 5 seen as 1 transmits to 2.
    eng.overhear_frame(1.0, data(1, 3, [2], segments_left=1), None, None)
    eng.overhear_frame(1.0, data(1, 5, [2, 3, 4], segments_left=3), None, None)
    assert actions(eng) == []
    assert eng.counters["data-delivered"] == 0 and eng.counters["data-forwarded"] == 0
    assert eng.counters["overheard"] == 2


def test_malformed_or_foreign_overheard_frames_are_counted_not_dropped():
    eng = DsrEngine(A(3), DsrConfig(seed=1), NeighbourTable())
    bad = bytearray(data(1, 5, [2, 3, 4], segments_left=2))
    bad[20 + dsr.HEADER_LEN + 1] = 7  # option length not 2 + 4k
    eng.overhear_frame(1.0, bytes(bad), None, None)
    eng.overhear_frame(1.0, ipv4.build(A(1), A(2), ipv4.PROTO_UDP, b"\0" * 8), None, None)
    assert actions(eng) == []
    assert eng.counters["overheard-malformed"] == 1
    assert eng.counters["overheard-ignored"] == 1
