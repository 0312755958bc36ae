"""The sans-I/O DCF medium, driven with a fake clock (no sockets, no sleeping)."""

from __future__ import annotations

import pytest

from manetkit.lab.medium.protocol import node_mac
from tests.helpers.medium import drain, frame, medium, run


def test_unicast_in_range_and_timing():
    m = medium([(0, 0), (200, 0)])
    f = frame(1, 2)
    m.transmit(0.0, 1, f)
    t = m.get_timer()
    # DIFS + backoff (0..31 slots) before the start
    assert 50e-6 <= t <= 50e-6 + 31 * 20e-6 + 1e-12
    m.handle_timer(t)
    end = m.get_timer()
    assert end - t == pytest.approx((6336 + 10 + 304) * 1e-6)
    m.handle_timer(end - 1e-9)
    assert m.next_event() is None  # nothing before the end of the exchange
    m.handle_timer(end)
    d, s = drain(m)
    assert d == [(2, pytest.approx(m.prop.rx_power_dbm(200)), f)] and s == []


def test_rts_cts_lengthens_each_unicast_exchange():
    m = medium([(0, 0), (200, 0)], rts_threshold=0)
    f = frame(1, 2)
    m.transmit(0.0, 1, f)
    t = m.get_timer()
    m.handle_timer(t)
    # RTS + SIFS + CTS + SIFS + data + SIFS + ACK at 2 Mbps (basic rate 1 Mbps)
    assert m.get_timer() - t == pytest.approx((352 + 10 + 304 + 10 + 6336 + 10 + 304) * 1e-6)
    d, _ = run(m, 1.0)
    assert [r for r, _, _ in d] == [2]


def test_rts_threshold_spares_small_frames_and_broadcasts():
    m = medium([(0, 0), (200, 0)], rts_threshold=500)
    m.transmit(0.0, 1, frame(1, 2, size=200))  # MPDU 222 <= 500: no RTS
    t = m.get_timer()
    m.handle_timer(t)
    assert m.get_timer() - t == pytest.approx((192 + 222 * 8 / 2 + 10 + 304) * 1e-6)
    run(m, 1.0)
    m.transmit(1.0, 1, frame(1, None))  # broadcast: never RTS
    t = m.get_timer()
    m.handle_timer(t)
    assert m.get_timer() - t == pytest.approx(6336e-6)


def test_rts_to_absent_destination_costs_only_rts_and_cts_timeout():
    m = medium([(0, 0), (300, 0)], rts_threshold=0, retry_limit=2)
    f = frame(1, 2)
    m.transmit(0.0, 1, f)
    d, s = run(m, 5.0)
    assert d == [] and s == [(1, node_mac(2), 2, False, f)]
    # three attempts, none sent the data: airtime = 3 x (RTS + SIFS + CTS)
    assert m.counters["airtime_s"] == pytest.approx(3 * (352 + 10 + 304) * 1e-6)


def test_rts_cts_throughput_of_a_lone_sender():
    # Saturated n1 -> n2 for 10 s of fake time: the mean exchange is DIFS + 15.5 slots +
    # 7326 us with RTS/CTS (7686 us) against 7010 us without; the measured rates differ
    # by that ratio (backoff draws are seeded, so within a couple of percent).
    rates = {}
    for thr in (0, 2347):
        m = medium([(0, 0), (200, 0)], rts_threshold=thr, seed=5)
        d, _ = run(m, 10.0, saturate={1: 2})
        rates[thr] = len(d) / 10.0
    assert rates[0] == pytest.approx(1e6 / 7686, rel=0.02)
    assert rates[2347] == pytest.approx(1e6 / 7010, rel=0.02)


def test_airtime_scale_shrinks_every_duration():
    m = medium([(0, 0), (200, 0)], airtime_scale=1e-3)
    m.transmit(0.0, 1, frame(1, 2))
    t = m.get_timer()
    assert 50e-9 <= t <= (50 + 31 * 20) * 1e-9 + 1e-15
    m.handle_timer(t)
    assert m.get_timer() - t == pytest.approx((6336 + 10 + 304) * 1e-9)
    with pytest.raises(ValueError):
        medium([(0, 0)], airtime_scale=0)


def test_broadcast_reaches_exactly_nodes_in_range():
    m = medium([(0, 0), (200, 0), (249, 0), (251, 0), (0, 240), (600, 0)])
    m.transmit(0.0, 1, frame(1, None))
    d, s = run(m, 1.0)
    assert sorted(r for r, _, _ in d) == [2, 3, 5]
    assert s == [] and m.counters["broadcast"] == 1 and m.counters["transmissions"] == 1


