"""Why Atra's predictions did or did not cover a run's link breaks, from its kept files.

Reads one run's work directory of an experiment with ``metrics: [atra]`` made with
``--keep-work`` (``events.jsonl``: every daemon's events; ``ground-truth.jsonl``: the
medium's graph log, written by the ``atra`` plug-in) and the run's window (its JSON),
and prints, as JSON:

- ``predictions``: the plug-in's ground-truth score (:func:`manetkit.experiment.plugins.
  atra.score`), the predicted level (the trend's smoothed signal, dBm), slope (dB/s) and
  the lead of the hits, as quantiles;
- ``route_breaks``: the plug-in's breaks (route-down, one per node and neighbour,
  :func:`classify_breaks`) and, for the unpredicted silent ones: how long the neighbour
  had been silent when declared down (``silent_s``), whether the link was in the graph
  when it was last heard, how long the link had been up (since the node's last
  ``neighbour-up`` for it: a link up for less than ``history`` samples cannot be
  predicted), and whether that node ever predicted that neighbour before (too early);
  the losses by kind (:func:`kind`: gray, flap, range), each with its recall;
- ``link_losses``: the same for every neighbour a daemon lost by silence (its
  ``neighbour-down``), route or no route: the predictor sees every neighbour it hears.

    python3 tools/atra_breaks.py docs/results/atra-realistic/work/RUN docs/results/atra-realistic/runs/RUN.json
"""

from __future__ import annotations

import bisect
import json
import sys
from pathlib import Path
from typing import Any

from manetkit.experiment.eventlog import node_of
from manetkit.experiment.plugins.atra import classify_breaks, from_events, score
from manetkit.experiment.plugins.graph import graph_at, snapshots

HORIZON_S = 4.0  # twice the 2 s look-ahead, as the plug-in


def _q(xs: list[float]) -> dict[str, float] | None:
    """Quartiles and extremes of ``xs`` (None if empty)."""
    if not xs:
        return None
    s = sorted(xs)
    at = [s[min(len(s) - 1, int(f * len(s)))] for f in (0.25, 0.5, 0.75)]
    return {"n": len(s), "min": round(s[0], 2), "p25": round(at[0], 2),
            "median": round(at[1], 2), "p75": round(at[2], 2), "max": round(s[-1], 2)}  # fmt: skip


class Graph:
    """The medium's ground-truth graph over time (the plug-in's snapshots)."""

    def __init__(self, log: list[dict[str, Any]]) -> None:
        self.snaps = snapshots(log)
        self.walls = [w for w, _ in self.snaps]

    def has(self, t: float, a: str, b: str) -> bool | None:
        edges = graph_at(self.snaps, self.walls, t)
        return None if edges is None else frozenset((a, b)) in edges

    def ever(self, t0: float, t1: float, a: str, b: str) -> bool:
        k0 = max(bisect.bisect_right(self.walls, t0) - 1, 0)
        k1 = bisect.bisect_right(self.walls, t1)
        return any(frozenset((a, b)) in es for _, es in self.snaps[k0:k1])


def losses(
    events: list[dict[str, Any]],
    preds: list[tuple[float, str, str]],
    g: Graph,
    w0: float,
    w1: float,
) -> list[dict[str, Any]]:
    """Every silent neighbour-down in the window, with what explains whether it was seen."""
    ups: dict[tuple[str, str], float] = {}
    out = []
    for ev in sorted(events, key=lambda e: e["time"]):
        node, kind = ev.get("node"), ev.get("event")
        if kind == "neighbour-up" and ev.get("neighbour"):
            ups[(node, node_of(ev["neighbour"]))] = float(ev["time"])
        if kind != "neighbour-down" or ev.get("reason") != "silent":
            continue
        t = float(ev["time"])
        nb = node_of(ev["neighbour"])
        heard = t - float(ev.get("silent_s") or 0.0)
        if not w0 <= t <= w1:
            continue
        mine = [tp for tp, a, b in preds if a == node and b == nb and tp <= t]
        up = ups.get((node, nb))
        out.append({
            "t": t, "node": node, "nb": nb, "silent_s": t - heard,
            "covered": any(heard - HORIZON_S <= tp for tp in mine),
            "earlier_prediction_s": round(heard - mine[-1], 2) if mine else None,
            "up_s": round(heard - up, 2) if up is not None else None,
            "in_graph_when_heard": g.has(heard, node, nb),
            "in_graph_4s_before": g.ever(heard - HORIZON_S, heard, node, nb),
            "in_graph_at_report": g.has(t, node, nb),
        })  # fmt: skip
    return out


