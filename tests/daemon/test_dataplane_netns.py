"""The data plane over real namespaces and veth, no medium: A -> B -> C, static routes."""

from __future__ import annotations

import json
import os

import pytest

from tests.daemon.vethnet import VethMesh, wait_for

pytestmark = pytest.mark.netns


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    with VethMesh(f"mktdp{os.getpid() % 1000}", 3, tmp_path_factory.mktemp("chain")) as mesh:
        # A and C reach each other only through B (the static routes say so).
        mesh.start(1, static_routes={"10.42.0.3": "10.42.0.2"})
        mesh.start(2)
        mesh.start(3, static_routes={"10.42.0.1": "10.42.0.2"})
        for i, want in ((1, {"10.42.0.2"}), (2, {"10.42.0.1", "10.42.0.3"}), (3, {"10.42.0.2"})):
            wait_for(lambda i=i, want=want: mesh.neighbours_up(i, want), 10, f"n{i} neighbours")
        yield mesh


def test_ping_and_tcp_through_forwarding_node(chain):
    r = chain.run(1, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.42.0.3")
    assert " 0% packet loss" in r.stdout, r.stdout
    fwd_before = chain.status(2).engine.counters.get("forwarded", 0)
    assert fwd_before >= 6  # 3 echo requests + 3 replies went through B

    # A TCP transfer (iperf3) through B: every byte over the userspace data plane.
    srv = chain.run(3, "iperf3", "-s", "-1", "-D", "-B", "10.42.0.3")
    assert srv.returncode == 0
    wait_for(lambda: "5201" in chain.run(3, "ss", "-ltn").stdout, 5, "iperf3 server")
    r = chain.run(1, "iperf3", "-c", "10.42.0.3", "-t", "2", "-J", timeout=30)
    res = json.loads(r.stdout)
    mbps = res["end"]["sum_received"]["bits_per_second"] / 1e6
    assert mbps > 1.0, res["end"]
    st = chain.status(2)
    assert st.engine.counters["forwarded"] > fwd_before + 1000
    assert st.counters.dataplane["malformed_ipv4"] == 0
    # The radio carries no IP; mesh0 has the address and the prefix route.
    assert "inet " not in chain.run(2, "ip", "-4", "addr", "show", "rad0").stdout
    assert "10.42.0.2/32" in chain.run(2, "ip", "-4", "addr", "show", "mesh0").stdout
    assert "10.42.0.0/16 dev mesh0" in chain.run(2, "ip", "route").stdout


INJECT = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("rad0", 0))
dst = bytes.fromhex(sys.argv[1].replace(":", ""))
src = bytes.fromhex("02aabbccddee")
good_ip = bytes.fromhex("4500001c0000400040110000" "0a2a0001" "0a2a0002") + bytes(8)
frames = [
    dst + src + b"\\x88\\xb5" + b"\\x45" * 10,               # shorter than an IPv4 header
    dst + src + b"\\x88\\xb5" + b"\\x65" + good_ip[1:],          # IP version 6 in a v4 frame
    dst + src + b"\\x88\\xb5" + b"\\x41" + good_ip[1:],          # IHL 4 (< 20 bytes)
    dst + src + b"\\x88\\xb5" + good_ip[:2] + b"\\x05\\xdc" + good_ip[4:],  # total 1500 > frame
    dst + src + b"\\x08\\x00" + good_ip,                       # not our ethertype: kernel filters
]
for f in frames:
    s.send(f)
"""


def test_malformed_frames_counted_and_dropped(chain):
    before = chain.status(2).counters.dataplane
    chain.run(1, "python3", "-c", INJECT, chain.mac(2))
    wait_for(
        lambda: (
            chain.status(2).counters.dataplane["malformed_ipv4"] >= before["malformed_ipv4"] + 3
        ),
        5,
        "malformed frames counted",
    )
    after = chain.status(2).counters.dataplane
    assert after["malformed_short"] == before["malformed_short"] + 1
    assert after["malformed_ipv4"] == before["malformed_ipv4"] + 3
    assert after["malformed_ethertype"] == before["malformed_ethertype"]  # never reached us
    # ...and the node still forwards.
    r = chain.run(1, "ping", "-c", "1", "-W", "2", "10.42.0.3")
    assert r.returncode == 0