def test_multicast_bit_means_broadcast():
    m = medium([(0, 0), (200, 0)])
    m.transmit(0.0, 1, b"\x01\x00\x5e\x00\x00\x01" + node_mac(1) + b"\x08\x00" + bytes(50))
    d, s = run(m, 1.0)
    assert [r for r, _, _ in d] == [2] and m.counters["retries"] == 0


def test_out_of_range_unicast_retries_then_fails():
    m = medium([(0, 0), (300, 0)])
    f = frame(1, 2)
    m.transmit(0.0, 1, f)
    d, s = run(m, 5.0)
    assert d == []
    assert s == [(1, node_mac(2), 7, False, f)]
    assert m.counters["transmissions"] == 8 and m.counters["retries"] == 7
    assert m.counters["unicast_failed"] == 1


def test_unknown_destination_fails_like_real_80211():
    m = medium([(0, 0), (100, 0)], retry_limit=2)
    m.transmit(0.0, 1, b"\x02\x00\x00\x00\x00\x09" + node_mac(1) + b"\x08\x00" + bytes(50))
    d, s = run(m, 5.0)
    assert d == [] and len(s) == 1 and s[0][2:4] == (2, False)


def test_detached_node_does_not_ack():
    m = medium([(0, 0), (100, 0)], retry_limit=1)
    m.set_attached(2, False)
    m.transmit(0.0, 1, frame(1, 2))
    d, s = run(m, 5.0)
    assert d == [] and s[0][3] is False


def test_random_loss_is_retried_and_reported():
    m = medium([(0, 0), (100, 0)], loss=0.5, seed=3)
    for _ in range(40):
        m.transmit(0.0, 1, frame(1, 2, 100))
    d, s = run(m, 30.0)
    assert m.counters["random_losses"] > 0 and m.counters["retries"] > 0
    # every retried-then-delivered frame gets an ok status with its retry count
    oks = [x for x in s if x[3]]
    assert oks and all(x[2] >= 1 for x in oks)
    assert len(d) + sum(1 for x in s if not x[3]) == 40


def test_link_loss_override_only_on_that_link():
    m = medium([(0, 0), (100, 0), (0, 100)], link_loss={(0, 1): 1.0}, retry_limit=0)
    m.transmit(0.0, 1, frame(1, None))
    d, _ = run(m, 1.0)
    assert [r for r, _, _ in d] == [3]


def test_queue_overflow_drops_and_counts():
    m = medium([(0, 0), (100, 0)], queue_frames=5)
    accepted = [m.transmit(0.0, 1, frame(1, 2)) for _ in range(8)]
    assert accepted == [True] * 5 + [False] * 3
    assert m.nodes[0].drops == 3 and m.counters["queue_drops"] == 3
    d, _ = run(m, 5.0)
    assert len(d) == 5


def test_two_senders_in_cs_range_share_the_channel():
    # n1->n2 and n3->n4, the senders 400 m apart: within 550 m carrier sense.
    T = 5.0
    alone = medium([(0, 0), (200, 0), (400, 0), (600, 0)])
    d1, _ = run(alone, T, {1: 2})
    both = medium([(0, 0), (200, 0), (400, 0), (600, 0)])
    d2, _ = run(both, T, {1: 2, 3: 4})
    per_flow = {r: sum(1 for x, _, _ in d2 if x == r) for r in (2, 4)}
    assert sum(per_flow.values()) == pytest.approx(len(d1), rel=0.05)  # one channel's worth
    assert min(per_flow.values()) > 0.35 * len(d1)  # and shared fairly
    # never two transmissions at once
    assert both.counters["airtime_s"] <= T + 0.01


def test_two_senders_far_apart_do_not_share():
    T = 5.0
    alone = medium([(0, 0), (200, 0)])
    d1, _ = run(alone, T, {1: 2})
    far = medium([(0, 0), (200, 0), (2000, 0), (2200, 0)])
    d2, _ = run(far, T, {1: 2, 3: 4})
    for r in (2, 4):
        assert sum(1 for x, _, _ in d2 if x == r) == pytest.approx(len(d1), rel=0.05)


def test_chain_spatial_reuse_i_and_i_plus_3():
    """At 200 m spacing n1 and n4 may transmit at once (600 m > 550 m); n1 and n3 may not."""
    pos = [(200.0 * i, 0) for i in range(5)]
    assert sorted(medium(pos).snapshot.cs[0]) == [1, 2]
    T = 3.0
    alone, _ = run(medium(pos), T, {1: 2})
    d, _ = run(medium(pos), T, {1: 2, 4: 5})
    assert sum(1 for x, _, _ in d if x == 2) == pytest.approx(len(alone), rel=0.05)
    assert sum(1 for x, _, _ in d if x == 5) == pytest.approx(len(alone), rel=0.05)
    d3, _ = run(medium(pos), T, {1: 2, 3: 4})
    assert sum(1 for x, _, _ in d3 if x == 2) < 0.65 * len(alone)


