"""What tshark's AODV dissector should show for an RFC 3561 message (section 5).

Shared by tests/daemon/test_wire_aodv.py (hand-built messages) and test_aodv_inputs.py
(what the engine sent); decode frames with :func:`tests.helpers.tshark.decode`.
"""

from __future__ import annotations

from manetkit.daemon.wire import aodv


def as_list(v) -> list:
    return v if isinstance(v, list) else [v]


def expected_fields(msg: aodv.Message) -> dict:
    """What tshark should show for ``msg`` (field names found by decoding and looking)."""
    b = lambda x: str(int(x))  # noqa: E731
    if isinstance(msg, aodv.RREQ):
        return {
            "aodv.type": "1",
            "aodv.hopcount": str(msg.hop_count),
            "aodv.rreq_id": str(msg.rreq_id),
            "aodv.dest_ip": str(msg.dest),
            "aodv.dest_seqno": str(msg.dest_seq),
            "aodv.orig_ip": str(msg.orig),
            "aodv.orig_seqno": str(msg.orig_seq),
            "aodv.flags.rreq_join": b(msg.join),
            "aodv.flags.rreq_repair": b(msg.repair),
            "aodv.flags.rreq_gratuitous": b(msg.gratuitous),
            "aodv.flags.rreq_destinationonly": b(msg.dest_only),
            "aodv.flags.rreq_unknown": b(msg.unknown_seq),
        }
    if isinstance(msg, aodv.RREP):
        return {
            "aodv.type": "2",
            "aodv.hopcount": str(msg.hop_count),
            "aodv.dest_ip": str(msg.dest),
            "aodv.dest_seqno": str(msg.dest_seq),
            "aodv.orig_ip": str(msg.orig),
            "aodv.lifetime": str(msg.lifetime_ms),
            "aodv.prefix_sz": str(msg.prefix_size),
            "aodv.flags.rrep_repair": b(msg.repair),
            "aodv.flags.rrep_ack": b(msg.ack_required),
        }
    if isinstance(msg, aodv.RERR):
        return {
            "aodv.type": "3",
            "aodv.destcount": str(len(msg.dests)),
            "aodv.flags.rerr_nodelete": b(msg.no_delete),
        }
    return {"aodv.type": "4"}


def flat(layer: dict) -> dict:
    """tshark's nested JSON (flag trees) flattened to field -> value."""
    out: dict = {}
    for k, v in layer.items():
        if isinstance(v, dict):
            out.update(flat(v))
        elif k not in out:
            out[k] = v
    return out


def check_decoded(layers: dict, msg: aodv.Message) -> None:
    assert layers["ip"]["ip.checksum.status"] == "1"
    assert layers["udp"]["udp.checksum.status"] == "1"
    fields = flat(layers["aodv"])
    for k, v in expected_fields(msg).items():
        assert fields.get(k) == v, (k, fields.get(k), v)
    if isinstance(msg, aodv.RERR):
        dests = as_list(layers["aodv"]["Unreachable Destinations"])
        ips = [x for d in dests for x in as_list(d["aodv.unreach_dest_ip"])]
        seqs = [x for d in dests for x in as_list(d["aodv.dest_seqno"])]
        assert ips == [str(d) for d, _ in msg.dests]
        assert seqs == [str(s) for _, s in msg.dests]
    if msg.extensions and not isinstance(msg, aodv.RERR):
        # Wireshark's AODV dissector reads extensions of RREQ/RREP only; a RERR's
        # (manetkit's ELFN/ERDN/ERSN) are checked in test_elfn_aodv.py by raw bytes.
        ext = as_list(layers["aodv"]["Extensions"])
        assert [(int(e["aodv.ext_type"]), int(e["aodv.ext_length"])) for e in ext] == [
            (t, len(d)) for t, d in msg.extensions
        ]
