"""Access categories (WMM), ns-2's PriQueue and the Minstrel-like rate controller."""

from __future__ import annotations

import random
import struct

import pytest

from manetkit.lab.medium.airtime import DSSS, OFDM, Airtime
from manetkit.lab.medium.mac import Delivery, Medium
from manetkit.lab.medium.mobility import Static, World
from manetkit.lab.medium.profiles import profile_defaults
from manetkit.lab.medium.protocol import BROADCAST_MAC, node_mac
from manetkit.lab.medium.queues import (
    AC_BE,
    AC_BK,
    AC_VI,
    AC_VO,
    access_category,
    dscp,
    edca_defaults,
    is_network_control,
    user_priority,
)
from manetkit.lab.medium.ratecontrol import FixedRate, Minstrel
from manetkit.lab.medium.realistic import RealisticMedium
from tests.helpers.medium import run_events
from tests.lab.test_medium_realistic import CALM

B = profile_defaults("outdoor", "802.11b")


def ip_frame(src: int, dst: int | None, tos: int, size: int = 300, ethertype: int = 0x88B5):
    """An Ethernet frame whose payload is an IPv4 packet with this TOS byte (a manetkit
    0x88B5 frame by default)."""
    d = BROADCAST_MAC if dst is None else node_mac(dst)
    ip = struct.pack("!BBH", 0x45, tos, size - 14) + bytes(size - 18)
    return d + node_mac(src) + ethertype.to_bytes(2, "big") + ip


@pytest.mark.parametrize(
    "tos, up, ac",
    [
        (0x00, 0, AC_BE),  # DF
        (0x20, 1, AC_BK),  # CS1
        (0x28, 0, AC_BE),  # AF11: RFC 8325 section 4 (kernel >= 6.8)
        (0x40, 0, AC_BE),  # CS2
        (0x48, 3, AC_BE),  # AF21
        (0x60, 4, AC_VI),  # CS3
        (0x68, 4, AC_VI),  # AF31
        (0x88, 4, AC_VI),  # AF41
        (0xA0, 5, AC_VI),  # CS5
        (0xB8, 6, AC_VO),  # EF
        (0xC0, 7, AC_VO),  # CS6: babeld, manetkit's control
        (0xE0, 7, AC_VO),  # CS7
    ],
)
def test_dscp_to_access_category_as_mac80211(tos, up, ac):
    for ethertype in (0x0800, 0x88B5):
        f = ip_frame(1, 2, tos, ethertype=ethertype)
        assert dscp(f) == tos >> 2
        assert (user_priority(f), access_category(f)) == (up, ac)


def test_non_ip_and_ipv6_frames():
    arp = node_mac(2) + node_mac(1) + b"\x08\x06" + bytes(28)
    assert dscp(arp) is None and access_category(arp) == AC_BE
    tc = 0xC0  # CS6 in the IPv6 traffic class
    v6 = (
        node_mac(2)
        + node_mac(1)
        + b"\x86\xdd"
        + bytes([0x60 | tc >> 4, (tc & 0xF) << 4])
        + bytes(38)
    )
    assert dscp(v6) == 48 and access_category(v6) == AC_VO
    assert is_network_control(ip_frame(1, 2, 0xC0)) and not is_network_control(ip_frame(1, 2, 0xB8))


def test_edca_defaults_per_phy():
    bk, be, vi, vo = edca_defaults(DSSS)
    assert (vo.cw_min, vo.cw_max, vi.cw_min, vi.cw_max, be.cw_min) == (7, 15, 15, 31, 31)
    assert (bk.aifsn, be.aifsn, vi.aifsn, vo.aifsn) == (7, 3, 2, 2)
    assert edca_defaults(OFDM)[3].cw_min == 3 and be.aifs_us(DSSS) == 10 + 3 * 20


def delivery_order(m, frames) -> list[bytes]:
    for k, f in enumerate(frames):
        m.transmit(k * 1e-6, 1, f)
    out = []
    while (nxt := m.get_timer()) is not None:
        m.handle_timer(nxt)
        out += [ev.frame for ev in iter(m.next_event, None) if type(ev) is Delivery]
    return out


def test_wmm_sends_control_ahead_of_earlier_best_effort():
    m = RealisticMedium(World(Static([(0, 0), (20, 0)]), 2), CALM, seed=1)
    data = [ip_frame(1, 2, 0x00, 1400 + k) for k in range(5)]
    hello = ip_frame(1, None, 0xC0, 80)
    order = delivery_order(m, data + [hello])
    assert order[0] == data[0]  # already contending when the hello came
    assert order[1] == hello  # then voice before the other best-effort frames
    assert order[2:] == data[1:]


def test_wmm_off_is_one_fifo():
    m = RealisticMedium(World(Static([(0, 0), (20, 0)]), 2), CALM.with_(wmm=False), seed=1)
    data = [ip_frame(1, 2, 0x00, 1400 + k) for k in range(3)]
    hello = ip_frame(1, None, 0xC0, 80)
    assert delivery_order(m, data + [hello]) == data + [hello]


