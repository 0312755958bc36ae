"""Metric plug-ins: what a spec's ``metrics:`` adds to each run and to the report.

=========== ===================================================================
``retrans``  TCP retransmission ratio of the connections that cross the mesh
``atra``     Atra's link-failure predictions scored against the ground truth
             (precision, recall, lead time) and the engines' Atra counters
``smr``      SMR's path switches, discoveries avoided and every daemon counter
``flap``     break/heal timings of a flapping link: recovery after each
             restoration, the route's return, recovery counted from it
``proxy``    what the split-TCP proxies did: their counters, sessions frozen
             and resumed, mesh legs lost, app connections reset by reason
=========== ===================================================================

Each is a :class:`~manetkit.experiment.plugins.base.Metric` (hooks at the window's start,
just before its end, at its end, and after the lab is down; rows for the report).
"""

from __future__ import annotations

from manetkit.experiment.plugins.atra import Atra
from manetkit.experiment.plugins.base import Connection, Metric, RunContext
from manetkit.experiment.plugins.flap import Flap
from manetkit.experiment.plugins.proxy import Proxy
from manetkit.experiment.plugins.retrans import Retrans
from manetkit.experiment.plugins.smr import Smr

PLUGINS: dict[str, type[Metric]] = {m.name: m for m in (Retrans, Atra, Smr, Flap, Proxy)}

__all__ = ["PLUGINS", "Connection", "Metric", "RunContext"]
