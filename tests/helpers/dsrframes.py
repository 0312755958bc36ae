"""What tshark's DSR dissector should show for an RFC 4728 option, and what it showed.

Shared by the DSR and SMR wire tests (tests/daemon/test_dsr_tshark.py,
test_smr_tshark.py) and the SMR lab test: :func:`tshark_view` is the expectation built
from a :mod:`manetkit.daemon.wire.dsr` option, :func:`seen` the same fields read back from
``tshark -T json`` (:mod:`tests.helpers.tshark`); :func:`decode_a_break` runs the story
both wire tests decode.
"""

from __future__ import annotations

import re
from ipaddress import IPv4Address

from manetkit.daemon.wire import dsr
from tests.daemon.dsrutil import tcp_packet
from tests.daemon.enginesim import Frame, Sim
from tests.helpers import tshark


def hop_list(layer: dict) -> list[str]:
    """tshark lists addresses under a 'Hop list : a b c' subtree (JSON keeps only the
    last duplicate field, so the label is the complete list)."""
    for key in layer:
        m = re.fullmatch(r"Hop list : (.*)", key)
        if m:
            return m.group(1).split()
    return []


LABELS = {
    dsr.RouteRequest: "Route request",
    dsr.RouteReply: "Route reply",
    dsr.RouteError: "Route error",
    dsr.SourceRoute: "Source route",
}


def tshark_view(opt) -> dict:
    """The tshark fields an option should decode to."""
    raw = dsr.pack_option(opt)
    return {"dsr.option.type": str(raw[0]), "dsr.option.len": str(raw[1]), **_fields(opt)}


def _fields(opt) -> dict:
    if isinstance(opt, dsr.RouteRequest):
        return {
            "dsr.option.rreq.id": f"0x{opt.ident:04x}",
            "dsr.option.rreq.targetaddress": str(opt.target),
            "hops": [str(a) for a in opt.addresses],
        }
    if isinstance(opt, dsr.RouteReply):
        return {
            "dsr.option.rrep.lasthopex": str(int(opt.last_hop_external)),
            "dsr.option.rrep.reserved": "0x00",
            "hops": [str(a) for a in opt.addresses],
        }
    if isinstance(opt, dsr.RouteError):
        return {
            "dsr.option.err.type": str(opt.error_type),
            "dsr.option.err.reserved": "0x00",
            "dsr.option.err.salvage": opt.salvage,
            "dsr.option.err.src": str(opt.error_src),
            "dsr.option.err.dest": str(opt.error_dst),
            "dsr.option.err.unreachablenode": str(opt.unreachable),
            "hops": [],
        }
    return {
        "dsr.option.srcrt.firsthopext": str(int(opt.first_hop_external)),
        "dsr.option.srcrt.lasthopext": str(int(opt.last_hop_external)),
        "dsr.option.srcrt.reserved": "0x00",
        "dsr.option.srcrt.segsleft": str(opt.segments_left),
        "dsr.option.srcrt.salvage": opt.salvage,
        "hops": [str(a) for a in opt.addresses],
    }


def seen(layer: dict) -> dict:
    out = {}
    for k, v in layer.items():
        if k.endswith("salvage"):
            out[k] = int(v, 0)
        elif k.startswith("Hop list"):
            out["hops"] = hop_list(layer)
        elif k.startswith("dsr.option."):
            out[k] = v
    out.setdefault("hops", [])
    return out


def decode_a_break(
    sim: Sim, src: IPv4Address, dst: IPv4Address, cut: tuple[IPv4Address, IPv4Address]
) -> tuple[list[Frame], list[dict]]:
    """A TCP segment ``src`` -> ``dst`` (seq 1000), a second of simulated time, the link
    ``cut`` broken, a second segment (seq 2000) and another second: every frame on the air
    and tshark's layers of each, all of them DSR (IP protocol 48) with a good IP checksum."""
    sim.send(src, tcp_packet(src, dst, 40000, 80, 1000))
    sim.run(duration=1.0)
    sim.unlink(*cut)
    sim.send(src, tcp_packet(src, dst, 40000, 80, 2000))
    sim.run(duration=1.0)
    frames = sim.frames
    decoded = tshark.decode([f.ether() for f in frames])
    assert len(decoded) == len(frames)
    for layers in decoded:
        assert layers["ip"]["ip.checksum.status"] == "1", "engine produced a bad IP checksum"
        assert layers["ip"]["ip.proto"] == "48"
    return frames, decoded
