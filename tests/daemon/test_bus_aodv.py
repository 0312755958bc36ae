"""TCP-BuS over AODV (Kim, Toh & Choi section IV) on the simulator with a fake clock.

1-2-3-4-5 carries a TCP flow 1->5; link 3-4 breaks and a detour 3-6-5 appears. Node 3
is the pivot: ERDN (a RERR with N and extension 251) to 1, local repair (RFC 3561
6.12), ERSN (extension 252) with the receiver's Last_ACK, and the held packets go on.
"""

from __future__ import annotations

import struct

from manetkit.daemon.wire import aodv, ipv4
from manetkit.daemon.wire import manet_ext as mx
from tests.daemon.aodvsim import addr, chain, control, network

N1, N5 = addr(1), addr(5)
FLOW = {"dst": "10.42.0.5", "src": "10.42.0.1", "sport": 40000, "dport": 4242}


def seg(src, dst, sport, dport, seq, ack=0, payload=b"x" * 100):
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, 0x18, 65535, 0, 0)
    return ipv4.build(src, dst, ipv4.PROTO_TCP, tcp + payload)


def data(seq):
    return seg(N1, N5, 40000, 4242, seq)


def seqs(packets):
    return [struct.unpack_from("!I", p, 24)[0] for p in packets if p[9] == 6]


def notices(sim, sender, kind):
    out = []
    for f, m in control(sim, addr(sender)):
        for t, d in m.extensions:
            item = mx.from_aodv(t, d)
            if isinstance(item, mx.Notice) and item.kind == kind:
                out.append((f, m, item))
    return out


def run(bus=True, lose_first=None):
    nodes, links = chain(6)
    links = links[:4]  # 1-2-3-4-5; node 6 joins later
    sim = network(nodes, links, bus=bus)
    if lose_first is not None:
        eng2 = sim.engines[addr(2)]
        real = eng2.receive_frame
        lost: list[float] = []

        def lossy(now, packet, src_mac=None, rssi=None):
            # The first such notice is lost at node 2 (queue overflow): no 802.11 failure.
            if not lost and bytes((lose_first, 24)) in packet and aodv.is_control(packet):
                lost.append(now)
                return
            real(now, packet, src_mac, rssi)

        eng2.receive_frame = lossy
        sim.lost = lost
    sim.send(N1, data(1000))
    sim.run(duration=1.0)
    sim.send(N5, seg(N5, N1, 4242, 40000, 77, ack=1100, payload=b""))
    sim.run(duration=0.5)
    assert seqs(sim.delivered[N5]) == [1000]
    sim.unlink(addr(3), addr(4))
    sim.link(addr(3), addr(6))
    sim.link(addr(6), N5)
    t0 = sim.now
    sim.send(N1, data(1100))
    sim.send(N1, data(1200))
    sim.run(until=t0 + 0.0035)  # the ERDN reaches node 2 at t0 + 4 ms
    sim.send(N1, data(1300))
    sim.run(duration=2.0)
    return sim


def test_erdn_hold_local_repair_ersn_release_in_order():
    sim = run()
    assert sim.events(N1, "erdn") == [FLOW | {"seq": 1100, "pivot": "10.42.0.3"}]
    assert sim.events(N1, "ersn") == [FLOW | {"last_ack": 1100, "pivot": "10.42.0.3"}]
    assert seqs(sim.delivered[N5]) == [1000, 1100, 1200, 1300]
    # On the air: RERRs with N (plain AODV nodes keep their routes), relayed 3 -> 2 -> 1.
    for kind in (mx.KIND_ERDN, mx.KIND_ERSN):
        for sender, to in ((3, 2), (2, 1)):
            ((f, m, n),) = notices(sim, sender, kind)
            assert isinstance(m, aodv.RERR) and m.no_delete and f.next_hop == addr(to)
            assert n.pivot == addr(3) and m.dests[0][0] == N5
    # Node 2 held 1300 from the ERDN until the ERSN.
    ((erdn2, _, _),) = notices(sim, 2, mx.KIND_ERDN)
    ((ersn2, _, _),) = notices(sim, 2, mx.KIND_ERSN)
    fwd = [
        f.time
        for f in sim.frames
        if f.sender == addr(2) and f.packet[9] == 6 and seqs([f.packet]) == [1300]
    ]
    assert fwd and all(t >= ersn2.time for t in fwd)
    assert sim.engines[addr(2)].status()["bus"]["counters"]["held"] == 1
    assert sim.engines[addr(3)].counters["local-repairs"] == 1
    # Every hop acknowledged; nothing pending; nothing dropped on the way.
    for i in (1, 2, 3):
        assert not sim.engines[addr(i)].bus.state.pending
    assert not [d for i in (1, 2, 3) for d in sim.dropped[addr(i)]]


def test_ersn_retransmitted_until_acked_when_the_first_copy_is_lost():
    sim = run(lose_first=mx.AODV_EXT_ERSN)
    assert len(sim.lost) == 1
    sent = notices(sim, 3, mx.KIND_ERSN)
    assert len(sent) == 2 and abs(sent[1][0].time - sent[0][0].time - 0.2) < 1e-6
    # Node 2 kept holding until the retransmitted ERSN arrived, then released in order.
    fwd = [f.time for f in sim.frames if f.sender == addr(2) and seqs([f.packet]) == [1300]]
    assert fwd and fwd[0] > sent[1][0].time
    assert sim.events(N1, "ersn") == [FLOW | {"last_ack": 1100, "pivot": "10.42.0.3"}]
    assert seqs(sim.delivered[N5]) == [1000, 1100, 1200, 1300]
    assert not sim.engines[addr(3)].bus.state.pending


def test_bus_off_changes_nothing():
    sim = run(bus=False)
    assert not sim.events(N1, "erdn") and not sim.events(N1, "ersn")
    assert not notices(sim, 3, mx.KIND_ERDN)
    # Plain AODV local repair still buffers at the pivot; nobody upstream holds.
    assert sim.engines[addr(2)].status()["bus"]["counters"] == {}
    assert sorted(seqs(sim.delivered[N5])) == [1000, 1100, 1200, 1300]
