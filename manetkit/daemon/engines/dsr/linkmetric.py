"""LQSR's link metrics on DSR's messages (Draves, Padhye & Zill, MobiCom 2004, section 3).

Only with ``link_quality.metric.kind: etx``. The wire format is
:mod:`manetkit.daemon.wire.linkmetric` (DSR option 53, beside the Route Request or Reply):

- a node that receives a Route Request appends the cost of the link it came over (its
  own estimate for the previous hop) to the request's LINK METRICS, learns the costs
  of every link of the route so far, and forwards the request with the longer list;
- a duplicate copy whose path cost is lower than the best copy processed so far by
  ``better_copy_margin`` is processed again, at most ``max_better_copies`` times per
  request (LQSR forwards a request again when it has a better metric: the first copy
  to arrive came over the fewest, often the longest and worst, links);
- the target answers every copy (RFC 4728 8.2.4), each reply carrying the costs of its
  route; every node that handles a reply learns them; the source's route cache then
  picks the cheapest route (:class:`~manetkit.daemon.engines.linkquality.metric.EtxMetric`).

The better copies are counted by :class:`~manetkit.daemon.engines.linkquality.copies.BestCopies`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from ipaddress import IPv4Address

from manetkit.daemon.engines.linkquality.config import MetricConfig
from manetkit.daemon.engines.linkquality.copies import BestCopies
from manetkit.daemon.engines.linkquality.metric import EtxMetric
from manetkit.daemon.wire import dsr
from manetkit.daemon.wire import linkmetric as lm

Costs = tuple[float | None, ...]


class DsrLinkMetric:
    def __init__(
        self,
        address: IPv4Address,
        metric: EtxMetric,
        config: MetricConfig,
        counters: Counter[str],
    ) -> None:
        self.address = address
        self.metric = metric
        self.cfg = config
        self.counters = counters
        self.copies = BestCopies(config, counters, "request-better-copy")

    def _carried(self, options: Sequence[object]) -> lm.LinkMetrics | None:
        try:
            return lm.find_dsr(options)
        except lm.MalformedMetric:
            self.counters["link-metrics-malformed"] += 1
            return None

    def request(
        self,
        now: float,
        init: IPv4Address,
        addrs: tuple[IPv4Address, ...],
        options: Sequence[object],
    ) -> Costs:
        """A Route Request from ``init`` over the route record ``addrs`` reached this
        node: the costs of its links, this node's incoming link appended; learnt."""
        carried = self._carried(options)
        costs = carried.aligned(len(addrs)) if carried is not None else (None,) * len(addrs)
        prev = addrs[-1] if addrs else init
        costs = (*costs, self.metric.own_cost(now, prev))
        self._learn(now, (init, *addrs, self.address), costs)
        return costs

    def total(self, costs: Costs) -> float:
        unknown = self.cfg.unknown_cost
        return sum(unknown if c is None else c for c in costs)

    def copy(self, init: IPv4Address, ident: int, cost: float, duplicate: bool) -> bool:
        """Record a copy of request (init, ident); True for a duplicate worth
        processing again."""
        return self.copies.copy((init, ident), cost, duplicate)

    def option(self, costs: Costs) -> dsr.UnknownOption:
        return lm.dsr_option(lm.LinkMetrics(costs))

    def reply_options(
        self, now: float, to: IPv4Address, route: tuple[IPv4Address, ...]
    ) -> list[dsr.UnknownOption]:
        """LINK METRICS for a Route Reply to ``to`` carrying ``route``: what this node
        knows of each link (the request's costs, learnt when it arrived)."""
        nodes = (to, *route)
        costs = tuple(
            self.metric.known_cost(now, nodes[i], nodes[i + 1]) for i in range(len(nodes) - 1)
        )
        return [self.option(costs)]

    def reply_seen(
        self, now: float, to: IPv4Address, route: Sequence[IPv4Address], options: Sequence[object]
    ) -> None:
        """A Route Reply (to ``to``, carrying ``route``) passed: learn its costs."""
        carried = self._carried(options)
        if carried is None:
            return
        nodes = (to, *route)
        self._learn(now, nodes, carried.aligned(len(nodes) - 1))

    def _learn(self, now: float, nodes: Sequence[IPv4Address], costs: Costs) -> None:
        for i, c in enumerate(costs):
            if c is not None and i + 1 < len(nodes):
                self.metric.learn(now, nodes[i], nodes[i + 1], c)
