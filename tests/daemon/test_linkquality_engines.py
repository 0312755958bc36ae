"""Link quality in the engines, on hand-built topologies with a fake clock
(:mod:`tests.daemon.qualitysim`: broadcasts and unicasts get through with each link's
own probabilities, beacons, signal samples and transmit reports as the daemon's link
sensing gives them).

- the gray-zone chain (Lundgren et al. 2002): n1..n5 with good links between
  neighbours and gray links skipping one (broadcasts get through, data mostly not);
- hop count and ETX disagree: n1-n2-n5 over lossy links, n1-n3-n4-n5 over clean ones;
- the veto: a failure on a link still heard at a steady signal;
- nodes that do not know the new option and extension.
"""

from __future__ import annotations

from ipaddress import IPv4Address

import pytest

from manetkit.daemon.engines.aodv import AodvConfig, AodvEngine
from manetkit.daemon.engines.base import LinkDown, TxFailed
from manetkit.daemon.engines.dsr import DsrConfig, DsrEngine
from manetkit.daemon.engines.dsr.cache import RouteCache
from manetkit.daemon.engines.linkquality import LinkQualityConfig
from manetkit.daemon.engines.linkquality.config import (
    AdmissionConfig,
    MetricConfig,
    VetoConfig,
)
from manetkit.daemon.engines.smr import SmrConfig, SmrEngine
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.wire import aodv, dsr
from manetkit.daemon.wire import linkmetric as lm
from tests.daemon import aodvsim
from tests.daemon.dsrutil import A
from tests.daemon.qualitysim import GOOD, GRAY, Quality, QualitySim, hostpart

# Each mechanism alone: the veto (on by default) is switched off unless a test names it.
NO_VETO = VetoConfig(enabled=False)
OFF = LinkQualityConfig(veto=NO_VETO)
ADMISSION = LinkQualityConfig(admission=AdmissionConfig(signal=True), veto=NO_VETO)
ETX = LinkQualityConfig(metric=MetricConfig(kind="etx"), veto=NO_VETO)
LOSSY = Quality(0.6, 0.5, -80.0)


def gray_chain() -> dict:
    links = {(A(i), A(i + 1)): GOOD for i in range(1, 5)}
    links.update({(A(i), A(i + 2)): GRAY for i in range(1, 4)})
    return links


def disagree() -> dict:
    """Hop count: n1-n2-n5 (2 lossy hops); ETX: n1-n3-n4-n5 (3 clean hops)."""
    return {
        (A(1), A(2)): LOSSY,
        (A(2), A(5)): LOSSY,
        (A(1), A(3)): GOOD,
        (A(3), A(4)): GOOD,
        (A(4), A(5)): GOOD,
    }


def engines(proto: str, lq: LinkQualityConfig, n: int = 5, **cfg) -> dict:
    if proto == "dsr":
        return {
            A(i): DsrEngine(A(i), DsrConfig(seed=i, link_quality=lq, **cfg), NeighbourTable())
            for i in range(1, n + 1)
        }
    if proto == "smr":
        return {
            A(i): SmrEngine(A(i), SmrConfig(seed=i, link_quality=lq, **cfg), NeighbourTable())
            for i in range(1, n + 1)
        }
    return {
        A(i): AodvEngine(A(i), AodvConfig(link_quality=lq, **cfg), NeighbourTable())
        for i in range(1, n + 1)
    }


def flow(
    sim: QualitySim, src: int = 1, dst: int = 5, seconds: float = 20.0, warmup: float = 3.0
) -> float:
    """20 packets a second from ``src`` to ``dst`` after ``warmup`` s of beacons: the
    share delivered."""
    sim.run(until=warmup)
    sent, t = 0, warmup
    while t < warmup + seconds:
        sent += 1
        sim.send(A(src), aodvsim.data(A(src), A(dst), sent))
        t += 0.05
        sim.run(until=t)
    sim.run(until=t + 2.0)
    return len({aodvsim.payload_id(p) for p in sim.delivered[A(dst)]}) / sent


def route(eng, dst: int) -> tuple[int, ...]:
    if isinstance(eng, AodvEngine):
        r = eng.route(A(dst))
        return (hostpart(r.next_hop), r.hops) if r is not None else ()
    r = eng.strategy.route_for(eng._now, A(dst))
    return tuple(hostpart(a) for a in r) if r else ()


