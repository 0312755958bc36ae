"""A source whose route breaks asks for a fresh one at once (RFC 4728 8.2.1; Holland &
Vaidya section 5 on stale caches).

Lab finding (bench atra, rwp-30 seed 2, 20 m/s): when the direct link n24-n15 broke,
n24's cache still held routes to n15 learnt 13-38 s earlier; each TCP retransmission
(one RTO apart, doubling) took the next stale route, the Route Errors partly got lost,
and no Route Request went out for 22 s although a 2-hop route existed. Here: 1 talks to
5 directly, with a stale 1-2-5 cached; the direct link goes, 2-5 is gone too and its
Route Error is lost; the live route is 1-3-5.
"""

from __future__ import annotations

from manetkit.daemon.engines.base import LinkUp
from manetkit.daemon.wire import dsr
from tests.daemon.dsrutil import A, dsr_net, first, paths, udp_packet


def setup(**cfg):
    sim = dsr_net([1, 2, 3, 5], [(1, 2), (2, 5)], **{"rediscover_on_break": True, **cfg})
    sim.send(A(1), udp_packet(A(1), A(5), b"first", ident=1))
    sim.run(duration=1.0)  # discovery: 1-2-5
    assert len(sim.delivered[A(5)]) == 1
    sim.link(A(1), A(5))
    sim.link_event(A(1), LinkUp(A(5)))  # a direct neighbour: 1-5 preferred
    sim.send(A(1), udp_packet(A(1), A(5), b"direct", ident=2))
    sim.run(duration=20.0)  # the 1-2-5 route stays cached (RouteCacheTimeout 300 s)
    assert len(sim.delivered[A(5)]) == 2
    assert (1, 2, 5) in paths(sim, 1)
    # Everything moves: 1-5 and 2-5 are gone, 1-3-5 is the live route; 2's Route
    # Errors do not reach 1 (lost or rate-limited in the lab).
    sim.unlink(A(1), A(5))
    sim.unlink(A(2), A(5))
    sim.link(A(1), A(3))
    sim.link(A(3), A(5))
    sim.frame_filter = lambda f: (
        not (f.sender == A(2) and first(f.packet, dsr.RouteError) is not None)
    )
    return sim


def retransmissions(sim, n=3):
    """The source's packet and its retransmissions (a TCP sender's RTO, doubling)."""
    gap = 0.5
    for i in range(n):
        sim.send(A(1), udp_packet(A(1), A(5), b"again", ident=10 + i))
        sim.run(duration=gap)
        gap *= 2


def test_a_broken_route_makes_the_source_ask_at_once():
    sim = setup()
    asked = sim.engines[A(1)].counters["requests-sent"]
    retransmissions(sim)
    # The first packet fell on the stale route; the retransmissions went over 1-3-5.
    assert len(sim.delivered[A(5)]) == 2 + 2
    eng = sim.engines[A(1)]
    assert eng.counters["rediscover-on-break"] >= 1
    assert eng.counters["requests-sent"] > asked
    assert any(p[:3] == (1, 3, 5) for p in paths(sim, 1))


def test_without_it_every_retransmission_takes_the_stale_route():
    sim = setup(rediscover_on_break=False)
    asked = sim.engines[A(1)].counters["requests-sent"]
    retransmissions(sim)
    assert sim.engines[A(1)].counters["requests-sent"] == asked
    assert len(sim.delivered[A(5)]) == 2  # nothing got through


def test_at_most_one_request_per_request_period():
    sim = setup()
    eng = sim.engines[A(1)]
    for i in range(5):  # a window of packets meets the break at once
        sim.send(A(1), udp_packet(A(1), A(5), b"burst", ident=20 + i))
    sim.run(duration=0.2)
    assert eng.counters["rediscover-on-break"] == 1
