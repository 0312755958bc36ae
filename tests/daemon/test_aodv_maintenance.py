"""AODV route maintenance on a fake clock: RERR, local repair, hellos, RREP-ACK (6.8-6.12)."""

from __future__ import annotations

from manetkit.daemon.engines.aodv import AodvConfig
from manetkit.daemon.engines.aodv.routetable import INVALID, REPAIRING, VALID
from manetkit.daemon.engines.base import LinkDown, TxFailed
from manetkit.daemon.wire import aodv, ipv4
from tests.daemon.aodvsim import addr, chain, control, data, loop_free, network, payload_id

N1, N2, N3, N4, N5, N6 = (addr(i) for i in range(1, 7))


def tcp(src, dst, seq: int) -> bytes:
    seg = (5000).to_bytes(2, "big") + (80).to_bytes(2, "big") + seq.to_bytes(4, "big")
    seg += b"\0" * 4 + b"\x50\x10\xff\xff" + b"\0" * 4 + b"payload"
    return ipv4.build(src, dst, ipv4.PROTO_TCP, seg)


def settled(n: int = 5, **cfg):
    nodes, links = chain(n)
    sim = network(nodes, links, **cfg)
    sim.send(N1, data(N1, nodes[-1], 0))
    sim.run(duration=2.0)
    assert len(sim.delivered[nodes[-1]]) == 1
    return sim, nodes


def test_link_break_sends_rerr_to_precursors_and_invalidates_upstream():
    sim, nodes = settled(5, local_repair=False)
    seq = sim.engines[N3].route(N5).seq
    before = len(sim.frames)
    # The 802.11 MAC gives up on a TCP segment n3 forwards to n4: a break (6.11 i).
    sim.unlink(N3, N4)
    sim.send(N1, tcp(N1, N5, 12345))
    sim.run(duration=0.5)
    rerrs = [(f, m) for f, m in control(sim) if isinstance(m, aodv.RERR)]
    rerrs = [(f, m) for f, m in rerrs if f in sim.frames[before:]]
    # n3 unicasts to its only precursor n2, n2 to n1; seq bumped by one (6.11). n3 also
    # lists n4 itself (n2 used n3 -> n4 as a next hop; number unknown: 0).
    assert [(f.sender, f.next_hop) for f, _ in rerrs] == [(N3, N2), (N2, N1)]
    assert rerrs[0][1].dests == [(N4, 0), (N5, seq + 1)]
    assert rerrs[1][1].dests == [(N5, seq + 1)]
    assert not any(m.no_delete for _, m in rerrs)
    for node in (N1, N2, N3):
        r = sim.engines[node].route(N5)
        assert r.state is INVALID and r.seq == seq + 1
    # route-down at n3 carries the failed TCP segment's fields (for ELFN).
    down = [e for e in sim.events(N3, "route-down") if e["dst"] == str(N5)]
    assert down[0] | {} == {
        "dst": str(N5),
        "next_hop": str(N4),
        "reason": "tx-failed",
        "broken_link": [str(N3), str(N4)],
        "src": str(N1),
        "proto": 6,
        "sport": 5000,
        "dport": 80,
        "seq": 12345,
    }
    assert any(e["dst"] == str(N5) and e["reason"] == "rerr" for e in sim.events(N1, "route-down"))
    assert [d.reason for d in sim.dropped[N3]] == ["link-break"]
    assert not loop_free(sim)


