"""TCP-BuS over DSR (Kim, Toh & Choi section IV) on the simulator with a fake clock.

1-2-3-4-5 carries a TCP flow 1->5; link 3-4 breaks, and a detour 3-6-5 appears that no
cache knows yet. Node 3 is the pivot: ERDN to 1, hold, Route Discovery from 3, ERSN
with the receiver's Last_ACK, then the held packets go on in order.
"""

from __future__ import annotations

from manetkit.daemon.wire import manet_ext as mx
from tests.daemon.dsrutil import A
from tests.helpers.busdsr import (
    FLOW,
    break_and_send,
    data,
    frames_with,
    lose_first_erdn,
    notices,
    seqs,
    setup,
)


def test_erdn_reaches_the_source_nodes_hold_and_ersn_releases_in_order():
    sim = setup()
    break_and_send(sim)
    assert sim.events(A(1), "erdn") == [FLOW | {"seq": 1100, "pivot": "10.42.0.3"}]
    assert sim.events(A(1), "ersn") == [FLOW | {"last_ack": 1100, "pivot": "10.42.0.3"}]
    # Every segment arrives exactly once, in order, over the repaired route.
    assert seqs(sim.delivered[A(5)]) == [1000, 1100, 1200, 1300]
    # Node 2 held 1300 between the ERDN and the ERSN instead of forwarding it.
    (erdn_at_2,) = [f.time for f in frames_with(sim, 2, mx.KIND_ERDN)]
    (ersn_at_2,) = [f.time for f in frames_with(sim, 2, mx.KIND_ERSN)]
    sent_1300 = [f.time for f in sim.frames if f.sender == A(2) and b"\x00\x00\x05\x14" in f.packet]
    assert sent_1300 and all(t >= ersn_at_2 for t in sent_1300) and erdn_at_2 < ersn_at_2
    assert sim.engines[A(2)].status()["bus"]["counters"]["held"] == 1
    # The pivot repaired locally (its own discovery) and taught the source the route.
    assert sim.engines[A(3)].counters["bus-pivot"] == 1
    assert (1, 2, 3, 6, 5) in {
        tuple(int(str(a).rsplit(".", 1)[1]) for a in e.path)
        for e in sim.engines[A(1)].cache.entries()
    }
    # Reliable: every ERDN/ERSN hop was acknowledged, nothing left pending.
    for i in (1, 2, 3):
        assert not sim.engines[A(i)].bus.state.pending
    assert not sim.dropped[A(3)] and not sim.dropped[A(2)]


def test_erdn_retransmitted_until_acked_when_the_first_copy_is_lost():
    sim = setup(detour=False)
    lost = lose_first_erdn(sim, 2)
    break_and_send(sim, detour_after=0.5)
    assert len(lost) == 1
    sent = frames_with(sim, 3, mx.KIND_ERDN)
    assert len(sent) == 2  # the original and one retransmission, then acked
    assert abs(sent[1].time - sent[0].time - 0.2) < 1e-6
    acks = [
        f.time
        for f in sim.frames
        if f.sender == A(2)
        and any(isinstance(n, mx.BusAck) and n.kind == mx.KIND_ERDN for n in notices(f))
    ]
    assert len(acks) == 1 and sent[1].time < acks[0] < sent[1].time + 0.01
    assert sim.events(A(1), "erdn") == [FLOW | {"seq": 1100, "pivot": "10.42.0.3"}]
    assert seqs(sim.delivered[A(5)]) == [1000, 1100, 1200, 1300]


def test_bus_off_changes_nothing():
    sim = setup(bus=False)
    break_and_send(sim)
    assert not sim.events(A(1), "erdn") and not sim.events(A(1), "ersn")
    assert not frames_with(sim, 3, mx.KIND_ERDN)
    # Plain DSR: the pivot has no other route, so the segments on the old route die.
    assert [d.reason for d in sim.dropped[A(3)]].count("link-broken") >= 1
    assert 1100 not in seqs(sim.delivered[A(5)])


def test_late_erdn_retransmission_does_not_hold_the_flow_again():
    """The first ERDN is lost and the repair is quick: the ERSN overtakes the ERDN's
    retransmission, which must then neither hold the flow nor reach the proxy."""
    sim = setup()
    eng2 = sim.engines[A(2)]
    lost = lose_first_erdn(sim, 2)
    break_and_send(sim)
    assert len(lost) == 1
    assert not sim.events(A(1), "erdn")  # the ERSN came first; the old ERDN is void
    assert len(sim.events(A(1), "ersn")) == 1
    assert not eng2.bus.state.holds
    # The pivot's ERSN superseded its unacknowledged ERDN: no retransmission followed.
    assert len(frames_with(sim, 3, mx.KIND_ERDN)) == 1
    assert sim.engines[A(3)].bus.state.counters["erdn-superseded"] == 1
    sim.send(A(1), data(1400))
    sim.run(duration=1.0)
    assert seqs(sim.delivered[A(5)]) == [1000, 1100, 1200, 1300, 1400]
