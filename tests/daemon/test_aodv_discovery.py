"""AODV route discovery on a fake clock (RFC 3561 6.3-6.7): no sockets, no sleeping."""

from __future__ import annotations

from manetkit.daemon.engines.aodv import AodvConfig
from manetkit.daemon.engines.aodv.routetable import VALID
from manetkit.daemon.wire import aodv
from tests.daemon.aodvsim import addr, chain, control, data, loop_free, network, payload_id

N1, N2, N3, N4, N5 = (addr(i) for i in range(1, 6))


def test_discovery_over_a_five_node_chain():
    nodes, links = chain(5)
    sim = network(nodes, links)
    for i in range(5):
        sim.send(N1, data(N1, N5, i))
    sim.run(duration=2.0)
    # Buffered packets were released in order once the route came up.
    assert [payload_id(p) for p in sim.delivered[N5]] == list(range(5))
    # Forward routes: hop counts count down along the chain, all with n5's number.
    n5_seq = sim.engines[N5].seq
    for i, node in enumerate(nodes[:4]):
        r = sim.engines[node].route(N5)
        assert r is not None and r.state is VALID
        assert (r.next_hop, r.hops, r.seq) == (nodes[i + 1], 4 - i, n5_seq)
    # Reverse routes towards n1 carry n1's number from its RREQ.
    n1_seq = sim.engines[N1].seq
    for i, node in enumerate(nodes[1:], start=1):
        r = sim.engines[node].route(N1)
        assert (r.next_hop, r.hops, r.seq) == (nodes[i - 1], i, n1_seq)
    # Precursors (6.7): each forwarder knows who uses it towards n5.
    assert sim.engines[N3].route(N5).precursors == {N2}
    assert sim.engines[N2].route(N5).precursors == {N1}
    assert sim.engines[N4].route(N1).precursors == {N5}
    up = sim.events(N1, "route-up")
    assert {"dst": str(N5), "next_hop": str(N2), "hops": 4, "seq": n5_seq} in up
    assert not loop_free(sim)


def test_expanding_ring_search_ttls():
    nodes, links = chain(5)
    sim = network(nodes, links)
    sim.send(N1, data(N1, N5, 0))
    sim.run(duration=3.0)
    rreqs = [(f, m) for f, m in control(sim, N1) if isinstance(m, aodv.RREQ)]
    ttls = [f.packet[8] for f, _ in rreqs]
    assert ttls == [1, 3, 5]  # 4 hops away: the third ring reaches n5
    # Each ring is a new RREQ with a new id and a new originator number (6.1, 6.3).
    assert len({m.rreq_id for _, m in rreqs}) == 3
    assert [m.orig_seq for _, m in rreqs] == sorted({m.orig_seq for _, m in rreqs})
    # Ring waits are RING_TRAVERSAL_TIME = 2 * NODE_TRAVERSAL_TIME * (TTL + TIMEOUT_BUFFER).
    gaps = [round(b.time - a.time, 3) for (a, _), (b, _) in zip(rreqs, rreqs[1:], strict=False)]
    assert gaps == [0.24, 0.4]
    assert payload_id(sim.delivered[N5][0]) == 0


def test_gives_up_after_retries_and_drops_as_no_route():
    nodes, links = chain(3)
    cfg = AodvConfig(hellos=False)
    sim = network(nodes, links, cfg)
    ghost = addr(99)
    sim.send(N1, data(N1, ghost, 0))
    sim.send(N1, data(N1, ghost, 1))
    sim.run(duration=40.0)
    ttls = [f.packet[8] for f, m in control(sim, N1) if isinstance(m, aodv.RREQ)]
    # 1, 3, 5, 7, then NET_DIAMETER with RREQ_RETRIES retries (6.4).
    assert ttls == [1, 3, 5, 7, 35, 35, 35]
    times = [f.time for f, m in control(sim, N1) if isinstance(m, aodv.RREQ)]
    ntt = cfg.net_traversal_time_ms / 1000
    assert round(times[5] - times[4], 3) == round(ntt, 3)
    assert round(times[6] - times[5], 3) == round(2 * ntt, 3)  # binary exponential backoff
    assert [d.reason for d in sim.dropped[N1]] == ["no-route", "no-route"]
    assert round(sim.now - times[6], 1) >= round(4 * ntt, 1)
    assert {"dst": str(ghost), "reason": "no-route"} in sim.events(N1, "route-down")
    assert sim.engines[N1].status()["counters"]["discoveries-failed"] == 1


def test_duplicate_rreqs_are_suppressed():
    # A diamond: n1 - n2 - n4, n1 - n3 - n4, n4 - n5. n4 hears n1's RREQ twice.
    nodes = [addr(i) for i in range(1, 6)]
    sim = network(nodes, [(N1, N2), (N1, N3), (N2, N4), (N3, N4), (N4, N5)])
    sim.send(N1, data(N1, N5, 0))
    sim.run(duration=2.0)
    st4 = sim.engines[N4].status()["counters"]
    assert st4["rreq-duplicate"] >= 1
    # n4 rebroadcast each RREQ id once, however many copies it heard.
    ids = [m.rreq_id for _, m in control(sim, N4) if isinstance(m, aodv.RREQ)]
    assert len(ids) == len(set(ids))
    assert payload_id(sim.delivered[N5][0]) == 0
    assert sim.engines[N1].route(N5).hops == 3


