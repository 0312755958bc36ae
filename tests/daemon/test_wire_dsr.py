"""DSR wire format (RFC 4728 section 6): round-trips, malformed input, and tshark."""

from __future__ import annotations

from ipaddress import IPv4Address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from manetkit.daemon.wire import dsr, ipv4
from tests.helpers import tshark
from tests.helpers.dsrframes import hop_list

addr = st.builds(IPv4Address, st.integers(0, 2**32 - 1))
addrs = st.lists(addr, max_size=12).map(tuple)


@st.composite
def source_routes(draw):
    a = draw(addrs)
    return dsr.SourceRoute(
        a,
        draw(st.integers(0, len(a))),
        draw(st.integers(0, 15)),
        draw(st.booleans()),
        draw(st.booleans()),
    )


unknown_types = st.integers(0, 255).filter(lambda t: t not in dsr.KNOWN_OPTION_TYPES)
options = st.one_of(
    st.builds(dsr.RouteRequest, st.integers(0, 0xFFFF), addr, addrs),
    st.builds(dsr.RouteReply, addrs, st.booleans()),
    st.builds(dsr.RouteError.node_unreachable, addr, addr, addr, st.integers(0, 15)),
    st.builds(
        dsr.RouteError, st.integers(2, 255), addr, addr, st.binary(max_size=20), st.integers(0, 15)
    ),
    st.builds(dsr.AckRequest, st.integers(0, 0xFFFF)),
    st.builds(dsr.Ack, st.integers(0, 0xFFFF), addr, addr),
    source_routes(),
    st.just(dsr.Pad1()),
    st.builds(dsr.PadN, st.integers(0, 20)),
    st.builds(dsr.UnknownOption, unknown_types, st.binary(max_size=40)),
)


@given(opts=st.lists(options, max_size=5), inner=st.binary(max_size=100), nh=st.integers(0, 255))
def test_round_trip(opts, inner, nh):
    src, dst = IPv4Address("10.42.0.1"), IPv4Address("10.42.0.9")
    pkt = dsr.encapsulate(dsr.IPFields(src, dst, ttl=9), opts, nh, inner)
    ip, hdr = dsr.parse(pkt)
    assert ip.protocol == ipv4.PROTO_DSR and ip.ttl == 9
    assert [p.option for p in hdr.options] == opts
    assert hdr.next_header == nh
    assert bytes(pkt[hdr.end :]) == inner
    for p in hdr.options:  # offsets point at each option's type byte
        assert pkt[p.offset] == dsr.pack_option(p.option)[0]


@given(payload=st.binary(max_size=200), proto=st.sampled_from([1, 6, 17]), ttl=st.integers(1, 255))
def test_add_header_then_strip_restores_the_packet(payload, proto, ttl):
    src, dst = IPv4Address("10.42.0.1"), IPv4Address("10.42.0.9")
    orig = ipv4.build(src, dst, proto, payload, ttl=ttl, ident=77)
    sr = dsr.SourceRoute((IPv4Address("10.42.0.2"),), 1)
    wrapped = dsr.add_header(orig, [sr])
    ip = ipv4.parse(wrapped)
    assert ip.protocol == 48 and ip.total_length == len(orig) + 12 and ip.ttl == ttl
    assert ipv4.checksum(wrapped[:20]) == 0
    assert dsr.strip(wrapped) == orig


def test_unknown_option_action_follows_the_high_bits():
    assert [dsr.unknown_option_action(t) for t in (0x05, 0x45, 0x85, 0xC5)] == [
        "skip",
        "remove",
        "mark",
        "drop",
    ]


def test_unknown_option_preserved_byte_for_byte():
    raw = dsr.dsr_header(17, [dsr.UnknownOption(0x11, b"\xde\xad\xbe\xef\x00")])
    pkt = ipv4.build(IPv4Address("10.0.0.1"), IPv4Address("10.0.0.2"), 48, raw)
    _, hdr = dsr.parse(pkt)
    (opt,) = [p.option for p in hdr.options]
    assert opt == dsr.UnknownOption(0x11, b"\xde\xad\xbe\xef\x00")
    assert dsr.pack_option(opt) == raw[4:]


def _raw(options_bytes: bytes, plen: int | None = None, proto: int = 48) -> bytes:
    n = len(options_bytes) if plen is None else plen
    body = bytes((17, 0)) + n.to_bytes(2, "big") + options_bytes
    return ipv4.build(IPv4Address("10.0.0.1"), IPv4Address("10.0.0.2"), proto, body)


