"""IPv4 helpers: checksums, incremental TTL update, and tshark agreeing with us."""

from ipaddress import IPv4Address as A

import pytest
from hypothesis import given
from hypothesis import strategies as st

from manetkit.daemon.wire import ipv4
from tests.helpers import tshark


@given(ttl=st.integers(2, 255), ident=st.integers(0, 0xFFFF), payload=st.binary(max_size=64))
def test_ttl_decrement_keeps_checksum_valid(ttl, ident, payload):
    p = bytearray(
        ipv4.build(A("10.42.0.1"), A("10.42.0.9"), ipv4.PROTO_UDP, payload, ttl=ttl, ident=ident)
    )
    assert ipv4.decrement_ttl(p) == ttl - 1
    assert ipv4.checksum(bytes(p[:20])) == 0
    assert ipv4.parse(p).ttl == ttl - 1


@pytest.mark.parametrize(
    "bad",
    [b"", b"\x45" * 10, b"\x65" + b"\0" * 19, b"\x4f" + b"\0" * 19],
    ids=["empty", "short", "version6", "ihl-too-long"],
)
def test_malformed_refused(bad):
    with pytest.raises(ipv4.MalformedPacket):
        ipv4.parse(bad)


def test_tshark_decodes_our_udp():
    src, dst = A("10.42.0.1"), A("10.42.0.2")
    pkt = ipv4.build(src, dst, ipv4.PROTO_UDP, ipv4.udp(4000, 5000, b"x" * 11, src, dst), ttl=7)
    (layers,) = tshark.decode([tshark.ether(b"\xff" * 6, b"\x02mk\0\0\1", pkt)])
    ip = layers["ip"]
    assert ip["ip.src"] == "10.42.0.1" and ip["ip.ttl"] == "7"
    assert ip["ip.checksum.status"] == "1"  # 1 = good (the helper turns verification on)
    assert layers["udp"]["udp.checksum.status"] == "1"
