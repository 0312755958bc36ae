"""TCP-BuS over DSR on the fake-clock simulator (Kim, Toh & Choi section IV): the chain.

1-2-3-4-5 carries a TCP flow 1->5; :func:`setup` breaks link 3-4 (with a detour 3-6-5
unless ``detour=False``), :func:`break_and_send` sends into the break and
:func:`lose_first_erdn` loses the first ERDN at a node. Shared by
tests/daemon/test_bus_dsr.py, test_bus_events.py and test_dsr_held_links.py.
"""

from __future__ import annotations

import struct

from manetkit.daemon.wire import dsr, ipv4
from manetkit.daemon.wire import manet_ext as mx
from tests.daemon.dsrutil import A, chain_links, dsr_net

FLOW = {"dst": "10.42.0.5", "src": "10.42.0.1", "sport": 40000, "dport": 4242}


def seg(src, dst, sport, dport, seq, ack=0, payload=b"x" * 100):
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, 0x18, 65535, 0, 0)
    return ipv4.build(src, dst, ipv4.PROTO_TCP, tcp + payload)


def data(seq):
    return seg(A(1), A(5), 40000, 4242, seq)


def seqs(packets):
    return [struct.unpack_from("!I", p, 24)[0] for p in packets]


def notices(frame):
    _, hdr = dsr.parse(frame.packet)
    return [
        mx.from_dsr(p.option.type, p.option.data)
        for p in hdr.options
        if isinstance(p.option, dsr.UnknownOption)
    ]


def frames_with(sim, sender, kind):
    return [
        f
        for f in sim.frames
        if f.sender == A(sender)
        and any(isinstance(n, mx.Notice) and n.kind == kind for n in notices(f))
    ]


def setup(bus=True, detour=True, nodes=6, **cfg):
    """The flow 1->5 running, then link 3-4 cut (with ``detour``: 3-6-5 appears).
    ``cfg``: DSR settings of every node."""
    sim = dsr_net(nodes, chain_links(5), bus=bus, **cfg)
    sim.send(A(1), data(1000))
    sim.run(duration=1.0)
    # The receiver's ACK goes back through the pivot: its Last_ACK becomes 1100.
    sim.send(A(5), seg(A(5), A(1), 4242, 40000, 77, ack=1100, payload=b""))
    sim.run(duration=0.5)
    assert seqs(sim.delivered[A(5)]) == [1000]
    sim.unlink(A(3), A(4))
    if detour:
        sim.link(A(3), A(6))
        sim.link(A(6), A(5))
    return sim


def break_and_send(sim, detour_after=None):
    t0 = sim.now
    sim.send(A(1), data(1100))
    sim.send(A(1), data(1200))
    # The ERDN passes node 2 at t0 + 4 ms (1 ms per hop, 1 ms for the 802.11 failure);
    # this segment, sent before node 1 heard of the break, meets it there.
    sim.run(until=t0 + 0.0035)
    sim.send(A(1), data(1300))
    if detour_after is not None:
        # The detour appears later: the pivot's first discoveries find nothing.
        sim.run(until=t0 + detour_after)
        sim.link(A(3), A(6))
        sim.link(A(6), A(5))
    sim.run(duration=2.0)


def lose_first_erdn(sim, node: int) -> list[float]:
    """The first ERDN to reach ``node`` is lost there (e.g. its queue overflowed), with no
    802.11 failure to tell the sender; returns the times it was lost (one, once it was)."""
    eng = sim.engines[A(node)]
    real = eng.receive_frame
    lost: list[float] = []

    def lossy(now, packet, src_mac=None, rssi=None):
        if not lost and mx.DSR_OPT_ERDN.to_bytes(1, "big") + b"\x1a" in packet:
            lost.append(now)
            return
        real(now, packet, src_mac, rssi)

    eng.receive_frame = lossy
    return lost
