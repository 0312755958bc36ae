"""manet_ext: ELFN/ERDN/ERSN/BUS-ACK bodies round-trip; malformed ones are refused and
counted by the engines, never crash them."""

from __future__ import annotations

from ipaddress import IPv4Address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from manetkit.daemon.wire import aodv, dsr
from manetkit.daemon.wire import manet_ext as mx
from tests.daemon.aodvsim import addr, network
from tests.daemon.dsrutil import A, dsr_net

addrs = st.builds(IPv4Address, st.integers(0, 2**32 - 1))
flows = st.builds(
    mx.Flow, addrs, addrs, st.integers(0, 65535), st.integers(0, 65535),
    st.integers(0, 2**32 - 1), st.integers(0, 255), st.integers(0, 255),
)  # fmt: skip
items = st.one_of(
    flows,
    st.builds(mx.Notice, st.sampled_from([1, 2]), st.integers(0, 65535), addrs, flows),
    st.builds(mx.BusAck, st.sampled_from([1, 2]), st.integers(0, 65535), addrs),
)


@given(items)
def test_round_trip_as_dsr_option_and_aodv_extension(item):
    opt = mx.dsr_option(item)
    assert dsr.unknown_option_action(opt.type) == "skip"
    raw = dsr.pack_option(opt)
    assert dsr.parse_option(raw[0], raw[2:]) == opt
    assert mx.from_dsr(opt.type, opt.data) == item
    t, data = mx.aodv_extension(item)
    assert mx.from_aodv(t, data) == item
    assert mx.from_aodv(1, b"\0\0\0\1") is None and mx.from_dsr(1, b"") is None


def test_malformed_bodies_are_refused_by_name():
    with pytest.raises(mx.MalformedNotice, match="shim"):
        mx.from_dsr(mx.DSR_OPT_ELFN, b"\x06\x00" + bytes(16))
    with pytest.raises(mx.MalformedNotice, match="flow body of 17"):
        mx.from_aodv(mx.AODV_EXT_ELFN, bytes(17))
    with pytest.raises(mx.MalformedNotice, match="unknown kind 9"):
        mx.from_aodv(mx.AODV_EXT_BUS_ACK, bytes(6) + b"\x09")


def test_engines_count_and_drop_malformed_notices():
    sim = dsr_net(2, [(1, 2)], bus=True)
    bad = dsr.encapsulate(
        dsr.IPFields(A(1), A(2)), [dsr.UnknownOption(mx.DSR_OPT_ERDN, b"\0\3abc")], 59
    )
    sim.inject(A(2), bad)
    assert sim.engines[A(2)].counters["malformed"] == 1
    assert [d.reason for d in sim.dropped[A(2)]] == ["malformed"]

    asim = network([addr(1), addr(2)], [(addr(1), addr(2))], bus=True)
    msg = aodv.RERR([(addr(9), 3)], True, [(mx.AODV_EXT_ERDN, b"short")])
    asim.inject(addr(2), aodv.control_packet(msg, addr(1), addr(2), 64))
    eng = asim.engines[addr(2)]
    assert eng.counters["malformed-extension"] == 1 and eng.counters["rerr-received"] == 1
    assert not asim.notified[addr(2)]
