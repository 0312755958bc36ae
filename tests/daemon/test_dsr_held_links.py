"""Links seen to fail are not re-learnt from stale source routes (RFC 4728 8.3 spirit).

1-2-3-4-5 carries a TCP flow 1->5; link 3-4 breaks with no detour. Packets node 1 sent
before the Route Error reached it still carry [1, 2, 3, 4, 5]; the pivot 3 must not
learn 3-4 back from them (the lab saw route-up [n3, n4, n5] and a premature ERSN).
"""

from __future__ import annotations

from manetkit.daemon.engines.base import LinkUp
from manetkit.daemon.wire import manet_ext as mx
from tests.daemon.dsrutil import A, paths, uses_link
from tests.daemon.enginesim import mac_of
from tests.helpers import busdsr
from tests.helpers.busdsr import data, frames_with, seqs


def setup(bus=True, **cfg):
    """1-2-3-4-5 with the flow running, link 3-4 cut and no detour."""
    return busdsr.setup(bus, detour=False, nodes=5, **cfg)


def break_and_send(sim, duration=0.2):
    """Two segments meet the break at node 3 (pivot); node 1 gets the Route Error."""
    sim.send(A(1), data(1100))
    sim.send(A(1), data(1200))
    sim.run(duration=duration)


def stale_frame(sim):
    """A data frame node 2 sent to node 3 over the old route, before the break."""
    return next(f.packet for f in sim.frames if f.sender == A(2) and f.next_hop == A(3))


def through_3_4(sim, node):
    return [p for p in paths(sim, node) if uses_link(p, 3, 4)]


def inject_stale(sim, pkt, after):
    sim.run(duration=after)  # past the per-route learning memo (0.1 s)
    sim.inject(A(3), pkt, mac_of(A(2)))
    sim.run(duration=0.01)


def test_stale_route_after_break_is_not_learnt_and_no_premature_ersn():
    sim = setup()
    pkt = stale_frame(sim)
    break_and_send(sim)
    assert sim.engines[A(3)].counters["bus-pivot"] == 1
    inject_stale(sim, pkt, 0.3)
    assert not through_3_4(sim, 3)
    assert not [e for e in sim.events(A(3), "route-up") if "10.42.0.4" in e["path"]]
    assert not frames_with(sim, 3, mx.KIND_ERSN)
    assert sim.engines[A(3)].counters["held-link-refused"] >= 1


def test_without_bus_the_stale_route_is_not_learnt_either():
    sim = setup(bus=False)
    pkt = stale_frame(sim)
    break_and_send(sim)
    inject_stale(sim, pkt, 0.3)
    assert not through_3_4(sim, 3)
    assert not sim.events(A(3), "route-up")
    # The source heard the Route Error: it holds the link too.
    assert not through_3_4(sim, 1)


def test_after_link_up_the_link_is_learnt_again_and_the_pivot_repairs():
    sim = setup()
    pkt = stale_frame(sim)
    break_and_send(sim)
    sim.link(A(3), A(4))
    sim.link_event(A(3), LinkUp(A(4)))
    inject_stale(sim, pkt, 0.3)
    assert (3, 4, 5) in paths(sim, 3)
    ups = [e for e in sim.events(A(3), "route-up") if e["dst"] == "10.42.0.5"]
    assert ups and ups[-1]["path"] == ["10.42.0.3", "10.42.0.4", "10.42.0.5"]
    assert frames_with(sim, 3, mx.KIND_ERSN)


def test_without_link_up_the_hold_time_ends_the_hold():
    sim = setup(bus=False, broken_link_hold_s=0.5)
    pkt = stale_frame(sim)
    break_and_send(sim, 0.5)
    sim.link(A(3), A(4))  # back, but link sensing (off here) says nothing
    inject_stale(sim, pkt, 0.2)
    assert (3, 4, 5) in paths(sim, 3)


def test_link_up_restarts_a_discovery_waiting_out_its_back_off():
    sim = setup(bus=False)
    break_and_send(sim)
    sim.send(A(1), data(1300))  # no route: node 1 rediscovers, nothing answers
    sim.run(duration=0.8)  # back-off running
    eng1 = sim.engines[A(1)]
    (d,) = eng1.discovery.searches.values()
    assert d.attempts >= 1 and d.next_at > sim.now + 0.1
    sent = eng1.counters["requests-sent"]
    t_up = sim.now
    sim.link(A(3), A(4))
    sim.link_event(A(1), LinkUp(A(2)))  # link sensing at the source saw a neighbour
    sim.link_event(A(3), LinkUp(A(4)))
    sim.run(duration=0.1)
    assert eng1.counters["requests-sent"] == sent + 1
    assert eng1.counters["discovery-restarted"] == 1
    ups = [e for e in sim.events(A(1), "route-up") if e["dst"] == "10.42.0.5"]
    assert ups and seqs(sim.delivered[A(5)])[-1] == 1300
    assert all(f.time < t_up + 0.1 for f in sim.frames if f.sender == A(1))