# -- the gray-zone chain ---------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2])
def test_dsr_on_the_gray_chain_admission_avoids_the_gray_links(seed):
    off = engines("dsr", OFF)
    assert flow(QualitySim(off, gray_chain(), seed=seed)) < 0.2  # routes over gray links
    on = engines("dsr", ADMISSION)
    assert flow(QualitySim(on, gray_chain(), seed=seed)) > 0.97
    assert route(on[A(1)], 5) == (1, 2, 3, 4, 5)
    refused = sum(e.counters["admission-refused-signal"] for e in on.values())
    assert refused > 0 and refused == sum(e.counters["link-not-admitted"] for e in on.values())


@pytest.mark.parametrize("seed", [1, 2])
def test_dsr_with_the_defaults_rides_out_the_gray_links_failures(seed):
    """The veto, on by default: a frame lost on a gray link no longer tears the route
    down at once, so the source's packets keep getting through."""
    off = flow(QualitySim(engines("dsr", OFF), gray_chain(), seed=seed))
    defaults = engines("dsr", LinkQualityConfig())
    assert flow(QualitySim(defaults, gray_chain(), seed=seed)) > max(0.3, 5 * off)
    assert sum(e.counters["veto-vetoed"] for e in defaults.values()) > 0


def test_dsr_etx_learns_the_gray_links_from_the_data_path():
    eng = engines("dsr", ETX)
    assert flow(QualitySim(eng, gray_chain(), seed=1)) > 0.9
    assert route(eng[A(1)], 5) == (1, 2, 3, 4, 5)
    assert eng[A(1)].status()["link_quality"]["links"][1]["etx"] > 5  # n3: the gray one


@pytest.mark.parametrize("proto", ["aodv", "smr"])
def test_aodv_and_smr_with_admission_deliver_everything_on_the_gray_chain(proto):
    on = engines(proto, ADMISSION)
    assert flow(QualitySim(on, gray_chain(), seed=3)) > 0.97
    if proto == "aodv":
        assert route(on[A(1)], 5) == (2, 4)  # next hop n2, 4 hops
    else:
        assert route(on[A(1)], 5) == (1, 2, 3, 4, 5)


# -- hop count and ETX disagree ----------------------------------------------------------


@pytest.mark.parametrize("proto", ["dsr", "smr"])
def test_dsr_selects_by_etx_where_hop_count_takes_the_lossy_path(proto):
    eng = engines(proto, ETX)
    sim = QualitySim(eng, disagree(), seed=2)
    flow(sim, seconds=5, warmup=10)
    n1 = eng[A(1)]
    cached = {tuple(hostpart(a) for a in e.path) for e in n1.cache.entries()}
    assert cached == {(1, 2, 5), (1, 3, 4, 5)}  # both discovered
    assert route(n1, 5) == (1, 3, 4, 5)  # ETX
    by_hops = RouteCache(A(1))
    for e in n1.cache.entries():
        by_hops.add(sim.now, e.path)
    assert by_hops.lookup(sim.now, A(5)) == (A(1), A(2), A(5))  # hop count
    cost = n1.cache.metric.path_cost
    assert cost(sim.now, (A(1), A(3), A(4), A(5))) < cost(sim.now, (A(1), A(2), A(5)))
    # Each reply carried one cost per link of its route, accumulated along the request.
    carried = {}
    for f in sim.frames:
        if f.sender == A(5) and dsr.is_control(f.packet):
            h = dsr.parse(f.packet)[1]
            rrep = h.find(dsr.RouteReply)
            got = lm.find_dsr(h.find(dsr.UnknownOption))
            if rrep and got is not None:
                carried[tuple(hostpart(a) for a in rrep[0].addresses)] = got.costs
    assert len(carried[(3, 4, 5)]) == 3 and all(c < 1.5 for c in carried[(3, 4, 5)])
    assert len(carried[(2, 5)]) == 2 and all(c > 1.5 for c in carried[(2, 5)])


def test_aodv_selects_by_the_accumulated_metric():
    hops = engines("aodv", OFF)
    flow(QualitySim(hops, disagree(), seed=2), seconds=5, warmup=10)
    assert route(hops[A(1)], 5) == (2, 2)
    etx = engines("aodv", ETX)
    sim = QualitySim(etx, disagree(), seed=2)
    flow(sim, seconds=5, warmup=10)
    r = etx[A(1)].route(A(5))
    assert (hostpart(r.next_hop), r.hops) == (3, 3)
    assert 3.0 <= r.cost < 4.0  # three clean links' ETX, accumulated along the way
    # every RREP the destination sent carries PATH METRIC 0 over 0 hops
    reps = [m for f, m in aodvsim.control(sim, A(5)) if isinstance(m, aodv.RREP) and f.next_hop]
    assert reps and all(lm.find_aodv(m.extensions) == lm.PathMetric(0.0, 0) for m in reps)


