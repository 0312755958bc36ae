"""Atra in the DSR engine (Anantharaman et al. IV-A), in-process network, fake clock.

Walk-away: n1 sends to n4 over n2, which walks north at 10 m/s (powers from the lab's
two-ray model fed as SignalSamples every 0.2 s, as the daemon's link sensing does);
n3 stays in range of both. With RFP the source moves to n3 before the n2 links break.
"""

from __future__ import annotations

import math
import struct

import pytest

from manetkit.daemon.engines.atra import AtraConfig
from manetkit.daemon.engines.base import SignalSample
from manetkit.daemon.wire import dsr, ipv4
from manetkit.daemon.wire import manet_ext as mx
from manetkit.lab.medium.propagation import TwoRayGround
from tests.daemon.dsrutil import A, dsr_net, first, udp_packet

MODEL = TwoRayGround()
EDGE = MODEL.range_m()
SPEED = 10.0
WALK_START = 2.0  # n2 starts walking north at t = 2 s
T_BREAK = WALK_START + math.sqrt(EDGE**2 - 200.0**2) / SPEED  # 17 s


def _walkaway(atra: dict | None, n3_at: float = 1.0):
    cfg = {"atra": AtraConfig(**atra)} if atra else {}
    sim = dsr_net(4, [(1, 2), (2, 4)], **cfg)  # n3 arrives at t = 1 s
    broken = False
    sent = 0
    t = 0.0
    while t < T_BREAK + 3.0:
        sim.run(until=t)
        if t >= T_BREAK and not broken:
            sim.unlink(A(1), A(2), notify=True)  # link sensing: LinkDown at both ends
            sim.unlink(A(2), A(4), notify=True)
            broken = True
        if t == 1.0:
            assert sim.engines[A(1)].cache.lookup(t, A(4)) == (A(1), A(2), A(4))
        if t == n3_at:
            sim.link(A(1), A(3))
            sim.link(A(3), A(4))
        if not broken:
            y = max(0.0, t - WALK_START) * SPEED
            d = math.hypot(200.0, y)
            for a, b in ((1, 2), (2, 1), (2, 4), (4, 2)):
                sim.link_event(A(a), SignalSample(A(b), MODEL.rx_power_dbm(d), t))
            for a, b in ((1, 3), (3, 1), (3, 4), (4, 3)) if t >= n3_at else ():
                sim.link_event(A(a), SignalSample(A(b), MODEL.rx_power_dbm(209.0), t))
        for k in range(4):  # 20 packets/s
            sim.run(until=t + k * 0.05)
            sim.send(A(1), udp_packet(A(1), A(4), struct.pack("!I", sent), ident=sent))
            sent += 1
        t = round(t + 0.2, 6)
    sim.run(duration=2.0)
    return sim, sent


def test_rfp_switches_to_the_staying_relay_before_the_break() -> None:
    sim, sent = _walkaway({"rfp": True})
    pf = [e for node in (1, 2, 4) for e in sim.events(A(node), "predicted-failure")]
    assert pf, "no predicted-failure"
    assert all(e["slope_db_per_s"] < 0 and 0 <= e["eta_s"] <= 2.0 for e in pf)
    switches = [n for n in sim.notified[A(1)] if n.name == "path-switch"]
    assert switches, "the source never switched"
    sw = switches[0].fields
    assert sw["reason"] == "predicted-failure"
    assert sw["to_path"] == ["10.42.0.1", "10.42.0.3", "10.42.0.4"]
    # the switch happened before the links broke: data frames from n1 to n3 before then
    to_n3 = [f.time for f in sim.frames_from(A(1)) if f.next_hop == A(3) and _is_data(f.packet)]
    assert to_n3 and min(to_n3) < T_BREAK
    assert T_BREAK - min(to_n3) < 2 * 2.0  # not absurdly early either
    # nothing lost: the old route carried the data until the new one was in use
    got = {struct.unpack("!I", p[28:32])[0] for p in sim.delivered[A(4)]}
    assert got == set(range(sent))
    # the source never saw its route to n4 break
    assert not [e for e in sim.events(A(1), "route-down") if e["dst"] == "10.42.0.4"]
    st = sim.engines[A(1)].status()["atra"]
    assert st["predictions"] >= 1 and st["predicted_switches"] == 1
    # the predicted links were scored: a hit at the nodes that predicted them
    assert sum(sim.engines[A(i)].status()["atra"]["hits"] for i in (1, 2, 4)) >= 1


