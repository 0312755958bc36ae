"""Which duplicate route requests are worth processing again: the better copies.

With hop count the first copy of a request to arrive is the one to keep (RFC 4728
8.2.2, RFC 3561 6.5 drop the others). With a link-quality metric the first copy came
over the fewest, often the longest and worst, links; a later copy over better links
must be able to replace it, so LQSR (Draves, Padhye & Zill 2004, section 3) and
802.11s HWMP forward a request again when its metric is better. Bounded twice: a copy
counts only when its path cost is lower than the best so far by ``better_copy_margin``,
and at most ``max_better_copies`` times per request; at most ``MAX_REQUESTS`` requests
are remembered (the oldest forgotten).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Hashable

from manetkit.daemon.engines.linkquality.config import MetricConfig

MAX_REQUESTS = 1024


class BestCopies:
    def __init__(self, config: MetricConfig, counters: Counter[str], counter: str) -> None:
        self.cfg = config
        self.counters = counters
        self.counter = counter  # counted for every better copy let through
        # request key -> (lowest path cost processed, better copies processed)
        self.best: OrderedDict[Hashable, tuple[float, int]] = OrderedDict()

    def copy(self, key: Hashable, cost: float, duplicate: bool) -> bool:
        """Record a copy of request ``key`` whose path costs ``cost``; for a
        ``duplicate``, True if it is better enough to be processed again."""
        got = self.best.get(key)
        if not duplicate or got is None:
            self.best[key] = (cost, 0) if got is None else (min(cost, got[0]), got[1])
            self.best.move_to_end(key)
            while len(self.best) > MAX_REQUESTS:
                self.best.popitem(last=False)
            return False
        best, copies = got
        if copies >= self.cfg.max_better_copies or cost >= best * (1 - self.cfg.better_copy_margin):
            return False
        self.best[key] = (cost, copies + 1)
        self.counters[self.counter] += 1
        return True
