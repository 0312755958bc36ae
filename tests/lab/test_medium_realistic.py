"""The realistic SINR MAC on a fake clock: interference summation, capture, airtime of
broadcasts and unicasts, collisions, RSSI, the validation curves and determinism."""

from __future__ import annotations

import hashlib
import math

import pytest

from manetkit.lab.medium import realistic
from manetkit.lab.medium.airtime import mpdu_bytes, ppdu_us
from manetkit.lab.medium.curves import delivery_curve, distance_at, expected_delivery
from manetkit.lab.medium.errormodels import SHARED_TABLE, frame_layout
from manetkit.lab.medium.mac import TxStatus
from manetkit.lab.medium.mobility import Static, World
from manetkit.lab.medium.power import noise_floor_w
from manetkit.lab.medium.profiles import NodeOffset, profile_defaults
from manetkit.lab.medium.protocol import node_mac
from manetkit.lab.medium.realistic import BCAST, RealisticMedium, _Exchange
from tests.helpers.medium import frame, run_events

B = profile_defaults("outdoor", "802.11b")
CALM = B.with_(shadowing_sigma_db=0.0, nakagami_m=None)  # no shadowing, no fading


def medium(positions, profile=CALM, **kw) -> RealisticMedium:
    return RealisticMedium(World(Static(positions), len(positions)), profile, **kw)


def send_at(m: RealisticMedium, src: int, t: float, size: int, rate: float) -> None:
    """Put a broadcast PPDU on the air from ``src`` (1-based) at ``t``, bypassing the
    contention (a PHY-level test)."""
    f = frame(src, None, size)
    x = _Exchange(src - 1, -1, f, 1)
    m.handle_timer(t)
    m._send(src - 1, BCAST, x, t, mpdu_bytes(len(f)), rate)


def recorded_log_success(monkeypatch, m):
    """Every decode decision's accumulated log success, in order."""
    seen = []
    orig = RealisticMedium._decoded

    def spy(self, node):
        seen.append((node.index, node.lock_lp))
        return orig(self, node)

    monkeypatch.setattr(RealisticMedium, "_decoded", spy)
    return seen


@pytest.mark.parametrize("interferers", [1, 2])
def test_sinr_sums_every_overlapping_transmission(monkeypatch, interferers):
    """n1 -> n2 at 11 Mbit/s while n3 (and n4) start later: the frame's log success is
    the sum over its chunks of bits x lpb(P / (N + sum of the others on the air))."""
    pos = [(0.0, 0.0), (100.0, 0.0), (100.0, 150.0), (100.0, -170.0)][: 2 + interferers]
    m = medium(pos)
    seen = recorded_log_success(monkeypatch, m)
    mean = m.snapshot.mean_w
    noise = noise_floor_w(22e6, 7.0)
    us = 1e-6
    send_at(m, 1, 0.0, 1000, 11.0)  # ends at 192 + 8 * 1022 / 11 us
    starts = [300 * us, 500 * us][:interferers]
    for k, t0 in enumerate(starts):
        send_at(m, 3 + k, t0, 1500, 1.0)
    m.handle_timer(0.1)
    p1, p3, p4 = mean[0][1], mean[2][1], (mean[3][1] if interferers == 2 else 0.0)
    lay = frame_layout(1022, 11.0)
    end = lay.end_us * us
    lpb = SHARED_TABLE.lpb_db
    h, d = lay.header_mode, lay.payload_mode

    def chunk(a, b, interference):
        sinr = 10 * math.log10(p1 / (noise + interference))
        lp = 0.0
        ov = min(b, 192 * us) - max(a, 144 * us)
        if ov > 0:
            lp += ov / us * 1.0 * lpb(h, sinr)
        ov = min(b, end) - max(a, 192 * us)
        if ov > 0:
            lp += ov / us * 11.0 * lpb(d, sinr)
        return lp

    want = chunk(0, 300 * us, 0.0)
    if interferers == 1:
        want += chunk(300 * us, end, p3)
    else:
        want += chunk(300 * us, 500 * us, p3) + chunk(500 * us, end, p3 + p4)
    got = dict(seen)[1]  # n2's decision on n1's frame (node index 1)
    assert got == pytest.approx(want, rel=1e-9)
    # and the interference mattered: with it the frame is all but lost
    assert want < chunk(0, end, 0.0) - 5


