"""An accumulated path metric on AODV's messages (the AODV-ETX proposals; De Couto et al.
2003 section 5 ran ETX in DSDV and DSR, the AODV variants carry it the same way).

Only with ``link_quality.metric.kind: etx``. The wire format is
:mod:`manetkit.daemon.wire.linkmetric` (AODV extension 247, PATH METRIC):

- a RREQ carries the cost of its path from the originator to the node that sent it, a
  RREP the cost from its destination; the receiver's route cost is that plus its own
  link to the sender (:meth:`AodvLinkMetric.advertised`; hops a node without the
  extension forwarded count ``unknown_cost`` each), and what it forwards carries the
  new sum;
- at equal sequence numbers the route table keeps the cheaper route (RFC 3561 6.2's
  rule with the cost in place of the hop count, :mod:`.routetable`);
- a duplicate RREQ whose path is cheaper than the best copy processed so far by
  ``better_copy_margin`` is processed again, at most ``max_better_copies`` times per
  RREQ (802.11s HWMP does the same with its PREQs): the reverse route moves to it, the
  destination answers it, and it goes on.

The better copies are counted by :class:`~manetkit.daemon.engines.linkquality.copies.BestCopies`.
"""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv4Address

from manetkit.daemon.engines.linkquality.config import MetricConfig
from manetkit.daemon.engines.linkquality.copies import BestCopies
from manetkit.daemon.wire import aodv
from manetkit.daemon.wire import linkmetric as lm


class AodvLinkMetric:
    def __init__(self, config: MetricConfig, counters: Counter[str]) -> None:
        self.cfg = config
        self.counters = counters
        self.copies = BestCopies(config, counters, "rreq-better-copy")

    def advertised(self, m: aodv.RREQ | aodv.RREP) -> float:
        """The cost of the message's path to its sender, from its PATH METRIC; the
        hops it does not cover (or all, without one) at ``unknown_cost`` each."""
        try:
            pm = lm.find_aodv(m.extensions)
        except lm.MalformedMetric:
            self.counters["path-metric-malformed"] += 1
            pm = None
        if pm is None:
            return m.hop_count * self.cfg.unknown_cost
        missing = max(m.hop_count - pm.counted, 0)
        return pm.cost + missing * self.cfg.unknown_cost

    def extensions(
        self, extensions: list[tuple[int, bytes]], cost: float, hops: int
    ) -> list[tuple[int, bytes]]:
        """``extensions`` with PATH METRIC set to ``cost`` over ``hops`` hops."""
        return [*lm.without_aodv(extensions), lm.aodv_extension(lm.PathMetric(cost, hops))]

    def copy(self, orig: IPv4Address, rreq_id: int, cost: float, duplicate: bool) -> bool:
        """Record a copy of RREQ (orig, id); True for a duplicate worth processing again."""
        return self.copies.copy((orig, rreq_id), cost, duplicate)
