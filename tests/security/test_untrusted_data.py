"""What unsigned data may do to the engines (docs/security.md "Unsigned data"), on a
fake clock.

With authentication required the shell passes ``trust_data=False``: a DSR packet whose
options are only a Source Route and padding is never signed, so whoever sent it, it is
forwarded or delivered but teaches nothing (no neighbour binding, no cached route, no
gratuitous reply, no salvage). Each attack is shown working with ``trust_data=True``
(auth off, RFC 4728's "learn from every packet") and failing without it. Data from the
radio carrying the node's own source address is dropped and counted; AODV discoveries
start only for packets that wait and are bounded.
"""

from __future__ import annotations

from ipaddress import IPv4Address

import pytest

from manetkit.daemon.engines.aodv import AodvConfig, AodvEngine
from manetkit.daemon.engines.aodv.discovery import MAX_SEARCHES
from manetkit.daemon.engines.base import Deliver, Dropped, SendFrame
from manetkit.daemon.engines.dsr import DsrConfig, DsrEngine
from manetkit.daemon.engines.smr import SmrConfig, SmrEngine
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.wire import dsr, ipv4
from tests.daemon.dsrutil import A, paths, udp_packet, uses_link
from tests.daemon.enginesim import Sim

ROGUE_MAC = bytes.fromhex("02000000aa99")


def data(src: int, dst: int, hops: list[int], segments_left: int, *extra: dsr.Option) -> bytes:
    """A UDP packet from ``src`` to ``dst`` over ``hops`` as it is on the air."""
    inner = ipv4.udp(5000, 6000, b"x", A(src), A(dst))
    sr = dsr.SourceRoute(tuple(A(h) for h in hops), segments_left)
    return dsr.encapsulate(dsr.IPFields(A(src), A(dst)), [sr, *extra], ipv4.PROTO_UDP, inner)


def drain(eng) -> list:
    return list(iter(eng.next_event, None))


ENGINES = {
    "dsr": lambda a, trust: DsrEngine(a, DsrConfig(seed=1), NeighbourTable(), trust_data=trust),
    "smr": lambda a, trust: SmrEngine(a, SmrConfig(seed=1), NeighbourTable(), trust_data=trust),
}


@pytest.mark.parametrize("make", ENGINES.values(), ids=ENGINES.keys())
def test_a_forged_source_route_binds_and_caches_only_when_data_is_trusted(make):
    """The black hole: 'n3' sends n1 a packet over no hop from the rogue's MAC. Trusted
    (auth off), n1 maps n3 to the rogue's MAC and caches n1 -> n3 as one hop."""
    forged = data(3, 1, [], 0)
    open_ = make(A(1), True)
    open_.receive_frame(1.0, forged, ROGUE_MAC)
    assert open_.neighbours.mac_of(A(3)) == ROGUE_MAC
    assert (A(1), A(3)) in [e.path for e in open_.cache.entries()]

    eng = make(A(1), False)
    eng.receive_frame(1.0, forged, ROGUE_MAC)
    out = drain(eng)
    assert any(isinstance(a, Deliver) for a in out)  # data is still data
    assert eng.neighbours.mac_of(A(3)) is None and len(eng.cache) == 0
    assert eng.counters["unsigned-not-learned"] == 1


def test_a_forged_route_through_the_node_is_forwarded_and_not_learnt():
    eng = DsrEngine(A(1), DsrConfig(seed=1), NeighbourTable(), trust_data=False)
    eng.receive_frame(1.0, data(5, 4, [1, 2], 2), ROGUE_MAC)  # 5 -> 1 -> 2 -> 4
    (fwd,) = [a for a in drain(eng) if isinstance(a, SendFrame)]
    assert fwd.next_hop == A(2)
    assert len(eng.cache) == 0 and len(eng.neighbours) == 0


def test_padding_does_not_make_data_look_like_control():
    """A Source Route with PadN reaches the control path (it is not the one-option fast
    path) but is no more signed than data: it teaches nothing either."""
    eng = DsrEngine(A(1), DsrConfig(seed=1), NeighbourTable(), trust_data=False)
    eng.receive_frame(1.0, data(3, 1, [], 0, dsr.PadN(2)), ROGUE_MAC)
    assert len(eng.cache) == 0 and eng.neighbours.mac_of(A(3)) is None
    no_route = dsr.encapsulate(dsr.IPFields(A(3), A(1)), [dsr.PadN(2)], dsr.NO_NEXT_HEADER)
    eng.receive_frame(1.1, no_route, ROGUE_MAC)  # a 'one-hop control packet'
    assert len(eng.cache) == 0 and eng.neighbours.mac_of(A(3)) is None
    assert eng.counters["unsigned-not-learned"] == 2


def test_overheard_unsigned_data_gives_no_gratuitous_reply():
    pkt = data(1, 5, [2, 3, 4], 2)  # node 4 overhears 2 sending to 3
    open_ = DsrEngine(A(4), DsrConfig(seed=1), NeighbourTable())
    open_.overhear_frame(1.0, pkt, ROGUE_MAC)
    assert open_.counters["grat-replies"] == 1  # a forger makes the victim sign a reply
    eng = DsrEngine(A(4), DsrConfig(seed=1), NeighbourTable(), trust_data=False)
    eng.overhear_frame(1.0, pkt, ROGUE_MAC)
    assert drain(eng) == [] and len(eng.cache) == 0
    assert eng.counters["unsigned-not-shortened"] == 1


