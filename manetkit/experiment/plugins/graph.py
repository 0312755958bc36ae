"""The medium's ground-truth graph as the plug-ins read it: (Unix time, edges) per change.

The log itself is written by :mod:`manetkit.lab.medium.groundtruth`; an edge is a link by
the profile's rule (a usable link on a realistic profile), so a route failure reported
over an edge that is still there is a false failure as the medium sees it.
"""

from __future__ import annotations

import bisect
from typing import Any

from manetkit.lab.medium.groundtruth import bfs_hops

Snaps = list[tuple[float, set[frozenset[str]]]]


def snapshots(graph: list[dict[str, Any]]) -> Snaps:
    """The ground-truth log as (Unix time, edges) per change of the graph."""
    return [(g["wall"], {frozenset(e) for e in g["edges"]}) for g in graph]


def graph_at(snaps: Snaps, walls: list[float], t: float) -> set[frozenset[str]] | None:
    """The graph's edges at ``t`` (the last change at or before it); None before the log."""
    k = bisect.bisect_right(walls, t)
    return snaps[k - 1][1] if k else None


def edge_held(snaps: Snaps, walls: list[float], edge: frozenset[str], t0: float, t1: float) -> bool:
    """``edge`` in the graph all through [t0, t1] (as far back as the log goes)."""
    k = max(bisect.bisect_right(walls, t0) - 1, 0)
    return all(edge in es for w, es in snaps[k:] if w <= t1)


def has_path(edges: set[frozenset[str]], a: str, b: str) -> bool:
    return bfs_hops((tuple(e) for e in edges), a, b) is not None


def seconds_with_path(
    snaps: Snaps, walls: list[float], a: str, b: str, t0: float, t1: float
) -> float:
    """How long within [t0, t1] ``a`` and ``b`` had a path in the graph (time before the
    log's first line counts as no path: nothing is known of it)."""
    total = 0.0
    k = max(bisect.bisect_right(walls, t0) - 1, 0)
    while k < len(snaps) and snaps[k][0] < t1:
        start = max(snaps[k][0], t0)
        end = min(snaps[k + 1][0], t1) if k + 1 < len(snaps) else t1
        if end > start and has_path(snaps[k][1], a, b):
            total += end - start
        k += 1
    return total
