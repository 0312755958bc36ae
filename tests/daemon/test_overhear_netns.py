"""Frames for other stations in the daemon's data plane (real veth, no medium).

A static daemon never sees them (counted ``not_for_us``); a DSR daemon makes its radio
promiscuous, hands them to ``overhear_frame`` and puts the flag back on exit.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.daemon.vethnet import VethMesh, wait_for

pytestmark = pytest.mark.netns

# A valid UDP-in-IPv4 packet from 10.42.0.1 to 10.42.0.9, unicast to a MAC nobody has
# (the bridge floods unknown destinations, so every rad0 receives it).
INJECT = """
import socket
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("rad0", 0))
ip = bytes.fromhex("4500001c0000400040110000" "0a2a0001" "0a2a0009") + bytes(8)
s.send(bytes.fromhex("02aabbccdd09") + bytes.fromhex("02aabbccdd01") + b"\\x88\\xb5" + ip)
"""


def promiscuous(mesh: VethMesh, i: int) -> bool:
    info = json.loads(mesh.run(i, "ip", "-j", "link", "show", "rad0").stdout)[0]
    return "PROMISC" in info["flags"]


def test_frames_for_others_dropped_or_overheard(tmp_path):
    with VethMesh(f"mkovh{os.getpid() % 1000}", 3, tmp_path) as mesh:
        mesh.start(2)  # static: does not want overheard frames
        mesh.start(3, protocol="dsr")
        assert not promiscuous(mesh, 2)
        assert promiscuous(mesh, 3)
        dp2 = mesh.status(2).counters.dataplane
        dp3 = mesh.status(3).counters.dataplane
        mesh.run(1, "python3", "-c", INJECT)
        wait_for(
            lambda: mesh.status(2).counters.dataplane["not_for_us"] == dp2["not_for_us"] + 1,
            5,
            "n2 counts the frame as not for us",
        )
        wait_for(
            lambda: mesh.status(3).counters.dataplane["rx_overheard"] == dp3["rx_overheard"] + 1,
            5,
            "n3 overhears the frame",
        )
        st3 = mesh.status(3)
        # Not DSR: the engine ignored it (never delivered, forwarded or dropped).
        assert st3.engine.counters["overheard-ignored"] == 1
        assert st3.counters.dataplane["not_for_us"] == dp3["not_for_us"]
        assert st3.counters.dataplane["tun_tx"] == dp3["tun_tx"]
        assert mesh.status(2).counters.dataplane["rx_overheard"] == 0
        assert mesh.stop(3) == 0
        assert not promiscuous(mesh, 3)  # put back on exit
