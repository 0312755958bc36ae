"""Loop freedom (RFC 3561 6.1): stale routes never send a packet round in circles.

Without destination sequence numbers, a node that lost its route would accept a reply
from an upstream node still holding the stale route through itself, and the two would
bounce packets until the TTL ran out. AODV's numbers forbid that; these tests build the
situations and check (a) the invariant along every next-hop chain, (b) no packet is ever
sent twice by one node, (c) no packet dies of TTL exhaustion.
"""

from __future__ import annotations

import random
from collections import Counter

from manetkit.daemon.engines.aodv.routetable import INVALID, VALID
from manetkit.daemon.wire import aodv
from tests.daemon.aodvsim import addr, chain, data, loop_free, network, payload_id

N1, N2, N3, N4, N5 = (addr(i) for i in range(1, 6))


def visits(sim) -> Counter:
    """(node, packet) -> how many times the packet passed through that node.

    A packet that comes back to a node arrives with a smaller TTL, so distinct TTLs per
    (node, packet) count visits; a retransmission after a MAC failure keeps its TTL.
    """
    ttls: dict = {}
    for f in sim.frames:
        if not aodv.is_control(f.packet) and len(f.packet) >= 32:
            key = (f.sender, f.packet[12:20], payload_id(f.packet))
            ttls.setdefault(key, set()).add(f.packet[8])
    return Counter({k: len(v) for k, v in ttls.items()})


def ttl_deaths(sim) -> int:
    return sum(1 for ds in sim.dropped.values() for d in ds if d.reason == "ttl-expired")


def test_lost_rerr_leaves_a_stale_route_that_is_never_used_backwards():
    nodes, links = chain(4)
    sim = network(nodes + [N5], links, local_repair=False)
    sim.send(N1, data(N1, N4, 0))
    sim.run(duration=2.0)
    stale_seq = sim.engines[N2].route(N4).seq
    # n3 - n4 breaks and n3's RERR is lost: n2 keeps a stale route to n4 through n3.
    sim.frame_filter = lambda f: not isinstance(_msg(f), aodv.RERR)
    sim.unlink(N3, N4)
    sim.send(N3, data(N3, N4, 1))  # n3's own packet hits the break
    sim.run(duration=0.5)
    assert sim.engines[N2].route(N4).state is VALID  # stale, seq s
    assert sim.engines[N3].route(N4).state is not VALID
    # n3 searches with seq s+1; n2's route (seq s) is not fresh enough to answer, so
    # n3 never points at n2 (a naive protocol would: n2 says "2 hops via n3").
    rreqs = [m for f in sim.frames_from(N3) if isinstance(m := _msg(f), aodv.RREQ) and m.orig == N3]
    assert rreqs and all(m.dest_seq == stale_seq + 1 for m in rreqs)
    for _ in range(20):
        sim.send(N1, data(N1, N4, 100 + _))
        sim.run(duration=0.3)
        r3 = sim.engines[N3].route(N4)
        assert r3 is None or r3.state is not VALID or r3.next_hop != N2
        assert not loop_free(sim)
    assert ttl_deaths(sim) == 0
    assert max(visits(sim).values()) == 1
    # n4 comes back through a new node n5: a fresh route with a newer number.
    sim.frame_filter = None
    sim.link(N3, N5)
    sim.link(N5, N4)
    # The first packet still follows n1's stale route; n3 drops it and its RERR (no
    # longer lost) invalidates n2's and n1's routes; the next one rediscovers.
    sim.send(N1, data(N1, N4, 999))
    sim.run(duration=1.0)
    assert sim.engines[N1].route(N4).state is INVALID
    sim.send(N1, data(N1, N4, 1000))
    sim.run(duration=5.0)
    assert 1000 in [payload_id(p) for p in sim.delivered[N4]]
    r1 = sim.engines[N1].route(N4)
    assert r1.state is VALID and r1.seq > stale_seq
    assert not loop_free(sim)
    assert ttl_deaths(sim) == 0
    assert max(visits(sim).values()) == 1


def test_expired_route_does_not_come_back_through_upstream():
    # n1 - n2 - n3; n2's route to n3 expires while n1's (refreshed later) does not yet;
    # n2 then asks for n3 with a bumped number, so n1 cannot answer with a route via n2.
    nodes, links = chain(3)
    sim = network(nodes, links)
    sim.send(N1, data(N1, N3, 0))
    sim.run(duration=1.0)
    e2 = sim.engines[N2]
    e2.route(N3).expires = sim.now + 0.01  # n2's lifetime ends first (as clocks drift)
    e2.deadline.lower(sim.now + 0.01)
    sim.unlink(N2, N3)
    sim.run(duration=0.1)
    assert e2.route(N3).state is INVALID
    assert sim.engines[N1].route(N3).state is VALID
    sim.send(N2, data(N2, N3, 1))
    sim.run(duration=2.0)
    r2 = e2.route(N3)
    assert r2.state is not VALID or r2.next_hop != N1
    assert not loop_free(sim)


def _msg(frame):
    return aodv.parse_control(frame.packet)[1] if aodv.is_control(frame.packet) else None


def test_random_topology_changes_never_loop():
    """Links among 7 nodes come and go, frames get lost, random flows run; the
    invariant holds at every check (each 20 ms) and no packet ever dies of TTL."""
    rng = random.Random(3561)
    nodes = [addr(i) for i in range(1, 8)]
    pairs = [(a, b) for i, a in enumerate(nodes) for b in nodes[i + 1 :]]
    sim = network(nodes, rng.sample(pairs, 9))
    sim.frame_filter = lambda f: rng.random() > 0.05
    sent = 0
    for step in range(100):
        a, b = rng.choice(pairs)
        if rng.random() < 0.5:
            sim.link(a, b)
        else:
            sim.unlink(a, b)
        for _ in range(3):
            s, d = rng.sample(nodes, 2)
            sim.send(s, data(s, d, sent))
            sent += 1
        for _ in range(10):
            sim.run(duration=0.02)
            problems = loop_free(sim)
            assert not problems, (step, problems)
    sim.frame_filter = None
    sim.run(duration=35.0)
    assert ttl_deaths(sim) == 0
    delivered = sum(len(v) for v in sim.delivered.values())
    assert delivered > sent * 0.8  # the network did carry traffic meanwhile
