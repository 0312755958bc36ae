"""Every parser, fed any bytes, gives a parsed object or the project's own parse error,
nothing else (no IndexError, struct.error, UnicodeDecodeError...), in bounded time.

Random bytes rarely get past the first length check, so each parser is also fed
mutations of a valid message (byte flips, truncation, extension) that reach the deep
paths. The whole file runs in a few seconds (hypothesis' default 100 examples each,
``deadline`` bounds the time per example).
"""

from __future__ import annotations

import contextlib
from ipaddress import IPv4Address

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from manetkit import events
from manetkit.daemon import auth
from manetkit.daemon.linksense.hello import build_hello, parse_hello
from manetkit.daemon.wire import aodv, dsr, ipv4, manet_ext
from manetkit.jsonlines import LineServer
from manetkit.lab.medium import protocol as medium
from manetkit.proxy import frames

A1, A2, A3 = (IPv4Address(f"10.42.0.{i}") for i in (1, 2, 3))
FAST = settings(deadline=500, max_examples=150)

SEEDS = {
    "aodv": aodv.control_packet(
        aodv.RREQ(1, 2, A3, 4, A1, 5, extensions=[(1, b"\0\0\3\xe8")]), A1, A2, 3
    ),
    "rerr": aodv.control_packet(aodv.RERR([(A3, 7), (A2, 1)]), A1, A2, 1),
    "dsr": dsr.encapsulate(
        dsr.IPFields(A1, A3),
        [
            dsr.RouteRequest(3, A3, (A2,)),
            dsr.RouteError.node_unreachable(A1, A3, A2),
            manet_ext.dsr_option(manet_ext.BusAck(1, 2, A2)),
            dsr.SourceRoute((A2,), 1),
            dsr.Pad1(),
        ],
        17,
        b"inner",
    ),
    "hello": build_hello(A2, 9, 1.0),
}
SIGNER = auth.Authenticator([auth.Key(1, "hmac-sha256", bytes(32))], random=lambda n: bytes(n))
SEEDS |= {f"signed-{k}": SIGNER.sign(0, v, b"\x02\0\0\0\0\1") for k, v in list(SEEDS.items())}

SEED_LIST = tuple(SEEDS.values())


@st.composite
def mutated(draw):
    """A valid packet, then a few byte flips, a cut and/or random bytes appended."""
    b = bytearray(draw(st.sampled_from(SEED_LIST)))
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(b) - 1))
        b[i] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        b = b[: draw(st.integers(0, len(b)))]
    return bytes(b) + draw(st.binary(max_size=8))


packets = st.one_of(st.binary(max_size=300), mutated())


@FAST
@given(packets)
def test_ipv4(data):
    with contextlib.suppress(ipv4.MalformedPacket):
        h = ipv4.parse(data)
        ipv4.parse_udp(data[h.ihl : h.total_length])


@FAST
@given(packets)
def test_aodv(data):
    with contextlib.suppress(aodv.MalformedAodv):
        aodv.parse(data)
    try:
        _, msg = aodv.parse_control(data)
        for t, body in msg.extensions:
            manet_ext.from_aodv(t, body)
    except (aodv.MalformedAodv, manet_ext.MalformedNotice):
        pass


@FAST
@given(packets)
def test_dsr_and_manet_ext(data):
    try:
        _, dh = dsr.parse(data)
    except ipv4.MalformedPacket:  # MalformedDsr is one
        return
    for po in dh.options:
        if isinstance(po.option, dsr.UnknownOption):
            with contextlib.suppress(manet_ext.MalformedNotice):
                manet_ext.from_dsr(po.option.type, po.option.data)
    with contextlib.suppress(ipv4.MalformedPacket):
        dsr.strip(data)


@FAST
@given(st.integers(0, 255), st.binary(max_size=64))
def test_manet_ext_bodies(t, body):
    for fn in (manet_ext.from_dsr, manet_ext.from_aodv):
        with contextlib.suppress(manet_ext.MalformedNotice):
            fn(t, body)


@FAST
@given(packets)
def test_hello(data):
    parse_hello(data)  # None for anything but a well-formed beacon


@FAST
@given(packets, st.booleans())
def test_auth_verify(data, required):
    rx = auth.Authenticator([auth.Key(1, "hmac-sha256", bytes(32))], required)
    out = rx.verify(0.0, data, b"\x02\0\0\0\0\1")
    assert isinstance(out, bytes | auth.Rejected | auth.Handled)
    assert isinstance(rx.sign(0.0, data, b"\x02\0\0\0\0\1"), bytes)


@FAST
@given(st.one_of(st.binary(max_size=200), st.builds(lambda b, t: b + t, st.sampled_from([
    frames.pack_open(b"\x01" * 16, 1, A3, 80, frames.MODES[0]),
    frames.tagged_header(frames.pack_ack(3, True), frames.TAGGED) + bytes(16),
    frames.pack_accept(b"\x01" * 16, 1, 5, False, bytes(32)), frames.pack_stale(b"\x01" * 16, 3),
    frames.pack_data(5, b"abc"), frames.pack_ack(3, True), frames.pack_reset("x"),
    frames.pack_busy(250),
]), st.binary(max_size=20))))  # fmt: skip
def test_proxy_frames(data):
    r = frames.FrameReader()
    r.feed(data)
    with contextlib.suppress(frames.MalformedFrame):
        for _ in range(len(data) + 1):
            if r.next_frame() is None:
                break


@FAST
@given(st.one_of(st.binary(max_size=200), st.builds(lambda b, t: b + t, st.sampled_from([
    medium.attach(3), medium.tx(bytes(60)), medium.deliver(-50.0, bytes(60)),
    medium.txstatus(bytes(6), 2, True, bytes(20)), medium.refused("r"), medium.overhear(True),
]), st.binary(max_size=10))))  # fmt: skip
def test_medium_protocol(data):
    with contextlib.suppress(medium.ProtocolError):
        medium.parse(data)


@FAST
@given(st.one_of(st.binary(max_size=200), st.text(max_size=100).map(str.encode)))
def test_event_socket_requests(line):
    srv = LineServer("/nonexistent", lambda req: {"ok": True, "cmd": req["cmd"]})
    reply = srv.reply(line, None)
    assert isinstance(reply, dict) and "ok" in reply


@FAST
@given(st.dictionaries(st.sampled_from(["event", "time", "neighbour", "dst", "reason", "mac"]),
                       st.one_of(st.none(), st.integers(), st.text(max_size=8), st.floats())))  # fmt: skip
def test_event_schema(obj):
    with contextlib.suppress(events.EventError):
        events.from_wire(obj)


def test_proxy_data_offset_overflow():
    """Found by atheris: a partial DATA frame whose offset is near 2**64 is refused."""
    r = frames.FrameReader()
    r.feed(frames.HEADER.pack(3, 4000) + (2**64 - 10).to_bytes(8, "big") + b"ccccc")
    with pytest.raises(frames.MalformedFrame, match="2\\*\\*64"):
        while r.next_frame() is not None:
            pass
