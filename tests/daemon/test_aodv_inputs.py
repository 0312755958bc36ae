"""Bad input never escapes the AODV engine, and tshark reads what the engine sends."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from manetkit.daemon.engines.aodv import AodvConfig, AodvEngine
from manetkit.daemon.engines.base import Dropped
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.wire import aodv, ipv4
from tests.daemon.aodvsim import addr, chain, control, data, network
from tests.helpers import tshark
from tests.helpers.aodvframes import check_decoded

N1, N2, N5 = addr(1), addr(2), addr(5)


def drain(eng) -> list:
    out = []
    while (a := eng.next_event()) is not None:
        out.append(a)
    return out


def udp654(payload: bytes, dst=N1) -> bytes:
    return ipv4.build(N2, dst, ipv4.PROTO_UDP, ipv4.udp(654, 654, payload, N2, dst), ttl=1)


def test_malformed_control_is_counted_and_dropped():
    eng = AodvEngine(N1, AodvConfig(), NeighbourTable())
    bad = [
        udp654(b"\x01\x00"),  # truncated RREQ
        udp654(b"\x03\x00\x00\x00"),  # RERR without destinations
        udp654(b"\x07" + b"\0" * 30, aodv.BROADCAST),  # unknown type
        udp654(aodv.RREPAck().pack() + b"\x01"),  # truncated extension
        udp654(b"")[:-1] + b"",  # UDP length larger than the datagram
        b"\x45\x00",  # not even an IPv4 header
        b"\x60" + b"\0" * 39,  # IPv6
    ]
    for p in bad:
        eng.receive_frame(1.0, p, b"\x02\0\0\0\0\x02", -50.0)
    actions = drain(eng)
    assert [a.reason for a in actions if isinstance(a, Dropped)] == ["malformed"] * len(bad)
    assert eng.status()["counters"]["malformed"] == len(bad)
    assert eng.status()["routes"] == []  # nothing learnt from garbage
    eng.send_local(1.0, b"\x45")
    assert [a.reason for a in drain(eng)] == ["malformed"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=80),
            st.binary(max_size=60).map(lambda b: udp654(b)),
            st.binary(max_size=60).map(lambda b: udp654(b, aodv.BROADCAST)),
            st.binary(min_size=2, max_size=50).map(lambda b: udp654(b"\x01\x00" + b)),
        ),
        max_size=6,
    )
)
def test_no_input_raises(frames):
    """Whatever arrives, the engine neither raises nor stops working."""
    eng = AodvEngine(N1, AodvConfig(), NeighbourTable())
    t = 0.0
    for f in frames:
        t += 0.1
        eng.receive_frame(t, f, b"\x02\0\0\0\0\x02", None)
        if (d := eng.get_timer()) is not None and d <= t + 1:
            eng.handle_timer(max(d, t))
        drain(eng)
    eng.send_local(t, data(N1, N1, 1))
    assert any(a.__class__.__name__ == "Deliver" for a in drain(eng))
    eng.status()


def test_tshark_decodes_what_the_engine_sent():
    nodes, links = chain(5)
    sim = network(nodes, links, rrep_ack=True, gratuitous_rrep=True)
    sim.send(N1, data(N1, N5, 0))
    sim.run(duration=2.0)
    sim.send(addr(2), data(addr(2), N5, 1))  # will be answered from caches: G flag
    sim.unlink(addr(4), N5)
    sim.send(N1, data(N1, N5, 2))  # link break -> RERR
    sim.run(duration=3.0)
    sent = control(sim)
    kinds = {type(m) for _, m in sent}
    assert {aodv.RREQ, aodv.RREP, aodv.RERR, aodv.RREPAck} <= kinds
    decoded = tshark.decode([f.ether() for f, _ in sent])
    assert len(decoded) == len(sent)
    for layers, (f, m) in zip(decoded, sent, strict=True):
        check_decoded(layers, m)
        # IP layer: re-originated at every hop, broadcast TTL = the ring TTL.
        assert layers["ip"]["ip.src"] == str(f.sender)
        assert layers["ip"]["ip.ttl"] == str(f.packet[8])
        assert layers["udp"]["udp.srcport"] == layers["udp"]["udp.dstport"] == "654"


def test_config_defaults_and_refusals():
    import pytest
    from pydantic import ValidationError

    c = AodvConfig()
    # RFC 3561 section 10 derived values.
    assert (c.net_traversal_time_ms, c.path_discovery_time_ms) == (2800, 5600)
    assert (c.my_route_timeout_ms, c.delete_period_ms, c.blacklist_timeout_ms) == (
        6000,
        15000,
        5600,
    )
    assert (c.next_hop_wait_ms, c.max_repair_ttl, c.ring_traversal_time_ms(1)) == (50, 10, 240)
    for bad, field in (
        ({"ttl_threshold": 50}, "ttl_threshold"),
        ({"active_route_timeout_ms": 0}, "active_route_timeout_ms"),
        ({"hello_intervall_ms": 5}, "hello_intervall_ms"),
    ):
        with pytest.raises(ValidationError, match=field):
            AodvConfig(**bad)