@pytest.mark.parametrize(
    "bad, why",
    [
        (_raw(b"", proto=17), "not DSR"),
        (ipv4.build(IPv4Address("10.0.0.1"), IPv4Address("10.0.0.2"), 48, b"\x11\x00"), "shorter"),
        (_raw(b"\x60\x02\x00\x00", plen=9), "runs past the packet"),
        (_raw(b"\x60"), "truncated before its length"),
        (_raw(b"\x60\x08\x00\x00\x01\x02\x03\x04"), "runs past the header"),
        (_raw(b"\x60\x01\x00"), "data length 1 < 2"),
        (_raw(b"\x60\x05\x00\x00\x01\x02\x03"), "not a multiple of 4"),
        (_raw(b"\x60\x06\x00\x02\x01\x02\x03\x04"), "segments left 2 exceeds"),
        (_raw(b"\x01\x04\x00\x01\x0a\x00"), "route request option data length 4"),
        (_raw(b"\x02\x00"), "route reply option without"),
        (_raw(b"\x03\x0a\x01\x00" + bytes(8)), "without the unreachable address"),
        (_raw(b"\x03\x04\x02\x00\x00\x00"), "route error option data length 4"),
        (_raw(b"\xa0\x01\x00"), "acknowledgement request data length 1"),
        (_raw(b"\x20\x02\x00\x01"), "acknowledgement data length 2"),
    ],
)
def test_malformed_refused_with_a_named_error(bad, why):
    with pytest.raises(dsr.MalformedDsr, match=why):
        dsr.parse(bad)


def test_pack_refuses_out_of_range_fields():
    with pytest.raises(ValueError, match="segments left"):
        dsr.pack_option(dsr.SourceRoute((IPv4Address("10.0.0.1"),), 2))
    with pytest.raises(ValueError, match="salvage"):
        dsr.pack_option(dsr.SourceRoute((), 0, salvage=16))
    with pytest.raises(ValueError, match="exceeds 255"):
        dsr.pack_option(
            dsr.RouteRequest(1, IPv4Address("10.0.0.1"), (IPv4Address("10.0.0.2"),) * 70)
        )


def test_max_overhead():
    assert dsr.max_overhead(1) == 12
    assert dsr.max_overhead(16) == 72
    with pytest.raises(ValueError):
        dsr.max_overhead(0)


# --- tshark, the independent decoder -------------------------------------------------


def A(i: int) -> IPv4Address:
    return IPv4Address(f"10.42.0.{i}")


def decode_each(options: list[dsr.Option]) -> list[dict]:
    """One frame per option, all decoded by a single tshark run (it starts slowly)."""
    s, d = A(1), A(5)
    frames = [
        tshark.ether(
            b"\xff" * 6,
            b"\x02\0\0\0\0\1",
            dsr.encapsulate(
                dsr.IPFields(s, d), [o], ipv4.PROTO_UDP, ipv4.udp(1000, 2000, b"hi", s, d)
            ),
        )
        for o in options
    ]
    out = []
    for option, layers in zip(options, tshark.decode(frames), strict=True):
        assert layers["ip"]["ip.checksum.status"] == "1"
        assert layers["udp"]["udp.checksum.status"] == "1"  # the inner payload follows
        dsr_layer = layers["dsr"]
        assert dsr_layer["dsr.nexthdr"] == "0x11"
        assert int(dsr_layer["dsr.len"]) == len(dsr.pack_option(option))
        (opt,) = dsr_layer["Options"].values()
        out.append(opt)
    return out


def test_tshark_decodes_every_option():
    rreq, rrep, rerr, areq, ack, sr, pad1, padn = decode_each(
        [
            dsr.RouteRequest(0x1234, A(5), (A(2), A(3))),
            dsr.RouteReply((A(2), A(3), A(5)), last_hop_external=True),
            dsr.RouteError.node_unreachable(A(3), A(1), A(4), salvage=2),
            dsr.AckRequest(9),
            dsr.Ack(10, A(1), A(5)),
            dsr.SourceRoute((A(2), A(3), A(4)), 2, salvage=3, first_hop_external=True),
            dsr.Pad1(),
            dsr.PadN(3),
        ]
    )
    assert rreq["dsr.option.type"] == "1" and rreq["dsr.option.rreq.id"] == "0x1234"
    assert rreq["dsr.option.rreq.targetaddress"] == "10.42.0.5"
    assert hop_list(rreq) == ["10.42.0.2", "10.42.0.3"]

    assert rrep["dsr.option.type"] == "2" and rrep["dsr.option.rrep.lasthopex"] == "1"
    assert hop_list(rrep) == ["10.42.0.2", "10.42.0.3", "10.42.0.5"]

    assert rerr["dsr.option.type"] == "3" and rerr["dsr.option.err.type"] == "1"
    assert int(rerr["dsr.option.err.salvage"], 0) == 2
    assert (rerr["dsr.option.err.src"], rerr["dsr.option.err.dest"]) == ("10.42.0.3", "10.42.0.1")
    assert rerr["dsr.option.err.unreachablenode"] == "10.42.0.4"

    assert areq["dsr.option.type"] == "160" and areq["dsr.option.ackreq.id"] == "0x0009"

    assert ack["dsr.option.type"] == "32" and ack["dsr.option.ack.id"] == "0x000a"
    assert (ack["dsr.option.ack.source"], ack["dsr.option.ack.dest"]) == ("10.42.0.1", "10.42.0.5")

    assert sr["dsr.option.type"] == "96" and sr["dsr.option.srcrt.segsleft"] == "2"
    assert int(sr["dsr.option.srcrt.salvage"], 0) == 3
    assert sr["dsr.option.srcrt.firsthopext"] == "1" and sr["dsr.option.srcrt.lasthopext"] == "0"
    assert hop_list(sr) == ["10.42.0.2", "10.42.0.3", "10.42.0.4"]

    assert pad1["dsr.option.type"] == "224"
    assert padn["dsr.option.type"] == "0" and padn["dsr.option.len"] == "3"