def test_rerr_reaches_every_source_of_a_shared_link():
    # n1 and n6 both send to n5 through n3 - n4: n3 has two precursors -> broadcast.
    nodes = [addr(i) for i in range(1, 7)]
    links = [(N1, N2), (N2, N3), (N3, N4), (N4, N5), (N6, N3)]
    sim = network(nodes, links, local_repair=False)
    sim.send(N1, data(N1, N5, 0))
    sim.send(N6, data(N6, N5, 1))
    sim.run(duration=2.0)
    assert sim.engines[N3].route(N5).precursors == {N2, N6}
    sim.unlink(N3, N4)
    sim.link_event(N3, LinkDown(N4))
    sim.run(duration=0.5)
    f, m = next((f, m) for f, m in control(sim, N3) if isinstance(m, aodv.RERR))
    assert f.next_hop is None and f.packet[8] == 1  # broadcast, TTL 1
    for node in (N1, N2, N6):
        assert sim.engines[node].route(N5).state is INVALID
    # New data at n1 starts a new discovery, which now fails (partitioned): no-route.
    sim.send(N1, data(N1, N5, 2))
    sim.run(duration=30.0)
    assert "no-route" in [d.reason for d in sim.dropped[N1]]


def test_source_rebuffers_its_failed_packet_and_rediscovers():
    # n1 - n2 - n3 and n1 - n4 - n5 - n3: the short path breaks at n1 itself.
    nodes = [addr(i) for i in range(1, 6)]
    sim = network(nodes, [(N1, N2), (N2, N3), (N1, N4), (N4, N5), (N5, N3)])
    sim.send(N1, data(N1, N3, 0))
    sim.run(duration=2.0)
    assert sim.engines[N1].route(N3).next_hop == N2
    sim.unlink(N1, N2)
    sim.send(N1, data(N1, N3, 1))  # TxFailed comes back with the packet
    sim.run(duration=2.0)
    r = sim.engines[N1].route(N3)
    assert r.state is VALID and r.next_hop == N4 and r.hops == 3
    assert [payload_id(p) for p in sim.delivered[N3]] == [0, 1]
    assert not sim.dropped[N1]


def test_local_repair_near_the_destination():
    # n3's link to n4 breaks; n3 - n6 - n4 is another way. n3 repairs; n1 never knows.
    nodes = [addr(i) for i in range(1, 7)]
    links = [(N1, N2), (N2, N3), (N3, N4), (N4, N5), (N3, N6), (N6, N4)]
    sim = network(nodes, links)
    sim.send(N1, data(N1, N5, 0))
    sim.run(duration=2.0)
    assert sim.engines[N3].route(N5).next_hop == N4
    old_seq = sim.engines[N3].route(N5).seq
    sim.unlink(N3, N4)
    for i in range(1, 4):
        sim.send(N1, data(N1, N5, i))
    sim.run(duration=0.0035)  # two hops to n3, one failed try to n4
    assert sim.engines[N3].route(N5).state is REPAIRING
    sim.run(duration=2.0)
    r3 = sim.engines[N3].route(N5)
    assert (r3.state, r3.next_hop, r3.hops) == (VALID, N6, 3)
    assert r3.seq >= old_seq + 1
    rreq = next(m for f, m in control(sim, N3) if isinstance(m, aodv.RREQ) and m.orig == N3)
    assert rreq.dest == N5 and rreq.dest_seq == old_seq + 1  # 6.12: number incremented
    # Nothing was lost, nothing reordered; upstream routes never went down.
    assert [payload_id(p) for p in sim.delivered[N5]] == [0, 1, 2, 3]
    assert sim.engines[N1].route(N5).state is VALID
    assert not [e for e in sim.events(N1, "route-down") if e["dst"] == str(N5)]
    # n4 itself (a neighbour, not repaired) is reported at once. The repaired route to
    # n5 is longer (3 > 2 hops): RERR with N to the precursor (6.12), which keeps its
    # route.
    rerr = [(f, m) for f, m in control(sim, N3) if isinstance(m, aodv.RERR)]
    assert [(f.next_hop, m.no_delete, [d for d, _ in m.dests]) for f, m in rerr] == [
        (N2, False, [N4]),
        (N2, True, [N5]),
    ]
    assert sim.engines[N2].route(N5).state is VALID
    assert sim.engines[N3].status()["counters"]["local-repairs"] == 1
    assert not loop_free(sim)


