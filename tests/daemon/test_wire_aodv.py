"""AODV wire format (RFC 3561 section 5): round trips, refusals, and tshark agreeing."""

from __future__ import annotations

from ipaddress import IPv4Address as A

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from manetkit.daemon.wire import aodv, ipv4
from tests.helpers import tshark
from tests.helpers.aodvframes import check_decoded

addrs = st.builds(A, st.integers(0, 2**32 - 1))
u32 = st.integers(0, 2**32 - 1)
u8 = st.integers(0, 255)
exts = st.lists(st.tuples(u8, st.binary(max_size=20)), max_size=3)

rreqs = st.builds(
    aodv.RREQ,
    hop_count=u8,
    rreq_id=u32,
    dest=addrs,
    dest_seq=u32,
    orig=addrs,
    orig_seq=u32,
    join=st.booleans(),
    repair=st.booleans(),
    gratuitous=st.booleans(),
    dest_only=st.booleans(),
    unknown_seq=st.booleans(),
    extensions=exts,
)
rreps = st.builds(
    aodv.RREP,
    hop_count=u8,
    dest=addrs,
    dest_seq=u32,
    orig=addrs,
    lifetime_ms=u32,
    repair=st.booleans(),
    ack_required=st.booleans(),
    prefix_size=st.integers(0, 31),
    extensions=exts,
)
rerrs = st.builds(
    aodv.RERR,
    dests=st.lists(st.tuples(addrs, u32), min_size=1, max_size=20),
    no_delete=st.booleans(),
    extensions=exts,
)
acks = st.builds(aodv.RREPAck, extensions=exts)


@given(st.one_of(rreqs, rreps, rerrs, acks))
def test_round_trip(msg):
    assert aodv.parse(msg.pack()) == msg


@given(st.one_of(rreqs, rreps, rerrs, acks), addrs, addrs, st.integers(1, 255))
def test_control_packet_round_trip(msg, src, dst, ttl):
    packet = aodv.control_packet(msg, src, dst, ttl)
    assert aodv.is_control(packet)
    hdr, parsed = aodv.parse_control(packet)
    assert (hdr.src, hdr.dst, hdr.ttl, parsed) == (src, dst, ttl, msg)


def test_fixed_sizes_match_rfc():
    a = A("10.42.0.1")
    assert len(aodv.RREQ(0, 1, a, 0, a, 1).pack()) == 24
    assert len(aodv.RREP(0, a, 0, a, 0).pack()) == 20
    assert len(aodv.RERR([(a, 1), (a, 2)]).pack()) == 4 + 2 * 8
    assert aodv.RREPAck().pack() == b"\x04\x00"


def test_rreq_bytes_exact():
    m = aodv.RREQ(3, 0x01020304, A("10.0.0.5"), 7, A("10.0.0.1"), 9, join=True, unknown_seq=True)
    assert m.pack() == bytes.fromhex("01880003010203040a000005000000070a00000100000009")


GOOD_RREQ = aodv.RREQ(1, 2, A("10.42.0.3"), 4, A("10.42.0.1"), 5).pack()


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"\x01",
        GOOD_RREQ[:23],
        aodv.RREP(0, A("1.2.3.4"), 0, A("1.2.3.4"), 0).pack()[:19],
        b"\x03\x00\x00\x00",  # RERR with no destinations
        b"\x03\x00\x00\x02" + b"\0" * 8,  # says 2, carries 1
        b"\x09\x00",  # unknown type
        GOOD_RREQ + b"\x05",  # truncated extension header
        GOOD_RREQ + b"\x05\x04ab",  # extension longer than what is left
    ],
    ids=[
        "empty",
        "one-byte",
        "short-rreq",
        "short-rrep",
        "rerr-count-0",
        "rerr-truncated",
        "unknown-type",
        "ext-header",
        "ext-length",
    ],
)
def test_malformed_refused(bad):
    with pytest.raises(aodv.MalformedAodv):
        aodv.parse(bad)


def test_malformed_packet_refused():
    a = A("10.42.0.1")
    good = aodv.control_packet(aodv.RREPAck(), a, a, 1)
    with pytest.raises(aodv.MalformedAodv):
        aodv.parse_control(good[:25])  # IPv4 total length larger than the frame
    tcp = ipv4.build(a, a, ipv4.PROTO_TCP, b"\0" * 20)
    with pytest.raises(aodv.MalformedAodv):
        aodv.parse_control(tcp)


def frame(msg: aodv.Message, dst: A = aodv.BROADCAST, ttl: int = 1) -> bytes:
    packet = aodv.control_packet(msg, A("10.42.0.1"), dst, ttl)
    return tshark.ether(b"\xff" * 6, b"\x02\0\0\0\0\x01", packet)


def test_tshark_decodes_every_message_type():
    hello = (aodv.EXT_HELLO_INTERVAL, (1000).to_bytes(4, "big"))
    msgs: list[aodv.Message] = [
        aodv.RREQ(3, 77, A("10.42.0.5"), 12, A("10.42.0.1"), 9, join=True, gratuitous=True),
        aodv.RREQ(
            0,
            2**32 - 1,
            A("10.42.0.9"),
            0,
            A("10.42.0.1"),
            1,
            dest_only=True,
            unknown_seq=True,
            repair=True,
        ),
        aodv.RREP(2, A("10.42.0.5"), 13, A("10.42.0.1"), 6000, ack_required=True, prefix_size=3),
        aodv.RREP(0, A("10.42.0.1"), 4, A("10.42.0.1"), 2000, repair=True, extensions=[hello]),
        aodv.RERR([(A("10.42.0.5"), 14)]),
        aodv.RERR(
            [(A("10.42.0.5"), 14), (A("10.42.0.6"), 15), (A("10.42.0.7"), 2**31)], no_delete=True
        ),
        aodv.RREPAck(),
    ]
    decoded = tshark.decode([frame(m) for m in msgs])
    assert len(decoded) == len(msgs)
    for layers, msg in zip(decoded, msgs, strict=True):
        check_decoded(layers, msg)


# One tshark run per example (about a second each): few examples, many messages each.
@settings(max_examples=3, deadline=None)
@given(st.lists(st.one_of(rreqs, rreps, rerrs), min_size=20, max_size=40))
def test_tshark_agrees_on_random_messages(msgs):
    msgs = [type(m)(**{**_fields(m), "extensions": []}) for m in msgs]
    for layers, msg in zip(tshark.decode([frame(m) for m in msgs]), msgs, strict=True):
        check_decoded(layers, msg)


def _fields(m) -> dict:
    return {k: getattr(m, k) for k in m.__slots__}
