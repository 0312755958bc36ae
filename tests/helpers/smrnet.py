"""SMR and DSR networks on the fake-clock simulator, and the two-rail ladder.

Shared by tests/daemon/test_smr_engine.py and test_smr_tshark.py (Lim, Xu & Gerla,
ICC'03; docs/smr.md).
"""

from __future__ import annotations

import random

from manetkit.daemon.engines.dsr import DsrConfig, DsrEngine
from manetkit.daemon.engines.smr import SmrConfig, SmrEngine
from manetkit.daemon.neighbours import NeighbourTable
from tests.daemon.dsrutil import A
from tests.daemon.enginesim import Sim


class _SlowJitter(random.Random):
    """Always the longest BroadcastJitter: this node's rebroadcasts arrive last."""

    def uniform(self, a: float, b: float) -> float:
        return b


def net(
    ids: range | list[int],
    links: list[tuple[int, int]],
    slow: tuple[int, ...] = (),
    protocol: str = "smr",
    **cfg,
) -> Sim:
    engines = {}
    for i in ids:
        rng = _SlowJitter(i) if i in slow else random.Random(i)
        if protocol == "smr":
            c = SmrConfig(broadcast_jitter_ms=50 if i in slow else 0, **cfg)
            engines[A(i)] = SmrEngine(A(i), c, NeighbourTable(), rng)
        else:
            c = DsrConfig(broadcast_jitter_ms=50 if i in slow else 0, **cfg)
            engines[A(i)] = DsrEngine(A(i), c, NeighbourTable(), rng)
    return Sim(engines, [(A(a), A(b)) for a, b in links])


# A ladder: short rail 1-2-3-8 (3 hops) and long rail 1-4-5-6-8 (4 hops), disjoint.
LADDER = [(1, 2), (2, 3), (3, 8), (1, 4), (4, 5), (5, 6), (6, 8)]