def test_unsigned_data_that_hits_a_break_is_reported_not_salvaged():
    links = [(1, 2), (2, 3), (3, 4), (2, 5), (5, 6), (6, 4)]
    engines = {
        A(i): DsrEngine(A(i), DsrConfig(seed=i), NeighbourTable(), trust_data=False)
        for i in range(1, 7)
    }
    sim = Sim(engines, [(A(a), A(b)) for a, b in links])
    sim.send(A(1), udp_packet(A(1), A(4), b"first"))
    sim.run()
    assert any(p.endswith(b"first") for p in sim.delivered[A(4)])  # signed control routes
    assert (1, 2, 3, 4) in paths(sim, 1)
    sim.unlink(A(2), A(3))
    sim.send(A(1), udp_packet(A(1), A(4), b"second"))
    sim.run()
    n2 = sim.engines[A(2)]
    assert n2.counters["salvaged"] == 0 and n2.counters["unsigned-not-salvaged"] == 1
    assert n2.counters["errors-sent"] == 1  # the source still hears of the break (8.3.4)
    assert not any(uses_link(p, 2, 3) for p in paths(sim, 1))
    assert not any(p.endswith(b"second") for p in sim.delivered[A(4)])


@pytest.mark.parametrize("trust", [True, False])
def test_dsr_data_with_our_own_source_is_dropped(trust):
    eng = DsrEngine(A(1), DsrConfig(seed=1), NeighbourTable(), trust_data=trust)
    eng.receive_frame(1.0, data(1, 3, [5, 1], 1), ROGUE_MAC)  # 'from us', via us
    out = drain(eng)
    assert [a.reason for a in out if isinstance(a, Dropped)] == ["own-source"]
    assert not any(isinstance(a, SendFrame) for a in out)
    assert eng.counters["own-source"] == 1


def test_a_salvaged_packet_back_through_its_source_goes_on_while_data_is_trusted():
    """RFC 4728 8.4.3: a salvager's route may lead back through the source; with data
    trusted (auth off) it is forwarded, as before; with auth nothing is salvaged."""
    salvaged = bytearray(data(1, 3, [5, 1], 1))
    salvaged[20 + 4 + 3] |= 0x40  # Salvage = 1 (low bit of the 4-bit field)
    ipv4_ok = bytes(salvaged)
    eng = DsrEngine(A(1), DsrConfig(seed=1), NeighbourTable())
    eng.receive_frame(1.0, ipv4_ok, ROGUE_MAC)
    assert [a.next_hop for a in drain(eng) if isinstance(a, SendFrame)] == [A(3)]
    strict = DsrEngine(A(1), DsrConfig(seed=1), NeighbourTable(), trust_data=False)
    strict.receive_frame(1.0, ipv4_ok, ROGUE_MAC)
    assert strict.counters["own-source"] == 1


# -- AODV ---------------------------------------------------------------------------


def aodv(**cfg) -> AodvEngine:
    return AodvEngine(A(1), AodvConfig(hellos=False, **cfg), NeighbourTable())


def plain(src: IPv4Address, dst: IPv4Address) -> bytes:
    return udp_packet(src, dst, b"forged")


def test_aodv_data_with_our_own_source_starts_no_discovery():
    """Forged data with the victim's own address as its source was buffered and
    started a discovery per destination named (30,000 of them in a minute)."""
    eng = aodv()
    for i in range(300):
        eng.receive_frame(float(i) / 100, plain(A(1), IPv4Address(f"10.43.{i // 250}.{i % 250}")),
                          ROGUE_MAC)  # fmt: skip
    assert eng.counters["own-source"] == 300
    assert len(eng.discovery.searches) == 0 and len(eng.send_buffer) == 0
    assert eng.counters.get("rreq-sent", 0) == 0


def test_aodv_discoveries_start_only_for_packets_that_wait():
    eng = aodv(send_buffer_packets=4)
    for i in range(10):
        eng.send_local(0.0, plain(A(1), A(100 + i)))
    assert len(eng.send_buffer) == 4
    assert set(eng.discovery.searches) == {A(100 + i) for i in range(4)}


def test_aodv_discoveries_are_bounded():
    eng = aodv(send_buffer_packets=100_000)
    n = MAX_SEARCHES + 200
    for i in range(n):
        eng.send_local(i * 1e-4, plain(A(1), IPv4Address(0x0A2B0000 + i)))
    assert len(eng.discovery.searches) == MAX_SEARCHES
    assert eng.counters["discoveries-refused"] == 200
    drops = [a.reason for a in drain(eng) if isinstance(a, Dropped)]
    assert drops.count("discovery-limit") == 200
    # The timer still runs over a bounded set; a repair is never refused.
    eng.handle_timer(5.0)
    assert len(eng.discovery.searches) <= MAX_SEARCHES


def test_aodv_unsigned_data_does_not_keep_a_neighbour_alive():
    for trust, alive in ((True, True), (False, False)):
        eng = AodvEngine(A(1), AodvConfig(), NeighbourTable(), trust_data=trust)
        eng.neighbours.learn(0.0, A(2), ROGUE_MAC)
        eng.links.hello(0.0, A(2), 2.0)
        eng.receive_frame(1.9, plain(A(2), A(1)), ROGUE_MAC)  # spoofing n2's MAC
        assert (A(2) not in list(eng.links.lost(3.0))) is alive, trust