def test_better_copies_of_a_request_are_processed_again():
    """n4 hears n1's request first over n2 (2 lossy hops), later over n3-n6 (3 clean
    ones): by ETX the later copy is cheaper, so n4 processes it again and n1 gets the
    clean route (over seeds: the lossy copy does not always come first)."""
    links = {
        (A(1), A(2)): LOSSY,
        (A(2), A(4)): LOSSY,
        (A(1), A(3)): GOOD,
        (A(3), A(6)): GOOD,
        (A(6), A(4)): GOOD,
        (A(4), A(5)): GOOD,
    }
    for proto, counter, want in (
        ("dsr", "request-better-copy", (1, 3, 6, 4, 5)),
        ("aodv", "rreq-better-copy", (3, 4)),
    ):
        better = 0
        for seed in range(1, 7):
            eng = engines(proto, ETX, n=6)
            flow(QualitySim(eng, links, seed=seed), seconds=2, warmup=10)
            better += sum(e.counters[counter] for e in eng.values())
            assert route(eng[A(1)], 5) == want, (proto, seed)
        assert better >= 2, proto


def test_smr_backup_is_chosen_by_path_quality():
    """n5 collects the copies of n1's request over n2 and n6 (2 lossy hops each) and
    n3-n4 (3 clean hops). By hop count SMR keeps the two lossy paths; by ETX the clean
    one is the primary (the cheaper reply, backup1) and a lossy one the backup."""
    links = disagree()
    links[(A(1), A(6))] = LOSSY
    links[(A(6), A(5))] = LOSSY
    got = {}
    for name, lq in (("hops", OFF), ("etx", ETX)):
        eng = engines("smr", lq, n=6)
        flow(QualitySim(eng, links, seed=6), seconds=3, warmup=10)
        got[name] = [tuple(hostpart(a) for a in p) for p in eng[A(1)].strategy.sets[A(5)].paths()]
    assert got["hops"] == [(1, 2, 5), (1, 6, 5)]
    assert got["etx"][0] == (1, 3, 4, 5) and len(got["etx"]) == 2


# -- the veto ----------------------------------------------------------------------------


@pytest.mark.parametrize("proto", ["dsr", "aodv"])
def test_veto_keeps_the_route_on_a_false_failure_and_breaks_on_real_ones(proto):
    lq = LinkQualityConfig(veto=VetoConfig(enabled=True, failures=3))
    links = {(A(1), A(2)): GOOD, (A(2), A(3)): GOOD}
    eng = engines(proto, lq, n=3)
    sim = QualitySim(eng, links, seed=1)
    flow(sim, dst=3, seconds=2)
    pkt = aodvsim.data(A(1), A(3), 999)
    if proto == "dsr":
        pkt = None  # the failed packet: DSR's salvage needs a whole one; none is fine
    sim.link_event(A(1), TxFailed(A(2), pkt))
    sim.link_event(A(1), LinkDown(A(2), "tx-failed"))  # link sensing's hysteresis
    assert route(eng[A(1)], 3)  # the route stayed
    assert not sim.events(A(1), "route-down")
    c = eng[A(1)].counters
    assert c["veto-vetoed"] == 1 and c["veto-linkdown-ignored"] == 1
    if proto == "aodv":
        assert c["veto-resent"] == 1
    # the neighbour walks off (its signal falls 5 dB/s): the next failure breaks at once
    for i in range(1, 16):
        sim.set_quality(A(1), A(2), Quality(1.0, 0.97, -75.0 - 1.0 * i))
        sim.send(A(1), aodvsim.data(A(1), A(3), 1000 + i))
        sim.run(duration=0.2)
    sim.link_event(A(1), TxFailed(A(2), None))
    assert sim.events(A(1), "route-down")
    assert c["veto-break-falling"] == 1
    # frames got through after the vetoed failure: the veto was right, no break delayed
    assert c["veto-confirmed"] == 1 and c["veto-delayed-breaks"] == 0


# -- nodes that do not know the option / extension -----------------------------------------