def test_hidden_terminal_collides_when_interference_on():
    """n1 -> n2 while n4 (hidden from n1, 400 m from n2) sends to n5: n2 is often locked
    onto n4's signal (ns-2 semantics), so n1's frames are lost and retried."""
    pos = [(200.0 * i, 0) for i in range(5)]
    on = medium(pos, interference=True, seed=5)
    d_on, s_on = run(on, 3.0, {1: 2, 4: 5})
    off = medium(pos, interference=False, seed=5)
    d_off, _ = run(off, 3.0, {1: 2, 4: 5})
    assert off.counters["interference_losses"] == 0 and off.counters["retries"] == 0
    assert on.counters["interference_losses"] > 100
    assert sum(1 for x, _, _ in d_on if x == 2) < 0.5 * sum(1 for x, _, _ in d_off if x == 2)
    assert any(not ok for _, _, _, ok, _ in s_on)  # some frames fail after 7 retries
    # n5 is 800 m from n1: n4's flow is untouched
    assert sum(1 for x, _, _ in d_on if x == 5) == pytest.approx(
        sum(1 for x, _, _ in d_off if x == 5), rel=0.05
    )


def test_capture_when_interferer_is_10db_weaker():
    """A reception already under way survives a later interferer >= 10 dB weaker."""
    from manetkit.lab.medium.mac import _Tx

    pos = [(0, 0), (200, 0), (600, 0), (900, 0)]  # n3 starts after n1, 400 m from n2
    m = medium(pos, interference=True)
    snap = m.snapshot
    first = _Tx(0, 0.0, 1.0, 1, b"", [1])
    m._active.append(first)
    m._interfere(_Tx(2, 0.5, 1.5, 3, b"", [3]), snap)
    assert first.lost is None  # 12 dB stronger: captured
    pos2 = [(0, 0), (200, 0), (550.5, 0), (800, 0)]  # interferer 350 m away: < 10 dB
    m2 = medium(pos2, interference=True)
    first2 = _Tx(0, 0.0, 1.0, 1, b"", [1])
    m2._active.append(first2)
    m2._interfere(_Tx(2, 0.5, 1.5, 3, b"", [3]), m2.snapshot)
    assert first2.lost == {1}


def test_late_wakeups_lose_no_airtime():
    """Processing events 1 ms late must give the same schedule as processing them on time."""

    def deliveries(late: float) -> int:
        m = medium([(0, 0), (100, 0)], rate=54.0, seed=7)
        t, n = 0.0, 0
        while t < 1.0:
            while len(m.nodes[0].queue) < 40:
                m.transmit(t, 1, frame(1, 2))
            nxt = m.get_timer()
            t = nxt + late
            m.handle_timer(t)
            n += len(drain(m)[0])
        return n

    on_time, late = deliveries(0.0), deliveries(0.001)
    assert on_time > 2000
    assert late == pytest.approx(on_time, rel=0.01)


def test_moving_node_loses_the_link():
    m = medium([(0, 0), (200, 0)], retry_limit=3)
    m.world.move(1, 400, 0, t=0.0, speed=None)
    m.transmit(0.0, 1, frame(1, 2))
    d, s = run(m, 2.0)
    assert d == [] and s and s[0][3] is False
    m.world.set_link(0, 1, "up")
    m.transmit(2.0, 1, frame(1, 2))
    d, s = run(m, 4.0, t=2.0)
    assert [r for r, _, _ in d] == [2]
    m.world.move(1, 100, 0, t=4.0)
    m.world.set_link(0, 1, "down")
    m.transmit(4.0, 1, frame(1, 2))
    d, s = run(m, 6.0, t=4.0)
    assert d == [] and s[0][3] is False


def test_detaching_a_contending_node_cancels_its_start():
    """A radio that goes away while its node waits for the channel (the medium detaches it)
    leaves nothing to send: its scheduled start must not fire on an empty queue."""
    m = medium([(0, 0), (100, 0)])
    m.transmit(0.0, 1, frame(1, 2))
    m.transmit(0.0, 1, frame(1, 2))
    for _ in range(2):  # start, then the end of the first exchange: contending again
        m.handle_timer(m.get_timer())
    m.set_attached(1, False)
    d, s = run(m, 1.0, t=0.01)
    assert s == [] and m.get_timer() is None