def test_intermediate_node_replies_from_a_fresh_route_and_gratuitously():
    nodes, links = chain(5)
    sim = network(nodes, links, gratuitous_rrep=True)
    sim.send(N2, data(N2, N5, 0))  # n2 learns n5; n3, n4 hold fresh routes to n5 too
    sim.run(duration=2.0)
    before = len(sim.frames)
    sim.send(N1, data(N1, N5, 1))
    sim.run(duration=2.0)
    new = [
        aodv.parse_control(f.packet)[1] for f in sim.frames[before:] if aodv.is_control(f.packet)
    ]
    rreps = [m for m in new if isinstance(m, aodv.RREP)]
    # n2 (n1's neighbour) answered at once from its route: n5 never heard the RREQ.
    assert not any(isinstance(m, aodv.RREQ) and m.hop_count >= 1 for m in new)
    assert rreps[0].dest == N5 and rreps[0].hop_count == 3
    assert sim.engines[N2].status()["counters"]["rrep-sent-intermediate"] == 1
    # The gratuitous RREP (G flag) gave n5 a route back to n1.
    assert sim.engines[N2].status()["counters"]["rrep-sent-gratuitous"] == 1
    r = sim.engines[N5].route(N1)
    assert r is not None and r.state is VALID and r.hops == 4 and r.next_hop == N4
    assert [payload_id(p) for p in sim.delivered[N5]] == [0, 1]
    assert not loop_free(sim)


def test_destination_only_flag_forces_the_destination_to_answer():
    nodes, links = chain(4)
    sim = network(nodes, links, destination_only=True)
    sim.send(N2, data(N2, N4, 0))
    sim.run(duration=2.0)
    sim.send(N1, data(N1, N4, 1))
    sim.run(duration=2.0)
    assert sim.engines[N2].status()["counters"].get("rrep-sent-intermediate", 0) == 0
    assert sim.engines[N4].status()["counters"]["rrep-sent"] == 2
    assert [payload_id(p) for p in sim.delivered[N4]] == [0, 1]


def test_data_refreshes_route_lifetime_and_idle_routes_expire():
    nodes, links = chain(3)
    sim = network(nodes, links)
    sim.send(N1, data(N1, N3, 0))
    sim.run(duration=1.0)
    assert sim.engines[N1].route(N3).state is VALID
    discovery_rreqs = len([m for _, m in control(sim, N1) if isinstance(m, aodv.RREQ)])
    # Keep using it every second for 10 s: ACTIVE_ROUTE_TIMEOUT is 3 s, yet it stays up.
    for i in range(1, 11):
        sim.send(N1, data(N1, N3, i))
        sim.run(duration=1.0)
        assert sim.engines[N1].route(N3).state is VALID
        assert sim.engines[N2].route(N3).state is VALID
    rreqs = [m for _, m in control(sim, N1) if isinstance(m, aodv.RREQ)]
    assert len(rreqs) == discovery_rreqs  # never rediscovered
    # Idle: the lifetime runs out (n3's RREP lifetime at n1 is MY_ROUTE_TIMEOUT, data
    # refreshes it to ACTIVE_ROUTE_TIMEOUT), then the entry is invalid, number bumped.
    seq = sim.engines[N1].route(N3).seq
    sim.run(duration=3.5)
    r = sim.engines[N1].route(N3)
    assert r.state == "invalid" and r.seq == seq + 1
    assert sim.engines[N2].route(N3).state == "invalid"
    assert not sim.events(N1, "route-down")  # expiry is silent
    # ... and deleted after DELETE_PERIOD (5 * 3 s).
    sim.run(duration=15.5)
    assert sim.engines[N1].route(N3) is None
    assert [payload_id(p) for p in sim.delivered[N3]] == list(range(11))


def test_sequence_number_freshness_stale_rrep_ignored():
    nodes, links = chain(3)
    sim = network(nodes, links)
    sim.send(N1, data(N1, N3, 0))
    sim.run(duration=1.0)
    r = sim.engines[N2].route(N3)
    seq, hops = r.seq, r.hops
    # A RREP from n1's side claiming an older number for n3, and one with the same
    # number but more hops: both ignored (6.2), and not forwarded.
    for m in (
        aodv.RREP(0, N3, seq - 1, N1, 3000),
        aodv.RREP(3, N3, seq, N1, 3000),
    ):
        before = len(sim.frames)
        sim.inject(N2, aodv.control_packet(m, N1, N2, 64), src_mac=b"\x02\x00" + N1.packed)
        r = sim.engines[N2].route(N3)
        assert (r.next_hop, r.seq, r.hops) == (N3, seq, hops)
        assert not [f for f in sim.frames[before:] if aodv.is_control(f.packet)]
    assert sim.engines[N2].status()["counters"]["rrep-stale"] == 2
    # A newer number wins even with more hops.
    sim.inject(N2, aodv.control_packet(aodv.RREP(5, N3, seq + 1, N1, 3000), N1, N2, 64))
    r = sim.engines[N2].route(N3)
    assert (r.next_hop, r.seq, r.hops) == (N1, seq + 1, 6)


def test_send_buffer_timeout_and_full():
    nodes, links = chain(2)
    sim = network(nodes, links, send_buffer_packets=3, send_buffer_timeout_s=1.0)
    ghost = addr(77)
    for i in range(4):
        sim.send(N1, data(N1, ghost, i))
    assert [d.reason for d in sim.dropped[N1]] == ["send-buffer-full"]
    sim.run(duration=1.5)
    assert [d.reason for d in sim.dropped[N1]] == ["send-buffer-full"] + ["send-buffer-timeout"] * 3
    assert sim.engines[N1].status()["counters"]["drop-send-buffer-timeout"] == 3