def test_three_senders_make_the_success_probability_fall():
    """Delivery ratio of n1's frames at n2 with 0, 1 and 2 overlapping hidden senders."""
    ratios = []
    for k in range(3):
        pos = [(0.0, 0.0), (100.0, 0.0), (100.0, 190.0), (100.0, -190.0)][: 2 + k]
        m = medium(pos, seed=3)
        got = 0
        for n in range(200):
            t = n * 0.02
            send_at(m, 1, t, 1000, 11.0)
            for j in range(k):
                send_at(m, 3 + j, t + 100e-6, 1500, 1.0)
            m.handle_timer(t + 0.019)
            while (ev := m.next_event()) is not None:
                got += ev.node == 2 and ev.frame[6:12] == node_mac(1)
        ratios.append(got / 200)
    assert ratios[0] == 1.0 and ratios[0] > ratios[1] > ratios[2]


@pytest.mark.parametrize("capture", [None, 5.0])
def test_capture_of_a_stronger_late_frame(capture):
    """n2 locks onto weak n1; n3, 10 dB stronger at n2, starts later. Without capture
    (ns-3.37's default) n2 keeps the first frame and loses both; with a 5 dB threshold it
    switches to n3's frame and receives it."""
    pos = [(0.0, 0.0), (150.0, 0.0), (150.0 + 69.6, 0.0)]  # n3 is 10 dB louder at n2
    m = medium(pos, CALM.with_(capture_threshold_db=capture), seed=2)
    mean = m.snapshot.mean_w
    assert 10 * math.log10(mean[2][1] / mean[0][1]) == pytest.approx(10.0, abs=0.1)
    send_at(m, 1, 0.0, 1000, 1.0)
    send_at(m, 3, 1e-3, 200, 1.0)
    m.handle_timer(1.0)
    got = [(ev.node, ev.frame[6:12]) for ev in iter(m.next_event, None)]
    at_n2 = [src for node, src in got if node == 2]
    if capture is None:
        assert at_n2 == [] and m.counters["captured"] == 0
    else:
        assert at_n2 == [node_mac(3)] and m.counters["captured"] == 1


def test_broadcast_at_the_basic_rate_unicast_at_the_data_rate():
    m = medium([(0.0, 0.0), (20.0, 0.0)])
    m.transmit(0.0, 1, frame(1, None))
    t = m.get_timer()
    m.handle_timer(t)
    # a 1514-byte frame is a 1536-byte MPDU: at 1 Mbit/s 192 + 12288 us
    assert m.get_timer() - t == pytest.approx(ppdu_us(1536, 1.0) * 1e-6)
    run_events(m, 1.0)
    m.transmit(1.0, 1, frame(1, 2))
    t = m.get_timer()
    m.handle_timer(t)
    data = ppdu_us(1536, 11.0) * 1e-6
    assert m.get_timer() - t == pytest.approx(data)  # the data frame at 11 Mbit/s
    m.handle_timer(t + data)
    ack_start = m.get_timer()
    assert ack_start - (t + data) == pytest.approx(10e-6)  # SIFS, then the ACK
    m.handle_timer(ack_start)
    assert m.get_timer() - ack_start == pytest.approx(ppdu_us(14, 1.0) * 1e-6)  # at 1 Mbit/s
    d, s = run_events(m, 2.0)
    assert [ev.node for ev in d] == [2] and s == []
    assert m.counters["unicast_ok"] == 1 and m.counters["broadcast"] == 1


def test_same_slot_contenders_collide():
    """Two saturated senders that hear each other: the ns2 MAC never lets them overlap;
    here backoffs that end in the same slot collide, and both retry."""
    pos = [(0.0, 0.0), (10.0, 0.0), (5.0, 8.0)]
    m = medium(pos, seed=4)
    d, s = run_events(m, 2.0, {1: 3, 2: 3})
    c = m.counters
    assert c["interference_losses"] > 20 and c["retries"] > 20
    assert c["unicast_ok"] == len(d) > 500  # and the channel is still shared
    mine = [ev for ev in d if ev.frame[6:12] == node_mac(1)]
    assert 0.35 < len(mine) / len(d) < 0.65


