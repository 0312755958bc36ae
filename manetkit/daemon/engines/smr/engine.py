"""SMR's engine: DSR (:class:`~manetkit.daemon.engines.dsr.engine.DsrEngine`) with SMR's
path strategy (:mod:`.strategy`). Same wire format (RFC 4728 options), route cache,
send buffer, salvaging, Route Errors and TCP-BuS; ``cache_replies`` stays off
(Lim/Xu/Gerla III-A, refused in the config)."""

from __future__ import annotations

import random
from ipaddress import IPv4Address

from manetkit.daemon.admission import LinkAdmission
from manetkit.daemon.engines.dsr.engine import DsrEngine
from manetkit.daemon.engines.shared.metric import PathMetric
from manetkit.daemon.engines.smr.config import SmrConfig
from manetkit.daemon.engines.smr.strategy import SmrStrategy
from manetkit.daemon.neighbours import NeighbourTable

__all__ = ["SmrEngine"]


class SmrEngine(DsrEngine):
    """DSR with SMR's request forwarding, destination selection and path sets."""

    name = "smr"

    def __init__(
        self,
        address: IPv4Address,
        config: SmrConfig | None = None,
        neighbours: NeighbourTable | None = None,
        rng: random.Random | None = None,
        *,
        admission: LinkAdmission | None = None,
        metric: PathMetric | None = None,
        trust_data: bool = True,
    ) -> None:
        cfg = config or SmrConfig()

        def strategy(e: DsrEngine) -> SmrStrategy:
            return SmrStrategy(
                address, cfg, e.cache, e.table, e.links, e.signalling, e.out, e.counters,
                ask=e.ask, forget_routes=e.forget_routes,
            )  # fmt: skip

        super().__init__(
            address, cfg, neighbours, rng, strategy=strategy, admission=admission, metric=metric,
            trust_data=trust_data,
        )  # fmt: skip
        self.smr = cfg
