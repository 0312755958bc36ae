"""The link-quality costs on the air: DSR's LINK METRICS option (53) and AODV's PATH
METRIC extension (247) round-trip through our packer and parser and through scapy,
tshark decodes the packets around them, and a parser that does not know them keeps
the rest of the packet (docs/linkquality.md "On the air")."""

from __future__ import annotations

from ipaddress import IPv4Address

import pytest

from manetkit.daemon.wire import aodv, dsr, ipv4
from manetkit.daemon.wire import linkmetric as lm
from tests.helpers.tshark import decode, ether

A1, A2, A3, A9 = (IPv4Address(f"10.42.0.{i}") for i in (1, 2, 3, 9))
BCAST = IPv4Address("255.255.255.255")


def dsr_request(costs: tuple[float | None, ...]) -> bytes:
    return dsr.encapsulate(
        dsr.IPFields(A1, BCAST, ttl=2),
        [dsr.RouteRequest(7, A3, (A2,)), lm.dsr_option(lm.LinkMetrics(costs))],
        dsr.NO_NEXT_HEADER,
    )


def aodv_request(pm: lm.PathMetric) -> bytes:
    m = aodv.RREQ(1, 5, A9, 0, A1, 3, unknown_seq=True, extensions=[lm.aodv_extension(pm)])
    return aodv.control_packet(m, A2, aodv.BROADCAST, 5)


@pytest.mark.parametrize("costs", [(), (1.0,), (1.5, None, 3.25), (655.34, 1.0)])
def test_link_metrics_round_trip(costs):
    back = lm.from_dsr(lm.dsr_option(lm.LinkMetrics(costs)).data)
    assert back.costs == costs
    ip, hdr = dsr.parse(dsr_request(costs))
    assert lm.find_dsr(hdr.find(dsr.UnknownOption)) == lm.LinkMetrics(costs)


def test_costs_are_clamped_to_what_the_wire_holds_and_aligned_to_the_route():
    got = lm.from_dsr(lm.dsr_option(lm.LinkMetrics((0.5, 1e9))).data)
    assert got.costs == (1.0, lm.MAX_WIRE_COST)
    assert lm.LinkMetrics((1.2,)).aligned(3) == (1.2, None, None)
    assert lm.LinkMetrics((1.2, 1.3, 1.4)).aligned(2) == (1.2, 1.3)


@pytest.mark.parametrize(
    "pm", [lm.PathMetric(0.0, 0), lm.PathMetric(2.37, 1), lm.PathMetric(99.0, 35)]
)
def test_path_metric_round_trip(pm):
    _, m = aodv.parse_control(aodv_request(pm))
    assert lm.find_aodv(m.extensions) == pm
    assert lm.without_aodv(m.extensions) == []


def test_malformed_bodies_are_refused_naming_the_option():
    with pytest.raises(lm.MalformedMetric, match="LINK METRICS body of 3 bytes"):
        lm.LinkMetrics.parse(b"\x01\x00\x01")
    with pytest.raises(lm.MalformedMetric, match="unknown kind 9"):
        lm.LinkMetrics.parse(b"\x09\x00")
    with pytest.raises(lm.MalformedMetric, match="shim"):
        lm.from_dsr(b"\x01\x00\x00\x64")
    with pytest.raises(lm.MalformedMetric, match="PATH METRIC body of 2 bytes"):
        lm.PathMetric.parse(b"\x01\x00")


def test_scapy_builds_and_reads_the_same_bytes():
    from scapy.layers.inet import IP, UDP
    from scapy.packet import Raw

    ours = aodv_request(lm.PathMetric(2.37, 1))
    theirs = IP(ours)
    fresh = theirs.copy()
    del fresh.chksum, fresh[UDP].chksum  # scapy recomputes both checksums: ours agree
    again = IP(bytes(fresh))
    assert (again.chksum, again[UDP].chksum) == (theirs.chksum, theirs[UDP].chksum)
    assert theirs[UDP].dport == aodv.AODV_PORT
    body = bytes(theirs[UDP].payload)
    assert body.endswith(bytes([lm.AODV_EXT_PATH_METRIC, 6]) + lm.PathMetric(2.37, 1).pack())
    rebuilt = bytes(
        IP(src=str(A2), dst="255.255.255.255", ttl=5, tos=ours[1])
        / UDP(sport=654, dport=654)
        / Raw(body)
    )
    _, m = aodv.parse_control(rebuilt)
    assert lm.find_aodv(m.extensions) == lm.PathMetric(2.37, 1)

    ours = dsr_request((1.5, None))
    theirs = IP(ours)
    assert theirs.proto == ipv4.PROTO_DSR
    fresh = theirs.copy()
    del fresh.chksum
    assert IP(bytes(fresh)).chksum == theirs.chksum
    rebuilt = bytes(
        IP(src=str(A1), dst=str(BCAST), ttl=2, proto=ipv4.PROTO_DSR) / Raw(bytes(theirs.payload))
    )
    _, hdr = dsr.parse(rebuilt)
    assert lm.find_dsr(hdr.find(dsr.UnknownOption)).costs == (1.5, None)


def test_tshark_decodes_the_packets_around_them():
    mac1, mac2 = b"\x02\x00" + A1.packed, b"\x02\x00" + A2.packed
    d, a = decode(
        [
            ether(b"\xff" * 6, mac1, dsr_request((1.5, None))),
            ether(b"\xff" * 6, mac2, aodv_request(lm.PathMetric(2.37, 1))),
        ]
    )
    opts = d["dsr"]["Options"]
    assert opts["Route request"]["dsr.option.rreq.targetaddress"] == str(A3)
    assert opts["PadN"]["dsr.option.len"] == "6"  # ours, read as one PadN (the shim)
    assert a["aodv"]["aodv.orig_ip"] == str(A1) and a["aodv"]["aodv.hopcount"] == "1"
    assert a["aodv"]["Extensions"]["aodv.ext_type"] == str(lm.AODV_EXT_PATH_METRIC)


def test_a_parser_that_does_not_know_them_keeps_the_rest():
    """RFC 4728 6.1: type 53's high bits are 00 (skip); RFC 3561 section 9: an unknown
    extension is kept as (type, data) and ignored."""
    ip, hdr = dsr.parse(dsr_request((1.5,)))
    assert dsr.unknown_option_action(lm.DSR_OPT_LINK_METRICS) == "skip"
    assert hdr.find(dsr.RouteRequest)[0].target == A3
    _, m = aodv.parse_control(aodv_request(lm.PathMetric(1.0, 1)))
    assert m.dest == A9 and m.extensions[0][0] == lm.AODV_EXT_PATH_METRIC