def test_rfp_keeps_asking_until_a_way_around_appears() -> None:
    """n3 arrives only after the prediction: the first request finds nothing new, so
    the source asks again (request back-off) and switches once n3 is there, still
    before the break; the current route carries the data meanwhile."""
    n3_at = round(T_BREAK - 1.2, 1)  # the prediction comes ~1.5-2.5 s before the break
    sim, sent = _walkaway({"rfp": True}, n3_at=n3_at)
    switches = [n for n in sim.notified[A(1)] if n.name == "path-switch"]
    assert switches and switches[0].fields["reason"] == "predicted-failure"
    to_n3 = [f.time for f in sim.frames_from(A(1)) if f.next_hop == A(3) and _is_data(f.packet)]
    assert to_n3 and n3_at <= min(to_n3) < T_BREAK
    # n1 had its route since t = 0: every request during the walk is RFP's
    asked = [
        f.time
        for f in sim.frames_from(A(1))
        if f.next_hop is None
        and first(f.packet, dsr.RouteRequest) is not None
        and WALK_START < f.time < T_BREAK
    ]
    assert len(asked) >= 2, f"one request, no retry: {asked}"
    got = {struct.unpack("!I", p[28:32])[0] for p in sim.delivered[A(4)]}
    assert got == set(range(sent))
    assert not [e for e in sim.events(A(1), "route-down") if e["dst"] == "10.42.0.4"]


def test_without_atra_the_source_learns_of_the_break_only_when_it_happens() -> None:
    sim, _ = _walkaway(None)
    down = [e for e in sim.events(A(1), "route-down") if e["dst"] == "10.42.0.4"]
    assert down and down[0]["broken_link"] == ["10.42.0.1", "10.42.0.2"]
    to_n3 = [f.time for f in sim.frames_from(A(1)) if f.next_hop == A(3) and _is_data(f.packet)]
    assert min(to_n3) >= T_BREAK
    assert "atra" not in sim.engines[A(1)].status()


def test_predicted_route_error_carries_the_predicted_option_and_keeps_the_route() -> None:
    sim, _ = _walkaway({"rfp": True})
    errs = [f for f in sim.frames_from(A(2)) if f.next_hop is not None and _has_error(f.packet)]
    pred = [f for f in errs if _predicted(f.packet) is not None]
    assert pred, "n2 (which hears both ends fade) sent no predicted Route Error to n1"
    assert pred[0].time < T_BREAK
    assert sim.engines[A(2)].status()["atra"]["predicted_errors_sent"] >= 1


def test_requests_over_links_predicted_to_fail_are_suppressed() -> None:
    sim, _ = _walkaway({"rfp": True})
    total = sum(sim.engines[A(i)].status()["atra"]["rreq_suppressed"] for i in (2, 4))
    assert total >= 1


def test_pre_tells_every_recent_source_at_once() -> None:
    """n1 and n2 both send to n5 over n3-n4; n4-n5 breaks; n1's packet fails at n4."""
    for pre in (False, True):
        sim = dsr_net(5, [(1, 3), (2, 3), (3, 4), (4, 5)], atra=AtraConfig(pre=pre))
        sim.send(A(1), udp_packet(A(1), A(5)))
        sim.send(A(2), udp_packet(A(2), A(5)))
        sim.run(duration=1.0)
        sim.send(A(1), udp_packet(A(1), A(5)))
        sim.send(A(2), udp_packet(A(2), A(5)))
        sim.run(duration=0.5)
        sim.unlink(A(4), A(5))
        sim.send(A(1), udp_packet(A(1), A(5), ident=9))
        sim.run(duration=0.2)
        assert sim.events(A(1), "route-down"), pre
        assert bool(sim.events(A(2), "route-down")) == pre
        if pre:
            assert sim.engines[A(4)].status()["atra"]["proactive_errors_sent"] == 1