def test_failed_local_repair_reports_the_break():
    sim, nodes = settled(5)
    sim.unlink(N3, N4)  # no other way to n5
    sim.send(N1, data(N1, N5, 1))
    sim.run(duration=0.01)
    assert sim.engines[N3].route(N5).state is REPAIRING
    sim.run(duration=2.0)
    assert sim.engines[N3].route(N5).state is INVALID
    rerr = [(f, m) for f, m in control(sim, N3) if isinstance(m, aodv.RERR)]
    # n4 (the neighbour itself) is reported at once; n5 when the repair gives up.
    assert [(f.next_hop, m.no_delete, [d for d, _ in m.dests]) for f, m in rerr] == [
        (N2, False, [N4]),
        (N2, False, [N5]),
    ]
    for node in (N1, N2):
        assert sim.engines[node].route(N5).state is INVALID
    assert [d.reason for d in sim.dropped[N3]] == ["no-route"]
    assert sim.engines[N3].status()["counters"]["local-repairs-failed"] == 1


def _break_idle_route(**cfg):
    """n1 -> n5 over the chain carried one packet at ~0.65 s; n3's link to n4 breaks at
    4 s, when the route is still valid (RREP lifetime) but idle longer than
    ACTIVE_ROUTE_TIMEOUT (3 s)."""
    sim, nodes = settled(5, **cfg)
    sim.run(duration=2.0)
    assert sim.engines[N3].route(N5).state is VALID
    assert sim.engines[N3].route(N5).precursors == {N2}
    before = len(sim.frames)
    sim.unlink(N3, N4)
    sim.link_event(N3, LinkDown(N4))
    sim.run(duration=0.5)
    sent = [m for f, m in control(sim, N3) if f in sim.frames[before:]]
    return sim, sent


def test_idle_route_break_is_reported_not_repaired():
    # 6.11 (i) names breaks found while transmitting data: an idle route gets a RERR to
    # its precursors and no repair flood (a dense network's idle routes would each start
    # one at every break).
    sim, sent = _break_idle_route()
    assert not [m for m in sent if isinstance(m, aodv.RREQ)]
    rerr = [m for m in sent if isinstance(m, aodv.RERR)]
    assert rerr and N5 in [d for d, _ in rerr[0].dests] and not rerr[0].no_delete
    assert sim.engines[N3].route(N5).state is INVALID
    counters = sim.engines[N3].status()["counters"]
    assert counters["local-repairs-idle-skipped"] == 1
    assert "local-repairs-started" not in counters


def test_repair_idle_routes_repairs_them_too():
    sim, sent = _break_idle_route(repair_idle_routes=True)
    rreq = [m for m in sent if isinstance(m, aodv.RREQ)]
    assert rreq and rreq[0].orig == N3 and rreq[0].dest == N5
    assert sim.engines[N3].status()["counters"]["local-repairs-started"] == 1


def test_route_carrying_data_is_repaired_on_a_link_down():
    # Data forwarded within ACTIVE_ROUTE_TIMEOUT: a LinkDown (not a failed packet)
    # still starts a repair.
    sim, nodes = settled(5)
    sim.send(N1, data(N1, N5, 1))
    sim.run(duration=1.0)
    before = len(sim.frames)
    sim.unlink(N3, N4)
    sim.link_event(N3, LinkDown(N4))
    sim.run(duration=0.01)
    sent = [m for f, m in control(sim, N3) if f in sim.frames[before:]]
    assert [m.dest for m in sent if isinstance(m, aodv.RREQ)] == [N5]
    assert sim.engines[N3].route(N5).state is REPAIRING


def test_data_without_route_gets_rerr_to_the_sender():
    sim, nodes = settled(3)
    # n2 forgets everything (reboot): n1 still sends through it (6.11 ii).
    from manetkit.daemon.engines.aodv import AodvEngine
    from manetkit.daemon.neighbours import NeighbourTable

    sim.engines[N2] = AodvEngine(N2, AodvConfig(hellos=False), NeighbourTable())
    sim.send(N1, data(N1, N3, 1))
    sim.run(duration=0.1)
    assert [d.reason for d in sim.dropped[N2]] == ["no-route"]
    rerr = [(f, m) for f, m in control(sim, N2) if isinstance(m, aodv.RERR)]
    assert rerr and rerr[0][1].dests[0][0] == N3
    assert sim.engines[N1].route(N3).state is INVALID