def test_hidden_terminals_with_and_without_rts():
    """n1 and n3 cannot hear each other, both send to n2: without RTS/CTS their data
    frames collide at n2; with it, the CTS silences the hidden sender (NAV)."""
    pos = [(0.0, 0.0), (140.0, 0.0), (280.0, 0.0)]
    prof = CALM.with_(rate_mbps=2.0)
    off = medium(pos, prof, seed=5)
    # hidden from each other: below the preamble detection and energy thresholds
    assert 10 * math.log10(off.snapshot.mean_w[0][2] * 1000) < prof.preamble_min_rssi_dbm
    d_off, _ = run_events(off, 3.0, {1: 2, 3: 2})
    on = medium(pos, prof, seed=5, rts_threshold=0)
    d_on, _ = run_events(on, 3.0, {1: 2, 3: 2})
    assert off.counters["interference_losses"] > 3 * on.counters["interference_losses"]
    assert len(d_on) > 1.5 * len(d_off)


def test_rssi_is_rounded_and_fades_from_frame_to_frame():
    m = medium([(0.0, 0.0), (60.0, 0.0)], B.with_(coherence_time_s=0.0), seed=6)
    for k in range(60):
        m.transmit(k * 0.01, 1, frame(1, None, 100))
    d, _ = run_events(m, 2.0)
    rssi = [ev.rssi_dbm for ev in d]
    assert len(rssi) > 50 and all(r == round(r) for r in rssi)
    assert len(set(rssi)) > 5  # Nakagami fading: several dB from frame to frame
    mean_dbm = 10 * math.log10(m.snapshot.mean_w[0][1] * 1000)
    assert abs(sum(rssi) / len(rssi) - mean_dbm) < 3


def test_asymmetric_link_from_a_transmit_power_offset():
    prof = CALM.with_(node_offsets={0: NodeOffset(tx_power_db=-12.0)})
    m = medium([(0.0, 0.0), (150.0, 0.0)], prof, seed=7)
    for k in range(20):
        m.transmit(k * 0.02, 1, frame(1, None, 100))
        m.transmit(k * 0.02 + 0.01, 2, frame(2, None, 100))
    d, _ = run_events(m, 1.0)
    assert sum(ev.node == 1 for ev in d) == 20  # n2 -> n1 at full power
    assert sum(ev.node == 2 for ev in d) == 0  # n1 -> n2 12 dB weaker: below detection


def test_unicast_failure_reports_the_retry_chain():
    m = medium([(0.0, 0.0), (900.0, 0.0)], retry_limit=3)
    f = frame(1, 2)
    m.transmit(0.0, 1, f)
    d, s = run_events(m, 5.0)
    assert d == [] and [(x.node, x.retries, x.ok, x.frame) for x in s] == [(1, 3, False, f)]
    assert isinstance(s[0], TxStatus) and m.counters["transmissions"] == 4


def test_duplicate_after_a_lost_ack_is_delivered_once():
    """The ACK path is 6 dB worse (n1's noise figure): retries happen, yet the
    destination passes each frame up once."""
    prof = B.with_(node_offsets={0: NodeOffset(noise_figure_db=8.0)}, coherence_time_s=0.0)
    m = medium([(0.0, 0.0), (180.0, 0.0)], prof, seed=8)
    for k in range(200):
        m.transmit(k * 0.01, 1, frame(1, 2, 200 + k))
    d, s = run_events(m, 10.0)
    lengths = [len(ev.frame) for ev in d]
    assert len(lengths) == len(set(lengths))
    assert m.counters["acks_lost"] > 0


def test_validation_curve_matches_the_direct_computation():
    dist = list(range(50, 400, 25))
    for rate, size, fading in ((1.0, 60, True), (11.0, 1000, True), (2.0, 1000, False)):
        got = delivery_curve(B, rate, size, dist, frames=400, fading=fading, seed=3)
        want = [expected_delivery(B, rate, size, d, fading) for d in dist]
        # 400 frames: binomial standard error <= 0.025
        assert max(abs(a - b) for a, b in zip(got, want, strict=True)) < 0.09
        assert sum(abs(a - b) for a, b in zip(got, want, strict=True)) / len(dist) < 0.03


