"""ELFN over DSR: the Route Error carries the failed packet's flow to the source.

Holland & Vaidya section 6; wire format in docs/elfn-bus.md (DSR option 48).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from manetkit.daemon.wire import dsr
from manetkit.daemon.wire import manet_ext as mx
from tests.daemon.dsrutil import A, chain_links, dsr_net, first, tcp_packet
from tests.helpers import tshark


def _break_mid_chain():
    """1-2-3-4-5, a TCP flow 1->5, then link 3-4 breaks under the next segment."""
    sim = dsr_net(5, chain_links(5))
    sim.send(A(1), tcp_packet(A(1), A(5), 40000, 4242, 1000))
    sim.run(duration=1.0)
    assert len(sim.delivered[A(5)]) == 1
    sim.unlink(A(3), A(4))
    sim.send(A(1), tcp_packet(A(1), A(5), 40000, 4242, 2448))
    sim.run(duration=1.0)
    return sim


def test_source_gets_the_failed_packets_flow():
    sim = _break_mid_chain()
    downs = [e for e in sim.events(A(1), "route-down") if e.get("elfn")]
    assert downs == [
        {
            "dst": "10.42.0.5",
            "next_hop": "10.42.0.2",
            "reason": "rerr",
            "broken_link": ["10.42.0.3", "10.42.0.4"],
            "broken_by": "10.42.0.3",
            "src": "10.42.0.1",
            "sport": 40000,
            "dport": 4242,
            "proto": 6,
            "seq": 2448,
            "elfn": True,
        }
    ]
    # Intermediate node 2 forwards the Route Error but reports nothing about the flow.
    assert not [e for e in sim.events(A(2), "route-down") if e.get("elfn")]


def test_non_tcp_failure_has_no_ports_and_no_elfn_without_tcp_fields():
    from tests.daemon.dsrutil import udp_packet

    sim = dsr_net(4, chain_links(4))
    sim.send(A(1), udp_packet(A(1), A(4)))
    sim.run(duration=1.0)
    sim.unlink(A(2), A(3))
    sim.send(A(1), udp_packet(A(1), A(4), b"again"))
    sim.run(duration=1.0)
    (down,) = [e for e in sim.events(A(1), "route-down") if e.get("elfn")]
    assert down["proto"] == 17 and "seq" not in down and down["sport"] == 0


def _rerr_frame(sim):
    (f,) = [f for f in sim.frames if f.sender == A(3) and first(f.packet, dsr.RouteError)]
    return f


def test_rerr_carries_the_elfn_option():
    sim = _break_mid_chain()
    f = _rerr_frame(sim)
    _, hdr = dsr.parse(f.packet)
    opts = [p.option for p in hdr.options]
    assert [type(o) for o in opts] == [dsr.RouteError, dsr.UnknownOption, dsr.SourceRoute]
    unk = opts[1]
    assert unk.type == mx.DSR_OPT_ELFN and dsr.unknown_option_action(unk.type) == "skip"
    flow = mx.from_dsr(unk.type, unk.data)
    assert flow == mx.Flow(A(1), A(5), 40000, 4242, 2448, 6)


def test_tshark_decodes_the_route_error_around_the_elfn_option():
    sim = _break_mid_chain()
    f = _rerr_frame(sim)
    with tempfile.TemporaryDirectory() as tmp:
        pcap = Path(tmp) / "rerr.pcap"
        tshark.write_pcap(pcap, [f.ether()])
        out = subprocess.run(
            [tshark.require_tshark(), "-n", "-r", str(pcap), "-d", "ethertype==0x88b5,ip"]
            + ["-T", "json", "-x", "--no-duplicate-keys"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    (layers,) = [p["_source"]["layers"] for p in json.loads(out)]
    assert "_ws.malformed" not in layers
    opts = layers["dsr"]["Options"]
    # The standard Route Error fields still decode.
    err = opts["Route error"]
    assert err["dsr.option.err.type"] == "1"
    assert err["dsr.option.err.src"] == "10.42.0.3"
    assert err["dsr.option.err.dest"] == "10.42.0.1"
    assert err["dsr.option.err.unreachablenode"] == "10.42.0.4"
    # ... and so does the Source Route after our option.
    assert opts["Source route"]["dsr.option.srcrt.segsleft"] == "1"
    # Our option: the raw DSR bytes tshark reports hold type 48, length 20 right after
    # the Route Error (4-byte header + 16-byte Route Error), and its shim shows as PadN.
    raw = bytes.fromhex(layers["dsr_raw"][0])
    assert raw[20] == mx.DSR_OPT_ELFN and raw[21] == 20
    pad = {k: v for k, v in opts["PadN"].items() if not k.endswith("_raw")}
    assert pad == {"dsr.option.type": "0", "dsr.option.len": "18"}
    assert mx.from_dsr(raw[20], raw[22 : 22 + 20]).seq == 2448