def kind(r: dict[str, Any]) -> str:
    """``gray``: not in the graph in the 4 s before the neighbour was last heard (heard
    beyond the usable edge); ``flap``: still in the graph when declared down (beacons
    lost under fading: no range break); ``range``: it left the graph."""
    if not r["in_graph_4s_before"]:
        return "gray"
    return "flap" if r["in_graph_at_report"] else "range"


def by_kind(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Losses and those covered per :func:`kind`, all and of links up for >= 3 s (at
    least ``history`` beacons: the trend's minimum)."""
    out: dict[str, Any] = {}
    for r in rows:
        k = out.setdefault(kind(r), {"losses": 0, "covered": 0, "up_3s": 0, "up_3s_covered": 0})
        k["losses"] += 1
        k["covered"] += r["covered"]
        if r["up_s"] is not None and r["up_s"] >= 3:
            k["up_3s"] += 1
            k["up_3s_covered"] += r["covered"]
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    cov = [r for r in rows if r["covered"]]
    miss = [r for r in rows if not r["covered"]]
    return {
        "losses": n,
        "covered": len(cov),
        "recall": round(len(cov) / n, 3) if n else None,
        "silent_s": _q([r["silent_s"] for r in rows]),
        "missed": {
            "in_graph_when_last_heard": sum(1 for r in miss if r["in_graph_when_heard"]),
            "out_of_graph_when_last_heard": sum(
                1 for r in miss if r["in_graph_when_heard"] is False
            ),
            "never_in_graph_in_the_4s_before": sum(1 for r in miss if not r["in_graph_4s_before"]),
            "up_less_than_3s": sum(1 for r in miss if r["up_s"] is not None and r["up_s"] < 3),
            "up_s": _q([r["up_s"] for r in miss if r["up_s"] is not None]),
            "predicted_earlier": sum(1 for r in miss if r["earlier_prediction_s"] is not None),
            "earlier_prediction_s": _q(
                [r["earlier_prediction_s"] for r in miss if r["earlier_prediction_s"] is not None]
            ),
        },
        "covered_up_s": _q([r["up_s"] for r in cov if r["up_s"] is not None]),
        "by_kind": by_kind(rows),
    }


def main(work: Path, run_json: Path) -> dict[str, Any]:
    events = [json.loads(x) for x in (work / "events.jsonl").read_text().splitlines() if x]
    log = [json.loads(x) for x in (work / "ground-truth.jsonl").read_text().splitlines() if x]
    run = json.loads(run_json.read_text())
    w0, w1 = run["window"]["start"], run["window"]["end"]
    g = Graph(log)
    preds, breaks = from_events(events)
    in_window = [p for p in preds if w0 <= p[0] <= w1]
    sc = score(in_window, log, HORIZON_S)
    pev = [e for e in events if e.get("event") == "predicted-failure" and w0 <= e["time"] <= w1]
    leads = []
    for t, a, b in in_window:
        if g.has(t, a, b):
            k = bisect.bisect_right(g.walls, t)
            gone = next((w for w, es in g.snaps[k:] if frozenset((a, b)) not in es), None)
            if gone is not None and gone - t <= HORIZON_S:
                leads.append(gone - t)
    br = [b for b in breaks if w0 <= b[0] <= w1]
    silent_routes = []
    for t, node, nb, reason, dated in br:
        if reason == "silent":
            silent_routes.append((t, node, nb, dated))
    rows = losses(events, preds, g, w0, w1)
    route_rows = []  # the silent route breaks' neighbour-downs (within a second), once each
    for t, node, nb, _ in silent_routes:
        near = [r for r in rows if (r["node"], r["nb"]) == (node, nb) and abs(r["t"] - t) <= 1]
        if near:
            row = min(near, key=lambda r: abs(r["t"] - t))
            if all(row is not r for r in route_rows):
                route_rows.append(row)
    return {
        "window": [w0, w1],
        "predictions": {
            **sc,
            "level_dbm": _q([e["signal_dbm"] for e in pev]),
            "slope_db_per_s": _q([e["slope_db_per_s"] for e in pev]),
            "eta_s": _q([e["eta_s"] for e in pev]),
            "hit_lead_s": _q(leads),
        },
        "route_breaks": {
            **classify_breaks(br, preds, log, HORIZON_S),
            "silent": summary(route_rows),
        },
        "link_losses": summary(rows),
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2])), indent=1))
