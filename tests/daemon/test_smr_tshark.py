"""tshark decodes SMR's frames as plain DSR (one wire: RFC 4728 options only).

A backup1 discovery on the ladder of tests/helpers/smrnet.py, data over both
rails (a break in between): every frame is decoded by tshark's DSR dissector with the
options the engine put in it, including the duplicate requests SMR forwards and the
destination's second, selected reply.
"""

from __future__ import annotations

from manetkit.daemon.wire import dsr
from tests.daemon.dsrutil import A, first
from tests.helpers.dsrframes import decode_a_break, seen, tshark_view
from tests.helpers.smrnet import LADDER, net


def test_smr_frames_decode_as_dsr() -> None:
    sim = net(range(1, 9), LADDER, slow=(2,), mode="backup1")
    frames, decoded = decode_a_break(sim, A(1), A(8), cut=(A(1), A(2)))
    kinds = set()
    for f, layers in zip(frames, decoded, strict=True):
        _, hdr = dsr.parse(f.packet)
        shown = list(layers["dsr"]["Options"].values())
        ours = [p.option for p in hdr.options if not isinstance(p.option, dsr.UnknownOption)]
        shown = [s for s in shown if s.get("dsr.option.type") != "0"]  # ELFN shim (PadN)
        assert len(shown) == len(ours)
        for opt, layer in zip(ours, shown, strict=True):
            kinds.add(type(opt))
            assert seen(layer) == tshark_view(opt), (f, opt)
    assert {dsr.RouteRequest, dsr.RouteReply, dsr.SourceRoute} <= kinds
    replies = [
        seen(decoded[i]["dsr"]["Options"]["Route reply"])["hops"]
        for i, f in enumerate(frames)
        if f.sender == A(8) and first(f.packet, dsr.RouteReply)
    ]
    # The first copy's path at once, then the shortest-hop one (Lim/Xu/Gerla V-B.1).
    assert replies == [
        ["10.42.0.4", "10.42.0.5", "10.42.0.6", "10.42.0.8"],
        ["10.42.0.2", "10.42.0.3", "10.42.0.8"],
    ]
    after = [
        str(f.next_hop)
        for i, f in enumerate(frames)
        if f.sender == A(1) and decoded[i].get("tcp", {}).get("tcp.seq_raw") == "2000"
    ]
    assert after[-1] == "10.42.0.4"  # the backup rail carried it