def _tcp(src, dst, sport, dport, flags, payload=b""):
    seg = struct.pack("!HHIIBBHHH", sport, dport, 1, 1, 5 << 4, flags, 65535, 0, 0)
    return ipv4.build(src, dst, ipv4.PROTO_TCP, seg + payload)


@pytest.mark.parametrize("srp", [False, True])
def test_srp_sends_pure_acks_back_along_the_data_path(srp: bool) -> None:
    sim = dsr_net(4, [(1, 2), (2, 4), (1, 3), (3, 4)], atra=AtraConfig(srp=srp))
    sim.engines[A(1)].cache.add(0.0, (A(1), A(2), A(4)))
    sim.send(A(1), _tcp(A(1), A(4), 5000, 80, 0x18, b"x" * 200))
    sim.run(duration=0.1)
    assert sim.delivered[A(4)]
    # n4 then learns a newer route to n1 over n3: its own choice for n1
    sim.engines[A(4)].cache.add(sim.now, (A(4), A(3), A(1)))
    sim.engines[A(4)].forget_routes()
    n = len(sim.frames)
    sim.send(A(4), _tcp(A(4), A(1), 80, 5000, 0x10))  # pure ACK
    sim.send(A(4), _tcp(A(4), A(1), 80, 5000, 0x18, b"reply"))  # piggybacked: not pinned
    hops = [f.next_hop for f in sim.frames[n:] if f.sender == A(4)]
    assert hops == ([A(2), A(3)] if srp else [A(3), A(3)])
    if srp:
        assert sim.engines[A(4)].status()["atra"]["pinned_flows"] == 1


def test_srp_drops_a_pin_whose_link_a_route_error_cut() -> None:
    """n4's ACKs are pinned over n2; n2-n1 breaks (unannounced: n4 hears of it only
    by n2's Route Error for a pinned ACK): the next ACKs take n4's own route over n3
    instead of following the dead pin until the next data packet re-pins the flow."""
    sim = dsr_net(4, [(1, 2), (2, 4), (1, 3), (3, 4)], atra=AtraConfig(srp=True))
    sim.engines[A(1)].cache.add(0.0, (A(1), A(2), A(4)))
    sim.send(A(1), _tcp(A(1), A(4), 5000, 80, 0x18, b"x" * 200))
    sim.run(duration=0.1)
    sim.engines[A(4)].cache.add(sim.now, (A(4), A(3), A(1)))
    sim.unlink(A(1), A(2))
    sim.send(A(4), _tcp(A(4), A(1), 80, 5000, 0x10))  # pinned: fails at n2 -> RERR
    sim.run(duration=1.0)
    assert sim.engines[A(4)].status()["atra"]["pinned_flows"] == 0
    n = len(sim.frames)
    sim.send(A(4), _tcp(A(4), A(1), 80, 5000, 0x10))
    hops = [f.next_hop for f in sim.frames[n:] if f.sender == A(4)]
    assert hops == [A(3)]


def _is_data(packet: bytes) -> bool:
    return packet[ipv4.PROTOCOL] == ipv4.PROTO_DSR and packet[20] != dsr.NO_NEXT_HEADER


def _has_error(packet: bytes) -> bool:
    return packet[20] == dsr.NO_NEXT_HEADER and first(packet, dsr.RouteError) is not None


def _predicted(packet: bytes):
    o = first(packet, dsr.UnknownOption)
    return mx.from_dsr(o.type, o.data) if o is not None else None


def test_tshark_decodes_the_predicted_route_error_as_a_route_error() -> None:
    from tests.helpers import tshark

    sim, _ = _walkaway({"rfp": True})
    frames = [f for f in sim.frames_from(A(2)) if f.next_hop and _predicted(f.packet)]
    assert frames
    layers = tshark.decode([frames[0].ether()])[0]
    assert layers["ip"]["ip.proto"] == "48"
    opts = layers["dsr"]["Options"]
    shown = str(list(opts))
    assert "Route error" in shown and "Source route" in shown, opts
    err = next(v for k, v in opts.items() if "Route error" in k)
    assert err["dsr.option.err.unreachablenode"] in ("10.42.0.1", "10.42.0.4")
