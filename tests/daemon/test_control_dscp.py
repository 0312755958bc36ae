"""The control packets the daemon originates are marked DSCP CS6 ("network control",
RFC 4594; TOS 0xC0), data keeps the app's TOS, and every checksum stays right: checked
on the frames the engines put on the air, decoded by tshark."""

from __future__ import annotations

import struct
from ipaddress import IPv4Address

from manetkit.daemon.linksense.hello import build_hello, parse_hello
from manetkit.daemon.wire import aodv, dsr, ipv4
from tests.daemon import aodvsim
from tests.daemon.dsrutil import A, dsr_net
from tests.daemon.enginesim import Sim
from tests.helpers import tshark

CS6 = 48  # the DSCP, the TOS byte's upper six bits
APP_TOS = 0x28  # AF11, as an app might set it


def app_packet(src: IPv4Address, dst: IPv4Address, seq: int) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", 40000, 80, seq, 0, 5 << 4, 0x18, 65535, 0, 0)
    return ipv4.build(src, dst, ipv4.PROTO_TCP, tcp + b"x" * 100, tos=APP_TOS)


def check(sim: Sim, is_control) -> tuple[int, int]:
    """Every frame: control -> CS6, data -> the app's TOS; IP (and UDP) checksums good."""
    decoded = tshark.decode([f.ether() for f in sim.frames])
    assert len(decoded) == len(sim.frames)
    control = data = 0
    for f, layers in zip(sim.frames, decoded, strict=True):
        ip = layers["ip"]
        assert ip["ip.checksum.status"] == "1", f
        if "udp" in layers:
            assert layers["udp"]["udp.checksum.status"] == "1", f
        if is_control(f.packet):
            control += 1
            assert int(ip["ip.dsfield_tree"]["ip.dsfield.dscp"]) == CS6, f
            assert f.packet[1] == ipv4.TOS_NETWORK_CONTROL
        else:
            data += 1
            assert int(ip["ip.dsfield"], 16) == APP_TOS, f
    return control, data


def test_dsr_control_is_cs6_data_keeps_its_tos():
    # 1-2-3-4 with a detour 2-5-6-4: discovery, data, a break, Route Error, salvage.
    sim = dsr_net(6, [(1, 2), (2, 3), (3, 4), (2, 5), (5, 6), (6, 4)])
    sim.send(A(1), app_packet(A(1), A(4), 1000))
    sim.run(duration=1.0)
    sim.unlink(A(2), A(3))
    sim.send(A(1), app_packet(A(1), A(4), 2000))
    sim.run(duration=1.0)
    kinds = {type(p.option) for f in sim.frames for p in dsr.parse(f.packet)[1].options}
    assert {dsr.RouteRequest, dsr.RouteReply, dsr.RouteError, dsr.SourceRoute} <= kinds
    control, data = check(sim, dsr.is_control)
    assert control >= 5 and data >= 3
    # Delivered as the app sent it.
    assert sim.delivered[A(4)] and all(p[1] == APP_TOS for p in sim.delivered[A(4)])


def test_aodv_control_is_cs6_data_keeps_its_tos():
    nodes, links = aodvsim.chain(4)
    sim = aodvsim.network(nodes, links, hellos=True)
    sim.send(nodes[0], app_packet(nodes[0], nodes[3], 1000))
    sim.run(duration=3.0)
    sim.unlink(nodes[2], nodes[3])
    sim.send(nodes[0], app_packet(nodes[0], nodes[3], 2000))
    sim.run(duration=3.0)
    msgs = {type(m) for _, m in aodvsim.control(sim)}
    assert {aodv.RREQ, aodv.RREP, aodv.RERR} <= msgs
    assert any(m.dest == f.sender for f, m in aodvsim.control(sim) if isinstance(m, aodv.RREP))
    control, data = check(sim, aodv.is_control)  # Hellos included (RREPs for oneself)
    assert control >= 5 and data >= 3


def test_hello_beacon_is_cs6():
    pkt = build_hello(IPv4Address("10.42.0.5"), 7, 1.0)
    assert pkt[1] == ipv4.TOS_NETWORK_CONTROL and ipv4.checksum(pkt[:20]) == 0
    assert parse_hello(pkt) is not None