def test_gray_zone_broadcasts_reach_twice_as_far_as_11_mbit_unicast_frames():
    dist = list(range(10, 400, 10))
    for fading in (False, True):
        bcast = delivery_curve(B, 1.0, 60, dist, frames=300, fading=fading, seed=1)
        data = delivery_curve(B, 11.0, 1000, dist, frames=300, fading=fading, seed=1)
        assert distance_at(bcast, dist) >= 2.0 * distance_at(data, dist)


def test_same_seed_same_run():
    def trace(seed):
        prof = profile_defaults("indoor", "802.11g").with_(rate_control="minstrel")
        m = medium([(0.0, 0.0), (25.0, 0.0), (12.0, 20.0), (40.0, 5.0)], prof, seed=seed)
        d, s = run_events(m, 1.0, {1: 2, 3: 4, 2: 1})
        h = hashlib.sha256()
        for ev in d + s:
            h.update(repr(tuple(ev)).encode())
        return h.hexdigest(), m.counters["delivered"]

    assert trace(1) == trace(1)
    assert trace(1) != trace(2)


def test_stats_and_neighbours_have_the_ns2_shape():
    m = medium([(0.0, 0.0), (50.0, 0.0), (2000.0, 0.0)])
    run_events(m, 1.0, {1: 2})
    st = m.stats()
    for key in ("frames_in", "transmissions", "delivered", "queue_drops", "airtime_s"):
        assert key in st
    for key in realistic.RealisticMedium.MODELLED_DROPS:
        assert key in m.counters
    assert [n for n, _ in m.neighbours(1, 1.0)] == [2]


def test_detaching_a_contending_node_cancels_its_start():
    m = medium([(0.0, 0.0), (20.0, 0.0)])
    for _ in range(3):
        m.transmit(0.0, 1, frame(1, 2))
    while m.counters["unicast_ok"] == 0:
        m.handle_timer(m.get_timer())
    m.set_attached(1, False)
    d, s = run_events(m, 1.0, t=0.01)
    assert s == [] and m.get_timer() is None and m.queue_length(1) == 0


def test_a_multicast_rate_sends_broadcasts_faster_and_leaves_the_ack_at_the_basic_rate():
    """iw's ``mcast-rate`` (NL80211_ATTR_MCAST_RATE): mac80211 sends an IBSS's group
    frames at it; ACKs still go at the basic rate."""
    m = medium([(0.0, 0.0), (20.0, 0.0)], CALM.with_(mcast_rate_mbps=11.0))
    m.transmit(0.0, 1, frame(1, None))
    t = m.get_timer()
    m.handle_timer(t)
    assert m.get_timer() - t == pytest.approx(ppdu_us(1536, 11.0) * 1e-6)
    run_events(m, 1.0)
    m.transmit(1.0, 1, frame(1, 2))
    t = m.get_timer()
    m.handle_timer(t)
    data = ppdu_us(1536, 11.0) * 1e-6
    m.handle_timer(t + data)
    ack_start = m.get_timer()
    m.handle_timer(ack_start)
    assert m.get_timer() - ack_start == pytest.approx(ppdu_us(14, 1.0) * 1e-6)


def test_a_multicast_rate_shortens_the_broadcasts_reach():
    """The gray zone's cause (broadcasts at 1 Mbit/s reach past where data works) shrinks
    when group frames go faster, the operator's remedy in IBSS meshes: at 200 m (between
    11 Mbit/s's reach, ~145 m here, and 1 Mbit/s's, ~265 m) hellos arrive at the basic
    rate and not at an 11 Mbit/s multicast rate."""

    def heard(profile) -> int:
        m = medium([(0.0, 0.0), (200.0, 0.0)], profile)
        for k in range(20):
            m.transmit(k * 0.05, 1, frame(1, None, 100))
            run_events(m, k * 0.05 + 0.049, t=k * 0.05)
        run_events(m, 2.0, t=1.0)
        return m.counters["delivered"]

    assert heard(CALM) == 20
    assert heard(CALM.with_(mcast_rate_mbps=11.0)) == 0
