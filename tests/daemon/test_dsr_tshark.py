"""tshark decodes the frames the DSR engine actually produced, with the fields it meant.

A simulated discovery, data transfer, link break, Route Error and salvage on
1-2-3-4 with a detour 2-5-6-4; every frame on the air is decoded by tshark's DSR
dissector and compared with what the engine put in it.
"""

from __future__ import annotations

from manetkit.daemon.wire import dsr, ipv4
from tests.daemon.dsrutil import A, dsr_net, first
from tests.helpers.dsrframes import LABELS, decode_a_break, seen, tshark_view


def test_engine_frames_decode_as_meant():
    links = [(1, 2), (2, 3), (3, 4), (2, 5), (5, 6), (6, 4)]
    sim = dsr_net(6, links)
    frames, decoded = decode_a_break(sim, A(1), A(4), cut=(A(2), A(3)))

    kinds = set()
    for f, layers in zip(frames, decoded, strict=True):
        _, hdr = dsr.parse(f.packet)
        shown = [v for k, v in layers["dsr"]["Options"].items()]
        ours = [p.option for p in hdr.options]
        assert len(shown) == len(ours)
        for opt, layer in zip(ours, shown, strict=True):
            if isinstance(opt, dsr.UnknownOption):
                # manetkit's ELFN option (docs/elfn-bus.md): Wireshark shows its shim
                # as a PadN over the body; test_elfn_dsr.py checks it in detail.
                assert layer == {"dsr.option.type": "0", "dsr.option.len": str(len(opt.data) - 2)}
                continue
            kinds.add(type(opt))
            assert LABELS[type(opt)] in str(list(layers["dsr"]["Options"]))
            assert seen(layer) == tshark_view(opt), (f, opt)
        if hdr.next_header == ipv4.PROTO_TCP:
            assert layers["tcp"]["tcp.srcport"] == "40000" and layers["tcp"]["tcp.dstport"] == "80"
    assert kinds == set(LABELS)

    # The story, as tshark tells it.
    def dsr_of(i):
        return decoded[i]["dsr"]["Options"]

    def by(sender, kind):
        return [i for i, f in enumerate(frames) if f.sender == A(sender) and first(f.packet, kind)]

    rreqs = by(1, dsr.RouteRequest)
    assert [decoded[i]["ip"]["ip.ttl"] for i in rreqs] == ["1", "255"]  # ring-0, then propagating
    assert [seen(dsr_of(i)["Route request"])["dsr.option.rreq.targetaddress"] for i in rreqs] == [
        "10.42.0.4"
    ] * 2
    replies = [seen(dsr_of(i)["Route reply"])["hops"] for i in by(4, dsr.RouteReply)]
    assert ["10.42.0.2", "10.42.0.3", "10.42.0.4"] in replies
    # Data hop by hop: Segments Left counts down 2, 1, 0 along 1-2-3-4.
    data = [
        (str(f.sender), seen(dsr_of(i)["Source route"])["dsr.option.srcrt.segsleft"])
        for i, f in enumerate(frames)
        if decoded[i].get("tcp", {}).get("tcp.seq_raw") == "1000"
    ]
    assert data == [("10.42.0.1", "2"), ("10.42.0.2", "1"), ("10.42.0.3", "0")]
    # After the break: node 2's Route Error to node 1 and the salvaged packet.
    (rerr,) = [seen(dsr_of(i)["Route error"]) for i in by(2, dsr.RouteError)]
    assert rerr["dsr.option.err.unreachablenode"] == "10.42.0.3"
    assert rerr["dsr.option.err.dest"] == "10.42.0.1"
    salvaged = [
        seen(dsr_of(i)["Source route"])
        for i, f in enumerate(frames)
        if decoded[i].get("tcp", {}).get("tcp.seq_raw") == "2000" and f.sender == A(2)
    ]
    assert salvaged[-1]["dsr.option.srcrt.salvage"] == 1
    assert salvaged[-1]["hops"] == ["10.42.0.2", "10.42.0.5", "10.42.0.6"]
