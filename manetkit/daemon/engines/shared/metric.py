"""How good a path is: the path metric both engines select routes by.

Hop count is what RFC 4728 (DSR's route cache returns the shortest cached route) and
RFC 3561 (AODV prefers, at equal sequence numbers, the route with fewer hops) use. On
real 802.11 it prefers two lossy hops over three clean ones (De Couto et al., ETX,
MobiCom 2003), so the metric is a plug-in: anything with :meth:`PathMetric.link_cost`
and :meth:`PathMetric.path_cost`, lower is better. The default, :class:`HopCount`, gives
every link cost 1 and reproduces the RFCs' selection exactly.

A metric other than hop count also needs its accumulated value carried in route
discovery (DSR: an option accumulating the path's cost, as LQSR does; AODV: an
extension on RREQ/RREP); until then AODV's advertised cost is the message's hop count.
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Address
from typing import Protocol


class PathMetric(Protocol):
    def link_cost(self, now: float, a: IPv4Address, b: IPv4Address) -> float:
        """The cost of sending from ``a`` to neighbour ``b`` (> 0)."""
        ...

    def path_cost(self, now: float, path: Sequence[IPv4Address]) -> float:
        """The cost of ``path`` (node addresses, first to last)."""
        ...


class HopCount:
    """Every link costs 1: a path costs its number of hops."""

    __slots__ = ()

    def link_cost(self, now: float, a: IPv4Address, b: IPv4Address) -> float:
        return 1.0

    def path_cost(self, now: float, path: Sequence[IPv4Address]) -> float:
        return float(len(path) - 1)


HOP_COUNT = HopCount()
