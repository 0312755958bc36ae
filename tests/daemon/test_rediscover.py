"""rediscover (the event socket's ``discover`` command): a probe asks for the route now.

Holland & Vaidya section 6: an ELFN probe exists to test and re-find the route, so a
pending discovery must not wait out its back-off (RFC 4728 8.2.1, RFC 3561 6.3), but
the request rate stays bounded.
"""

from __future__ import annotations

import pytest

from manetkit.daemon.engines.aodv import AodvConfig
from manetkit.daemon.wire import aodv, dsr
from tests.daemon import aodvsim
from tests.daemon.dsrutil import A, chain_links, dsr_net, first, paths, udp_packet


def _dsr_requests(sim, node) -> list[float]:
    return [
        f.time
        for f in sim.frames_from(A(node))
        if f.next_hop is None and first(f.packet, dsr.RouteRequest) is not None
    ]


def test_dsr_pending_discovery_asks_now_instead_of_after_its_back_off():
    sim = dsr_net(4, chain_links(4))
    sim.unlink(A(2), A(3))
    sim.send(A(1), udp_packet(A(1), A(4)))
    sim.run(until=3.0)  # requests at 0, +30 ms, then back-off 0.5, 1, 2 s: next at 3.53
    before = _dsr_requests(sim, 1)
    assert before and max(before) < 3.0 and not sim.delivered[A(4)]
    sim.link(A(2), A(3))  # no LinkUp at the source: only the probe can tell it
    assert sim.rediscover(A(1), A(4)) is True
    assert _dsr_requests(sim, 1)[-1] == 3.0
    # Rate limit: not again within NonpropRequestTimeout (30 ms).
    assert sim.rediscover(A(1), A(4)) is False
    assert len(_dsr_requests(sim, 1)) == len(before) + 1
    sim.run(until=3.2)
    assert len(sim.delivered[A(4)]) == 1  # the route came back long before 3.53 s
    assert sim.engines[A(1)].counters["rediscover-ratelimited"] == 1


def test_dsr_rediscover_with_a_route_does_nothing_and_without_one_asks():
    sim = dsr_net(3, chain_links(3))
    # No route, no discovery: a propagating request at once, and the reply is cached.
    assert sim.rediscover(A(1), A(3)) is True
    assert _dsr_requests(sim, 1) == [0.0]
    sim.run(duration=1.0)
    assert (1, 2, 3) in paths(sim, 1)
    n = len(_dsr_requests(sim, 1))
    assert sim.rediscover(A(1), A(3)) is False  # the cached route is fine
    assert sim.rediscover(A(1), A(1)) is False
    assert len(_dsr_requests(sim, 1)) == n


def test_dsr_rediscover_after_the_gap_asks_again():
    sim = dsr_net(4, chain_links(4))
    sim.unlink(A(2), A(3))
    sim.send(A(1), udp_packet(A(1), A(4)))
    sim.run(until=2.0)
    assert sim.rediscover(A(1), A(4)) is True
    sim.run(until=2.031)
    assert sim.rediscover(A(1), A(4)) is True
    assert _dsr_requests(sim, 1)[-2:] == [2.0, 2.031]
    # Extra requests: the back-off's own next one (1.53 + 2 s) still goes at 3.53.
    sim.run(until=3.6)
    assert _dsr_requests(sim, 1)[-1] == pytest.approx(3.53)


def _rreqs(sim, node) -> list[tuple[float, int]]:
    return [
        (f.time, m.rreq_id)
        for f, m in aodvsim.control(sim, node)
        if isinstance(m, aodv.RREQ) and m.orig == node
    ]


def test_aodv_pending_discovery_sends_a_new_rreq_now():
    nodes, links = aodvsim.chain(4)
    sim = aodvsim.network(nodes, links)
    src, dst = nodes[0], nodes[3]
    sim.unlink(nodes[1], nodes[2])
    sim.send(src, aodvsim.data(src, dst, 1))
    sim.run(until=1.0)
    before = _rreqs(sim, src)
    assert before and not sim.delivered[dst]
    sim.link(nodes[1], nodes[2])
    assert sim.rediscover(src, dst) is True
    after = _rreqs(sim, src)
    assert len(after) == len(before) + 1
    t, rid = after[-1]
    assert t == 1.0 and rid not in {i for _, i in before}  # a new RREQ ID (6.3)
    sim.run(until=1.5)
    assert [aodvsim.payload_id(p) for p in sim.delivered[dst]] == [1]
    # The route is valid now: nothing to ask for.
    assert sim.rediscover(src, dst) is False


def test_aodv_rediscover_respects_rreq_ratelimit():
    nodes, links = aodvsim.chain(3)
    sim = aodvsim.network(nodes, links, AodvConfig(hellos=False, rreq_ratelimit=3))
    src = nodes[0]
    lost = aodvsim.addr(9)  # not in the network: the discovery stays pending
    sim.send(src, aodvsim.data(src, lost, 1))
    answers = [sim.rediscover(src, lost) for _ in range(5)]
    assert answers == [True, True, False, False, False]  # 1 RREQ from send + 2
    assert len(_rreqs(sim, src)) == 3
    sim.run(until=1.01)  # the oldest ones aged out of the last second
    assert sim.rediscover(src, lost) is True


def test_aodv_rediscover_does_not_postpone_the_discoverys_next_step():
    nodes, links = aodvsim.chain(3)
    sim = aodvsim.network(nodes, links)
    src, lost = nodes[0], aodvsim.addr(9)
    sim.send(src, aodvsim.data(src, lost, 1))
    sim.run(until=0.01)
    d = sim.engines[src].discovery.searches[lost]
    due = d.deadline
    assert due > sim.now + 0.005  # a ring wait still running
    sim.now = due - 0.005
    assert sim.rediscover(src, lost) is True
    assert d.deadline == due and sim.engines[src].get_timer() <= due
