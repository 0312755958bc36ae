"""``smr``: what SMR's paths did in the window (Lim, Xu & Gerla; docs/smr.md).

Every daemon's counters at the window's two ends, summed over the nodes: SMR's path
switches (``smr-switches``: a source moved its packets to its other path), the route
discoveries its second path avoided (``smr-discoveries-avoided``), requests sent, rate
limited requests and errors, and every counter that moved (``counters``: the causes
behind the figures); and per TCP flow end (the traffic's connections), its own counters
that moved, its SMR paths at the window's end (``multipath``) and its route cache size
(where the source's packets went: its path set, or DSR's cache once every path broke).
"""

from __future__ import annotations

from typing import Any

from manetkit.daemonstatus import DaemonStatus, SmrStatus, SourceRouteStatus

from .atra import statuses_by_node
from .base import HEAD_COLUMNS, Metric, RunContext, mean, part_rows


def counters(statuses: dict[str, DaemonStatus]) -> dict[str, int]:
    """The engines' counters, summed over the nodes."""
    total: dict[str, int] = {}
    for st in statuses.values():
        for k, v in st.engine.counters.items():
            total[k] = total.get(k, 0) + v
    return total


def endpoints(
    ends: list[str], s0: dict[str, DaemonStatus], s1: dict[str, DaemonStatus]
) -> dict[str, dict[str, Any]]:
    """Per flow end: its counters that moved in the window and, at the window's end, its
    SMR paths and route cache size."""
    out: dict[str, dict[str, Any]] = {}
    for n in dict.fromkeys(ends):
        a = s0[n].engine.counters if n in s0 else {}
        eng = s1[n].engine if n in s1 else None
        now = eng.counters if eng is not None else {}
        d = {k: v - a.get(k, 0) for k, v in now.items()}
        out[n] = {
            "counters": {k: v for k, v in sorted(d.items()) if v},
            "multipath": [r.model_dump(mode="json") for r in eng.multipath]
            if isinstance(eng, SmrStatus)
            else [],
            "cached_paths": len(eng.paths) if isinstance(eng, SourceRouteStatus) else 0,
        }
    return out


def _row_cells(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """A report row's cells from the runs' parts: summed counters, requests per run."""
    r: dict[str, Any] = {
        k: sum(int(p.get(k) or 0) for p in parts)
        for k in ("path_switches", "discoveries_avoided", "requests_sent", "request_ratelimited")
    }
    r["requests_per_run"] = mean(p.get("requests_sent") for p in parts)
    return r


class Smr(Metric):
    name = "smr"
    title = "SMR's paths (Lim, Xu & Gerla)"
    note = (
        "Summed over the daemons and the runs of a row: path switches (a source moved to "
        "its other path), discoveries avoided (a break with the other path still up), "
        "route requests sent and rate-limited."
    )
    columns = [*HEAD_COLUMNS, ("switches", "path_switches", "d"),
               ("avoided", "discoveries_avoided", "d"), ("requests", "requests_sent", "d"),
               ("rate-limited", "request_ratelimited", "d"),
               ("requests / run", "requests_per_run", ".1f")]  # fmt: skip

    def __init__(self) -> None:
        self.s0: dict[str, DaemonStatus] = {}
        self.s1: dict[str, DaemonStatus] = {}

    def before(self, ctx: RunContext) -> None:
        if ctx.manetkit:
            self.s0 = statuses_by_node(ctx.lab, ctx.nodes)

    def after(self, ctx: RunContext) -> None:
        if ctx.manetkit:
            self.s1 = statuses_by_node(ctx.lab, ctx.nodes)

    def result(self, ctx: RunContext, graph: list[dict[str, Any]]) -> dict[str, Any]:
        if not ctx.manetkit:
            return {}
        c0, c1 = counters(self.s0), counters(self.s1)
        delta = {k: c1.get(k, 0) - c0.get(k, 0) for k in set(c0) | set(c1)}
        ends = [n for c in ctx.connections for n in (c.src, c.dst)]
        return {
            "path_switches": delta.get("smr-switches", 0),
            "discoveries_avoided": delta.get("smr-discoveries-avoided", 0),
            "requests_sent": delta.get("requests-sent", 0),
            "request_ratelimited": delta.get("request-ratelimited", 0),
            "errors_ratelimited": delta.get("errors-ratelimited", 0),
            "counters": {k: v for k, v in sorted(delta.items()) if v},
            "endpoints": endpoints(ends, self.s0, self.s1),
        }

    @classmethod
    def rows(cls, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return part_rows(docs, cls.name, _row_cells)
