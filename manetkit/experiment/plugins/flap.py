"""``flap``: how a stack and proxy come back after each break of a flapping link.

With a traffic's ``link_flap:`` (a link of the lab forced down for ``down_s`` every
``period_s``; :mod:`manetkit.experiment.linkflap`) and a ``stream`` traffic (its receiver
records every read), each restoration of the link is timed:

* **recovery**: from ``link up`` to the next byte the receiving application got (Holland
  & Vaidya measure the same stall from the sender: how long TCP stays silent after the
  route is back, section 5); None when no byte came before the window's end;
* **route back**: from ``link up`` to the source daemon's first ``route-up`` to the
  destination (the moment the route is back, where ELFN can resume; None if none came
  before the next link-up);
* **recovery after the route**: the recovery counted from the route's return instead.

Of the first flow of the traffic (the source and destination of its first pair).
"""

from __future__ import annotations

from typing import Any

from manetkit.bench.stream import recoveries
from manetkit.lab.stacks import node_address

from .base import HEAD_COLUMNS, Metric, RunContext, mean, part_rows


def route_returns(
    events: list[dict[str, Any]], ups_wall: list[float], node: str, dst_addr: str
) -> list[float | None]:
    """For each link-up (Unix time), seconds until ``node``'s daemon reported a route to
    ``dst_addr`` again (its first route-up after the link-up; None if none came before
    the next link-up)."""
    times = sorted(
        float(e["time"]) for e in events
        if e.get("node") == node and e.get("event") == "route-up" and e.get("dst") == dst_addr
    )  # fmt: skip
    out: list[float | None] = []
    for i, u in enumerate(ups_wall):
        nxt = ups_wall[i + 1] if i + 1 < len(ups_wall) else float("inf")
        t = next((x for x in times if u <= x < nxt), None)
        out.append(round(t - u, 3) if t is not None else None)
    return out


def after_route(recovery: list[float | None], route: list[float | None]) -> list[float | None]:
    """Recovery counted from the route's return instead of the link's."""
    return [
        round(r - q, 3) if r is not None and q is not None else None
        for r, q in zip(recovery, route, strict=True)
    ]


def _mean(xs: list[float | None]) -> float | None:
    got = [x for x in xs if x is not None]
    return round(sum(got) / len(got), 3) if got else None


def _row_cells(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """A report row's cells from the runs' parts: the stream's integrity and recoveries."""
    rec = [x for p in parts for x in p["recovery_s"]]
    intact = [p.get("intact") for p in parts if p.get("intact") is not None]
    return dict(
        intact="-" if not intact else "yes" if all(intact) else "NO",
        breaks=sum(p["breaks"] for p in parts),
        recovery_s=mean(rec),
        recovery_max_s=max((x for x in rec if x is not None), default=None),
        route_back_s=mean(x for p in parts for x in p["route_back_s"]),
        after_route_s=mean(x for p in parts for x in p["recovery_after_route_s"]),
        unrecovered=sum(x is None for x in rec),
    )


class Flap(Metric):
    name = "flap"
    needs_events = True
    title = "Link flaps: recovery after each restoration"
    note = (
        "Recovery: from link up to the next byte the receiving application got; route "
        "back: to the source daemon's route-up; after route: recovery counted from it "
        "(means over the breaks of the runs of a row)."
    )
    columns = [*HEAD_COLUMNS, ("intact", "intact", "s"), ("breaks", "breaks", "d"),
               ("recovery s", "recovery_s", ".2f"),
               ("recovery max s", "recovery_max_s", ".2f"),
               ("route back s", "route_back_s", ".2f"),
               ("after route-up s", "after_route_s", ".2f"),
               ("no recovery", "unrecovered", "d")]  # fmt: skip

    def result(self, ctx: RunContext, graph: list[dict[str, Any]]) -> dict[str, Any]:
        if not ctx.samples or ctx.window_mono is None or not ctx.connections:
            return {}
        first = ctx.connections[0]
        rec = recoveries(ctx.samples[0], ctx.link_ups, ctx.window_mono[1])
        events = ctx.events.snapshot() if ctx.events else []
        route = (
            route_returns(events, ctx.link_ups_wall, first.src, str(node_address(first.dst)))
            if ctx.manetkit
            else [None] * len(rec)
        )
        rec_route = after_route(rec, route)
        got = [x for x in rec if x is not None]
        hashed = [f["intact"] for f in ctx.stream_flows if "intact" in f]
        return {
            "intact": all(hashed) if hashed else None,
            "breaks": len(ctx.link_downs),
            "link_up_unix": [round(x, 3) for x in ctx.link_ups_wall],
            "recovery_s": rec,
            "recovery_mean_s": _mean(rec),
            "recovery_max_s": max(got) if got else None,
            "route_back_s": route,
            "recovery_after_route_s": rec_route,
            "recovery_after_route_mean_s": _mean(rec_route),
        }

    @classmethod
    def rows(cls, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return part_rows(docs, cls.name, _row_cells)