def test_a_dsr_node_without_the_metric_passes_requests_on_and_costs_stay_aligned():
    """n2 runs without link quality: it forwards the request without LINK METRICS; n3
    fills the unknown link and appends its own, and the route still works."""
    eng = engines("dsr", ETX, n=3)
    eng[A(2)] = DsrEngine(A(2), DsrConfig(seed=2), NeighbourTable())
    sim = QualitySim(eng, {(A(1), A(2)): GOOD, (A(2), A(3)): GOOD}, seed=1)
    assert flow(sim, dst=3, seconds=2) > 0.95
    fwd = [
        dsr.parse(f.packet)[1]
        for f in sim.frames
        if f.sender == A(2) and f.next_hop is None and dsr.is_control(f.packet)
    ]
    assert fwd and all(lm.find_dsr(h.find(dsr.UnknownOption)) is None for h in fwd)
    got = eng[A(3)].link_metric.metric.learnt
    assert (A(2), A(3)) in got and (A(1), A(2)) not in got  # n2 added nothing


def test_a_plain_dsr_node_skips_the_option_as_rfc4728_says():
    assert dsr.unknown_option_action(lm.DSR_OPT_LINK_METRICS) == "skip"
    pkt = dsr.encapsulate(
        dsr.IPFields(A(1), IPv4Address("255.255.255.255"), ttl=2),
        [dsr.RouteRequest(7, A(3)), lm.dsr_option(lm.LinkMetrics((1.5,)))],
        dsr.NO_NEXT_HEADER,
    )
    plain = DsrEngine(A(2), DsrConfig(seed=2), NeighbourTable())
    plain.receive_frame(0.0, pkt, b"\x02\x00" + A(1).packed)
    assert plain.counters["requests-received"] == 1 and plain.counters["malformed"] == 0


def test_an_aodv_node_without_the_metric_forwards_the_extension_unchanged():
    eng = engines("aodv", ETX, n=3)
    eng[A(2)] = AodvEngine(A(2), AodvConfig(), NeighbourTable())
    sim = QualitySim(eng, {(A(1), A(2)): GOOD, (A(2), A(3)): GOOD}, seed=1)
    assert flow(sim, dst=3, seconds=2) > 0.95
    by2 = [m for _, m in aodvsim.control(sim, A(2)) if isinstance(m, aodv.RREQ)]
    by1 = [m for _, m in aodvsim.control(sim, A(1)) if isinstance(m, aodv.RREQ)]
    if by2:  # n1's ring-1 request may have reached n3 directly: not in this chain
        assert lm.find_aodv(by2[0].extensions) == lm.find_aodv(by1[0].extensions)
    # n3 counts the hop n2 did not cover at unknown_cost (1) plus its own link
    r = eng[A(3)].route(A(1))
    assert r.hops == 2 and 2.0 <= r.cost < 2.5


def test_smr_path_selection_takes_a_cost_in_place_of_hops():
    from manetkit.daemon.engines.smr.pathselect import Mode, PathSet, select_replies

    dear = {(1, 6, 5): 9.0, (1, 3, 4, 5): 3.0, (1, 2, 5): 4.0, (1, 7, 8, 5): 5.0}

    def cost(p):
        return dear[tuple(p)]

    later = [(1, 6, 5), (1, 3, 4, 5), (1, 7, 8, 5)]
    assert select_replies(Mode.BACKUP1, (1, 2, 5), later, 1) == [(1, 6, 5)]
    assert select_replies(Mode.BACKUP1, (1, 2, 5), later, 1, cost) == [(1, 3, 4, 5)]
    # backup2: maximally disjoint first, then the cost (not the hops) breaks the tie
    assert select_replies(Mode.BACKUP2, (1, 2, 5), later, 1, cost) == [(1, 3, 4, 5)]
    ps: PathSet = PathSet(Mode.BACKUP1, 3)
    ps.offer(0.0, (1, 2, 5), cost)
    added, sw = ps.offer(0.1, (1, 3, 4, 5), cost)
    assert added and sw is not None and sw.reason == "cheaper-reply" and ps.primary == (1, 3, 4, 5)
    ps.offer(0.2, (1, 6, 5), cost)
    dear[(1, 2, 5)] = 10.0  # it got worse since
    gone, sw = ps.cut(3, 4, cost)
    assert sw is not None and sw.new == (1, 6, 5)  # the cheapest backup now, not the first
    plain: PathSet = PathSet(Mode.BACKUP2, 3)  # never swaps on a reply
    for p in ((1, 3, 4, 5), (1, 2, 5), (1, 6, 5)):
        plain.offer(0.0, p)
    assert plain.cut(3, 4)[1].new == (1, 2, 5)  # hop count: the first backup
