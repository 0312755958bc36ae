"""Round-trips of the radio <-> medium datagrams (manetkit.lab.medium.protocol)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from manetkit.lab.medium import protocol as p
from manetkit.macaddr import format_mac

FRAME = p.node_mac(2) + p.node_mac(1) + b"\x08\x00" + b"payload"


def test_attach_attached_roundtrip():
    assert p.parse(p.attach(7)) == p.Attach(7)
    msg = p.parse(p.attached(7))
    assert msg == p.Attached(7, p.node_mac(7))
    assert p.mac_node(msg.mac) == 7


def test_tx_deliver_roundtrip():
    assert p.parse(p.tx(FRAME)) == p.Tx(FRAME)
    d = p.parse(p.deliver(-61.234, FRAME))
    assert d.frame == FRAME
    assert d.rssi_dbm == pytest.approx(-61.23, abs=0.005)


def test_txstatus_carries_failed_frame_only():
    fail = p.parse(p.txstatus(p.node_mac(3), 7, False, FRAME))
    assert fail == p.TxStatus(p.node_mac(3), 7, False, FRAME)
    ok = p.parse(p.txstatus(p.node_mac(3), 2, True, FRAME))
    assert ok == p.TxStatus(p.node_mac(3), 2, True, b"")


def test_refused_detach():
    assert p.parse(p.refused("no such node")) == p.Refused("no such node")
    assert p.parse(p.detach()) == p.Detach()


@pytest.mark.parametrize(
    "data",
    [b"", b"\x02short", b"\x01\x00", b"\x01\x00\x01\x02", b"\x81\x00\x01", b"\x83\x00", b"\x7f"],
)
def test_malformed_raise_protocol_error(data):
    with pytest.raises(p.ProtocolError):
        p.parse(data)


def test_rssi_is_clamped_to_i16():
    assert p.parse(p.deliver(-1000.0, FRAME)).rssi_dbm == -327.68


def test_mac_mapping():
    assert format_mac(p.node_mac(0x010203)) == "02:6d:6b:01:02:03"
    assert p.mac_node(p.BROADCAST_MAC) is None
    with pytest.raises(ValueError):
        p.node_mac(0)


@given(st.integers(1, 65535), st.binary(min_size=14, max_size=2000), st.floats(-150, 30))
def test_roundtrip_property(node_id, frame, rssi):
    assert p.parse(p.attach(node_id)).node_id == node_id
    assert p.parse(p.tx(frame)).frame == frame
    d = p.parse(p.deliver(rssi, frame))
    assert d.frame == frame and abs(d.rssi_dbm - rssi) <= 0.0051
