"""The engines' plug-in points: the link admission policy and the path metric.

Their defaults (admit every link, hop count) reproduce RFC 4728's and RFC 3561's
behaviour exactly (tests/daemon/test_engine_traces.py); here a policy and a metric of
our own change which routes get built, on a topology where hop count and the plug-in
disagree: 1-2-3 with a direct "gray" link 1-3.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from ipaddress import IPv4Address

from manetkit.daemon.admission import ADMIT_ALL, LinkAdmission, SignalFloor
from manetkit.daemon.engines.aodv import AodvConfig, AodvEngine
from manetkit.daemon.engines.base import RoutingEngine
from manetkit.daemon.engines.dsr import DsrConfig, DsrEngine
from manetkit.daemon.engines.dsr.cache import RouteCache
from manetkit.daemon.engines.smr import SmrConfig, SmrEngine
from manetkit.daemon.linksense.hysteresis import LinkMonitor, Up
from manetkit.daemon.neighbours import NeighbourTable
from tests.daemon import aodvsim
from tests.daemon.dsrutil import A, udp_packet
from tests.daemon.enginesim import Sim

GRAY = frozenset((A(1), A(3)))
LINKS = [(A(1), A(2)), (A(2), A(3)), (A(1), A(3))]


class RefuseGray:
    """Admission: the gray link 1-3 may not build routes (at either end)."""

    def __init__(self, me: IPv4Address) -> None:
        self.me = me

    def admits(self, now: float, link: Hashable, signal_dbm: float | None) -> bool:
        return frozenset((self.me, link)) != GRAY


class GrayIsDear:
    """Metric: the gray link costs 5, every other link 1."""

    def link_cost(self, now: float, a: IPv4Address, b: IPv4Address) -> float:
        return 5.0 if frozenset((a, b)) == GRAY else 1.0

    def path_cost(self, now: float, path: Sequence[IPv4Address]) -> float:
        return sum(self.link_cost(now, a, b) for a, b in zip(path, path[1:], strict=False))


def send_over_the_triangle(
    make: Callable[[int, LinkAdmission], RoutingEngine], admission: bool, packet: bytes
) -> tuple[dict[IPv4Address, RoutingEngine], Sim]:
    """1-2-3 with the gray link 1-3, node ``i``'s engine ``make(i, policy)`` (the policy
    :class:`RefuseGray` with ``admission``, else admit all); 1 sends ``packet`` to 3, and
    two seconds pass."""
    engines = {A(i): make(i, RefuseGray(A(i)) if admission else ADMIT_ALL) for i in (1, 2, 3)}
    sim = Sim(engines, LINKS)
    sim.send(A(1), packet)
    sim.run(duration=2.0)
    return engines, sim


def dsr_route(admission: bool, engine=DsrEngine, config=DsrConfig) -> tuple[int, ...]:
    engines, sim = send_over_the_triangle(
        lambda i, policy: engine(A(i), config(seed=i), NeighbourTable(), admission=policy),
        admission,
        udp_packet(A(1), A(3)),
    )
    assert sim.delivered[A(3)]
    route = engines[A(1)].strategy.route_for(sim.now, A(3))
    if admission:
        assert engines[A(3)].counters["link-not-admitted"] > 0
    return tuple(int(str(a).rsplit(".", 1)[1]) for a in route)


def test_dsr_admission_keeps_routes_off_a_refused_link():
    assert dsr_route(admission=False) == (1, 3)
    assert dsr_route(admission=True) == (1, 2, 3)


def test_smr_goes_through_the_same_admission():
    assert dsr_route(admission=True, engine=SmrEngine, config=SmrConfig) == (1, 2, 3)


def test_dsr_cache_selects_by_the_metric():
    for metric, best in ((None, (A(1), A(3))), (GrayIsDear(), (A(1), A(2), A(3)))):
        cache = RouteCache(A(1)) if metric is None else RouteCache(A(1), metric=metric)
        cache.add(0.0, (A(1), A(3)))
        cache.add(0.0, (A(1), A(2), A(3)))
        assert cache.lookup(1.0, A(3)) == best


def test_aodv_admission_keeps_routes_off_a_refused_link():
    for admission, via, hops in ((False, 3, 1), (True, 2, 2)):
        engines, sim = send_over_the_triangle(
            lambda i, policy: AodvEngine(
                A(i), AodvConfig(hellos=False), NeighbourTable(), admission=policy
            ),
            admission,
            aodvsim.data(A(1), A(3), 1),
        )
        r = engines[A(1)].route(A(3))
        assert (r.next_hop, r.hops) == (A(via), hops)
        assert [aodvsim.payload_id(p) for p in sim.delivered[A(3)]] == [1]


def test_aodv_table_prefers_the_cheaper_route_by_the_metric():
    """At equal sequence numbers (RFC 3561 6.2) the route table keeps the lower cost:
    with hop count the direct gray route stays; with the metric the 2-hop one wins."""
    for metric, via in ((None, 3), (GrayIsDear(), 2)):
        kw = {} if metric is None else {"metric": metric}
        eng = AodvEngine(A(1), AodvConfig(hellos=False), NeighbourTable(), **kw)
        eng.routes.update(0.0, A(3), A(3), 1, 7, 10.0)
        eng.routes.update(0.1, A(3), A(2), 2, 7, 10.0)
        assert eng.route(A(3)).next_hop == A(via)


def test_link_sensing_takes_the_same_kind_of_policy():
    floor = SignalFloor(-85.0)
    assert floor.admits(0.0, b"m", -80.0) and floor.admits(0.0, b"m", None)
    assert not floor.admits(0.0, b"m", -90.0)
    assert SignalFloor().admits(0.0, b"m", -120.0)

    class Only:
        def admits(self, now: float, link: Hashable, signal_dbm: float | None) -> bool:
            return link == b"good"

    m = LinkMonitor(silence_s=3.0, admission=Only())
    m.heard(0.0, b"gray", -50.0)
    m.heard(0.0, b"good")
    assert list(iter(m.next_event, None)) == [Up(b"good", None)]