def test_hellos_detect_a_silent_neighbour():
    nodes, links = chain(3)
    sim = network(nodes, links, AodvConfig(hellos=True, local_repair=False))
    sim.send(N1, data(N1, N3, 0))
    sim.run(duration=0.5)
    # Keep the route active so hellos flow (6.9: only on active routes).
    for i in range(1, 4):
        sim.send(N1, data(N1, N3, i))
        sim.run(duration=0.5)
    hellos = [
        (f, m) for f, m in control(sim, N2) if isinstance(m, aodv.RREP) and f.next_hop is None
    ]
    assert hellos and all(f.packet[8] == 1 and m.dest == N2 and m.hop_count == 0 for f, m in hellos)
    assert aodv.hello_interval_ms(hellos[0][1]) == 1000
    # n3 goes silent without any link-layer notice: after ALLOWED_HELLO_LOSS * HELLO_INTERVAL
    # (2 s) n2 declares it lost; one missed hello is not enough.
    sim.unlink(N2, N3)
    t0 = sim.now
    sim.run(duration=1.0)
    assert sim.engines[N2].route(N3).state is VALID
    sim.run(duration=1.5)
    assert sim.engines[N2].route(N3).state is INVALID
    lost = [e for e in sim.events(N2, "neighbour-down") if e["neighbour"] == str(N3)]
    assert lost and lost[0]["reason"] == "hello-loss"
    assert sim.now - t0 >= 2.0
    assert sim.engines[N1].route(N3).state is INVALID  # via RERR


def test_unidirectional_link_is_blacklisted():
    # n1 hears n2 but n2 cannot reach n1 (unidirectional). n3's RREP dies at n2 -> n1
    # (802.11 gives up), so n2 blacklists n1 and ignores its next RREQs (6.8).
    nodes, links = chain(3)
    sim = network(nodes, links)
    sim.adj[N2].discard(N1)
    sim.send(N1, data(N1, N3, 0))
    sim.run(duration=1.0)
    c2 = sim.engines[N2].status()
    assert str(N1) in c2["blacklist"]
    assert c2["counters"]["rreq-blacklisted"] >= 1
    assert not sim.delivered[N3]


def test_missing_rrep_ack_blacklists_the_neighbour():
    nodes, links = chain(3)
    # Healthy chain: every RREP is acknowledged, nobody blacklisted.
    sim = network(nodes, links, rrep_ack=True)
    sim.send(N1, data(N1, N3, 0))
    sim.run(duration=1.0)
    acks = [(f, m) for f, m in control(sim) if isinstance(m, aodv.RREPAck)]
    assert [(f.sender, f.next_hop) for f, _ in acks] == [(N2, N3), (N1, N2)]
    assert not sim.engines[N2].status()["blacklist"]
    # n1's acknowledgments are lost: after NEXT_HOP_WAIT n2 blacklists n1.
    sim = network(nodes, links, rrep_ack=True)
    sim.frame_filter = lambda f: not (f.sender == N1 and isinstance(_msg(f), aodv.RREPAck))
    sim.send(N1, data(N1, N3, 0))
    sim.run(duration=1.0)
    assert str(N1) in sim.engines[N2].status()["blacklist"]
    assert sim.engines[N2].status()["counters"]["blacklisted"] == 1


def _msg(frame):
    return aodv.parse_control(frame.packet)[1] if aodv.is_control(frame.packet) else None


def test_rrep_tx_failure_blacklists_without_acks():
    nodes, links = chain(3)
    sim = network(nodes, links)
    rrep = aodv.control_packet(aodv.RREP(0, N2, 1, N1, 3000), N2, N1, 64)
    sim.link_event(N2, TxFailed(N1, rrep))
    assert str(N1) in sim.engines[N2].status()["blacklist"]
