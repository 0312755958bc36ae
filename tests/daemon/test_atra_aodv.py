"""Atra RFP in the AODV engine: the same walk-away as test_atra_dsr.py, on RFC 3561's
RERR (N flag + PREDICTED extension) and a destination-only RREQ; fake clock."""

from __future__ import annotations

import math

from manetkit.daemon.engines.aodv import AodvConfig
from manetkit.daemon.engines.atra import AtraConfig
from manetkit.daemon.engines.base import SignalSample
from manetkit.daemon.wire import aodv
from manetkit.daemon.wire import manet_ext as mx
from manetkit.lab.medium.propagation import TwoRayGround
from tests.daemon.aodvsim import addr as A
from tests.daemon.aodvsim import control, data, network, payload_id

MODEL = TwoRayGround()
SPEED = 10.0
WALK_START = 2.0
T_BREAK = WALK_START + math.sqrt(MODEL.range_m() ** 2 - 200.0**2) / SPEED


def _walkaway(atra: bool):
    cfg = AodvConfig(hellos=False, atra=AtraConfig(rfp=atra))
    sim = network([A(i) for i in range(1, 5)], [(A(1), A(2)), (A(2), A(4))], config=cfg)
    sent = 0
    broken = False
    t = 0.0
    while t < T_BREAK + 3.0:
        sim.run(until=t)
        if t == 1.0:
            assert sim.engines[A(1)].route(A(4)).next_hop == A(2)
            sim.link(A(1), A(3))
            sim.link(A(3), A(4))
        if t >= T_BREAK and not broken:
            sim.unlink(A(1), A(2), notify=True)
            sim.unlink(A(2), A(4), notify=True)
            broken = True
        if not broken:
            d = math.hypot(200.0, max(0.0, t - WALK_START) * SPEED)
            for a, b in ((1, 2), (2, 1), (2, 4), (4, 2)):
                sim.link_event(A(a), SignalSample(A(b), MODEL.rx_power_dbm(d), t))
        for k in range(4):
            sim.run(until=t + k * 0.05)
            sim.send(A(1), data(A(1), A(4), sent))
            sent += 1
        t = round(t + 0.2, 6)
    sim.run(duration=2.0)
    return sim, sent


def test_rfp_moves_the_source_to_the_staying_relay_before_the_break() -> None:
    sim, sent = _walkaway(True)
    assert sim.events(A(1), "predicted-failure") or sim.events(A(2), "predicted-failure")
    sw = [n.fields for n in sim.notified[A(1)] if n.name == "path-switch"]
    assert sw and sw[0]["reason"] == "predicted-failure"
    assert sw[0]["to_path"] == ["10.42.0.1", "10.42.0.3", "10.42.0.4"]
    to_n3 = [f.time for f in sim.frames_from(A(1)) if f.next_hop == A(3)]
    assert to_n3 and min(to_n3) < T_BREAK
    got = {payload_id(p) for p in sim.delivered[A(4)]}
    assert got == set(range(sent))
    # the RREQ that found the new route asked the destination only
    rreqs = [m for f, m in control(sim, A(1)) if isinstance(m, aodv.RREQ) and f.time > 2.0]
    assert rreqs and rreqs[0].dest_only
    assert sim.engines[A(1)].status()["atra"]["predicted_switches"] == 1


def test_predicted_rerr_keeps_the_route_and_carries_the_extension() -> None:
    sim, _ = _walkaway(True)
    rerrs = [(f, m) for f, m in control(sim, A(2)) if isinstance(m, aodv.RERR)]
    pred = [
        (f, m)
        for f, m in rerrs
        if any(isinstance(mx.from_aodv(t, d), mx.Predicted) for t, d in m.extensions)
    ]
    assert pred and pred[0][0].time < T_BREAK and pred[0][1].no_delete
    assert not [e for e in sim.events(A(1), "route-down") if e["dst"] == "10.42.0.4"]


def test_without_atra_the_source_switches_only_after_the_break() -> None:
    sim, _ = _walkaway(False)
    to_n3 = [f.time for f in sim.frames_from(A(1)) if f.next_hop == A(3)]
    assert not to_n3 or min(to_n3) >= T_BREAK
    assert "atra" not in sim.engines[A(1)].status()
