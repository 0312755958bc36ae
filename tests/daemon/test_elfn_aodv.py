"""ELFN over AODV: the RERR carries the failed packet's flow (extension 250) to the source.

Holland & Vaidya section 6; wire format in docs/elfn-bus.md.
"""

from __future__ import annotations

import json
import struct
import subprocess
import tempfile
from pathlib import Path

from manetkit.daemon.wire import aodv, ipv4
from manetkit.daemon.wire import manet_ext as mx
from tests.daemon.aodvsim import addr, chain, control, network
from tests.helpers import tshark

N1, N5 = addr(1), addr(5)


def tcp(src, dst, seq, sport=40000, dport=4242):
    seg = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x18, 65535, 0, 0)
    return ipv4.build(src, dst, ipv4.PROTO_TCP, seg + b"x" * 100)


def break_mid_chain(forget_precursors=False):
    nodes, links = chain(5)
    sim = network(nodes, links, local_repair=False)
    sim.send(N1, tcp(N1, N5, 1000))
    sim.run(duration=1.0)
    assert len(sim.delivered[N5]) == 1
    if forget_precursors:
        # Routes whose precursor lists do not name the way back to the flow's source
        # (e.g. learnt from another node's discovery): ELFN must still get there.
        for i in (2, 3):
            sim.engines[addr(i)].route(N5).precursors.clear()
    sim.unlink(addr(3), addr(4))
    sim.send(N1, tcp(N1, N5, 2448))
    sim.run(duration=1.0)
    return sim


EXPECTED = {
    "dst": "10.42.0.5",
    "next_hop": "10.42.0.2",
    "reason": "rerr",
    "broken_by": "10.42.0.2",
    "src": "10.42.0.1",
    "sport": 40000,
    "dport": 4242,
    "proto": 6,
    "seq": 2448,
    "elfn": True,
}


def test_source_gets_the_failed_packets_flow():
    sim = break_mid_chain()
    assert [e for e in sim.events(N1, "route-down") if e.get("elfn")] == [EXPECTED]
    assert not [e for e in sim.events(addr(2), "route-down") if e.get("elfn")]


def test_source_gets_it_without_precursors():
    sim = break_mid_chain(forget_precursors=True)
    assert [e for e in sim.events(N1, "route-down") if e.get("elfn")] == [EXPECTED]


def _rerrs(sim, sender):
    return [(f, m) for f, m in control(sim, addr(sender)) if isinstance(m, aodv.RERR)]


def test_rerr_carries_the_elfn_extension_hop_by_hop():
    sim = break_mid_chain()
    for sender in (3, 2):
        ((f, m),) = _rerrs(sim, sender)
        assert [t for t, _ in m.extensions] == [mx.AODV_EXT_ELFN]
        assert mx.from_aodv(*m.extensions[0]) == mx.Flow(N1, N5, 40000, 4242, 2448, 6)
        assert N5 in [d for d, _ in m.dests] and not m.no_delete


def test_tshark_decodes_the_rerr_with_the_extension():
    sim = break_mid_chain()
    ((f, m),) = _rerrs(sim, 3)
    with tempfile.TemporaryDirectory() as tmp:
        pcap = Path(tmp) / "rerr.pcap"
        tshark.write_pcap(pcap, [f.ether()])
        out = subprocess.run(
            [tshark.require_tshark(), "-n", "-r", str(pcap), "-d", "ethertype==0x88b5,ip"]
            + ["-o", "udp.check_checksum:TRUE", "-T", "json", "-x", "--no-duplicate-keys"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    (layers,) = [p["_source"]["layers"] for p in json.loads(out)]
    assert "_ws.malformed" not in layers
    assert layers["udp"]["udp.checksum.status"] == "1"
    a = layers["aodv"]
    n = len(m.dests)
    assert a["aodv.type"] == "3" and a["aodv.destcount"] == str(n)
    dests = a["Unreachable Destinations"]
    ips, seqs = dests["aodv.unreach_dest_ip"], dests["aodv.dest_seqno"]
    ips, seqs = ([ips], [seqs]) if isinstance(ips, str) else (ips, seqs)
    assert ips == [str(d) for d, _ in m.dests] and "10.42.0.5" in ips
    assert seqs == [str(s) for _, s in m.dests]
    # The extension follows the fixed part and the destinations (4 + 8n bytes): tshark
    # counts it in the AODV message it shows (type 250, length 18).
    raw = bytes.fromhex(layers["aodv_raw"][0])
    o = 4 + 8 * n
    assert len(raw) == o + 2 + 18
    assert (raw[o], raw[o + 1]) == (mx.AODV_EXT_ELFN, 18)
    assert mx.from_aodv(raw[o], raw[o + 2 :]).seq == 2448
