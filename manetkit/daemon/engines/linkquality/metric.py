"""ETX as the path metric (De Couto, Aguayo, Bicket & Morris, MobiCom 2003).

A link's cost is its expected number of transmissions per delivered frame, at least 1;
a path's cost is the sum over its links (section 3). This node's own links come from its
estimator (:meth:`~.estimator.LinkEstimates.etx`: the data path's transmit statuses
where it has sent enough, else its neighbour's beacons); the other links of a path
from the costs route discovery carried (LQSR's link metrics in DSR's route requests
and replies, Draves, Padhye & Zill, MobiCom 2004, section 3; AODV's accumulated
path metric). Learnt costs are forgotten ``memory_s`` after they were learnt: LQSR
found that a metric with a long memory lags behind moving nodes (section 6.3), so an
old cost falls back to ``unknown_cost`` (a plain hop) instead of steering routes.

Bounded: at most ``MAX_LEARNT`` remote link costs; beyond that the oldest goes.
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Address

from manetkit.daemon.engines.linkquality.config import MetricConfig
from manetkit.daemon.engines.linkquality.estimator import LinkEstimates

MAX_LEARNT = 4096


class EtxMetric:
    """A :class:`~manetkit.daemon.engines.shared.metric.PathMetric` (lower is better)."""

    def __init__(self, me: IPv4Address, estimates: LinkEstimates, config: MetricConfig) -> None:
        self.me = me
        self.estimates = estimates
        self.cfg = config
        self.learnt: dict[tuple[IPv4Address, IPv4Address], tuple[float, float]] = {}
        self.evicted = 0

    # -- PathMetric
    def link_cost(self, now: float, a: IPv4Address, b: IPv4Address) -> float:
        """The cost of the link a-b: this node's estimate if it is an end, else the
        latest cost discovery carried for it (either direction), else unknown."""
        known = self.known_cost(now, a, b)
        return self.cfg.unknown_cost if known is None else known

    def path_cost(self, now: float, path: Sequence[IPv4Address]) -> float:
        return sum(self.link_cost(now, path[i], path[i + 1]) for i in range(len(path) - 1))

    # -- learning
    def learn(self, now: float, a: IPv4Address, b: IPv4Address, cost: float) -> None:
        """Discovery carried ``cost`` for the link a-b (measured by its receiver b)."""
        key = (a, b)
        if key not in self.learnt and len(self.learnt) >= MAX_LEARNT:
            del self.learnt[min(self.learnt, key=lambda k: self.learnt[k][1])]
            self.evicted += 1
        self.learnt[key] = (min(max(cost, 1.0), self.cfg.max_cost), now)

    def known_cost(self, now: float, a: IPv4Address, b: IPv4Address) -> float | None:
        """The cost of link a-b if something measured it (None: unknown), for carrying
        in a reply."""
        if a == self.me or b == self.me:
            est = self.estimates.etx(now, b if a == self.me else a)
            if est is not None:
                return est
        got = self.learnt.get((a, b)) or self.learnt.get((b, a))
        if got is not None and now - got[1] < self.cfg.memory_s:
            return got[0]
        return None

    def own_cost(self, now: float, nb: IPv4Address) -> float:
        """What this node measures for its link to ``nb`` (what it adds to a request
        that came from ``nb``)."""
        est = self.estimates.etx(now, nb)
        return est if est is not None else self.cfg.unknown_cost