def ns2(priqueue: bool, queue_frames: int = 50) -> Medium:
    world = World(Static([(0, 0), (200, 0)]), 2)
    return Medium(world, Airtime(2.0), priqueue=priqueue, queue_frames=queue_frames, seed=1)


def test_priqueue_puts_routing_control_first_and_drops_the_tail():
    data = [ip_frame(1, 2, 0x00, 1000 + k) for k in range(4)]
    rreq1, rreq2 = ip_frame(1, None, 0xC0, 60), ip_frame(1, None, 0xC0, 61)
    fifo = delivery_order(ns2(False), data + [rreq1, rreq2])
    assert fifo == data + [rreq1, rreq2]
    pq = delivery_order(ns2(True), data + [rreq1, rreq2])
    # behind the frame in the MAC, the newest control first (ns-2 enqueHead), then data
    assert pq == [data[0], rreq2, rreq1] + data[1:]
    m = ns2(True, queue_frames=4)
    order = delivery_order(m, data + [rreq1])
    assert order == [data[0], rreq1] + data[1:3]  # data[3], at the tail, was dropped
    assert m.counters["queue_drops"] == 1


def test_fixed_rate_chain():
    assert FixedRate(11.0, 8).chain(0.0, 3) == (11.0,) * 8


def test_minstrel_chain_shape_and_sampling():
    rates = (1.0, 2.0, 5.5, 11.0)
    mr = Minstrel(rates, 8, lambda r: 200 + 12000 / r, random.Random(1))
    chains = [mr.chain(0.0, 5) for _ in range(100)]
    assert all(len(c) == 8 for c in chains)
    assert chains[1] == (1.0,) * 8  # no statistics yet: the lowest rate throughout
    samples = [c for c in chains if c != (1.0,) * 8]
    assert 8 <= len(samples) <= 11  # one frame in ten looks around
    assert all(c[0] > 1.0 for c in samples)  # faster samples go first


def drive_minstrel(distance: float, seconds: float) -> RealisticMedium:
    prof = B.with_(rate_control="minstrel", shadowing_sigma_db=0.0, coherence_time_s=0.0)
    m = RealisticMedium(World(Static([(0, 0), (distance, 0)]), 2), prof, seed=4)
    run_events(m, seconds, {1: 2})
    return m


def test_minstrel_converges_up_on_a_good_link():
    m = drive_minstrel(40.0, 3.0)
    assert m.rates[0].best_rate(3.0, 1) == 11.0
    assert m.counters["unicast_failed"] == 0


def test_minstrel_learns_each_senders_link_to_a_shared_destination():
    """A relay hears a near sender and a far one: each transmitter keeps its own
    statistics (mac80211's per-station rate control), so the near one settles at 11
    Mbit/s while the far one stays low; one controller per destination would give both
    the same rate."""
    prof = B.with_(rate_control="minstrel", shadowing_sigma_db=0.0, coherence_time_s=0.0)
    world = World(Static([(0, 0), (40.0, 0), (-190.0, 0)]), 3)
    m = RealisticMedium(world, prof, seed=4)
    run_events(m, 4.0, {2: 1, 3: 1})
    assert m.rates[1].best_rate(4.0, 0) == 11.0
    assert m.rates[2].best_rate(4.0, 0) in (1.0, 2.0)
    use = m.stats()["rate_use"]
    assert set(use) == {"n2>n1", "n3>n1"}
    near, far = use["n2>n1"], use["n3>n1"]
    assert max(near, key=lambda r: near[r][1]) == "11"  # most acked frames at 11 Mbit/s
    assert max(far, key=lambda r: far[r][1]) in ("1", "2")
    # every attempt is counted once: acked, retried or the last one of a failed frame
    c = m.counters
    attempts = sum(a for link in use.values() for a, _ in link.values())
    acked = sum(ok for link in use.values() for _, ok in link.values())
    assert acked == c["unicast_ok"]
    assert attempts == c["unicast_ok"] + c["retries"] + c["unicast_failed"]


def test_minstrel_converges_down_on_a_lossy_link():
    """At 190 m (mean SNR 1.2 dB, Nakagami fading) 11 and 5.5 Mbit/s lose nearly every
    frame, 1 Mbit/s most get through: the controller settles low and the flow keeps
    going, where a fixed 11 Mbit/s carries (almost) nothing."""
    m = drive_minstrel(190.0, 4.0)
    best = m.rates[0].best_rate(4.0, 1)
    assert best in (1.0, 2.0)
    assert m.rates[0].throughput(1, best) > m.rates[0].throughput(1, 11.0)
    fixed = RealisticMedium(
        World(Static([(0, 0), (190.0, 0)]), 2),
        B.with_(shadowing_sigma_db=0.0, coherence_time_s=0.0),
        seed=4,
    )
    d_fixed, _ = run_events(fixed, 4.0, {1: 2})
    assert m.counters["delivered"] > 5 * len(d_fixed)
