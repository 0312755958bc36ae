"""``atra``: Atra's route failure predictions scored against the medium's ground truth.

Anantharaman et al.'s RFP predicts that a link will fail within its look-ahead (2 s,
docs/atra.md); every daemon emits a ``predicted-failure`` event for each prediction and a
``route-down`` for each link it lost without one (``broken_link`` = this node and the
neighbour, ``predicted`` false). Over the window:

* **precision**: a prediction is a hit when its link was in the medium's graph when it
  was made and left it within twice the look-ahead after it (:func:`score`); a link
  predicted from both ends counts once per end. The false alarms are split: the link
  had already left the graph (a late prediction: no lead; on a realistic profile a
  neighbour is often heard beyond the usable-link edge), it left the graph later (with
  that delay: a few seconds, predicted too early; much longer, the neighbours turned),
  or it never did.
* **recall**: the local link breaks the daemons reported, one per node and neighbour
  (reports of the same link within 1 s merged), of which a prediction of that node for
  that neighbour came within twice the look-ahead before the break
  (:func:`classify_breaks`). A break link sensing found by silence (reason ``silent``:
  the neighbour not heard for ``link_sensing.hysteresis.inactive_s``, 3 s) is dated
  when the neighbour was last heard (the ``silent_s`` of the daemon's
  ``neighbour-down``), as the engines date it: the report comes seconds after the link
  stopped working. The breaks no prediction covered are split by the graph at the
  report: link still in range (802.11 retries failed under contention: no power trend
  foresees that) or gone (a miss of the predictor).
* the engines' own Atra counters (predictions, hits and false alarms as the engines score
  them, breaks not predicted, predicted and proactive errors sent, predicted switches,
  requests suppressed, pinned acks), summed over the nodes.

The plug-in waits twice the look-ahead after the window before the lab goes down, so the
last predictions' links have time to resolve in the graph log; it writes that log to the
run's work directory (``ground-truth.jsonl``, beside ``events.jsonl``: with
``--keep-work`` a run can be scored again).
"""

from __future__ import annotations

import bisect
import contextlib
import json
import time
from typing import Any

from manetkit import paths
from manetkit.daemonstatus import DaemonStatus, StatusError, fetch_status

from ..eventlog import node_of
from .base import HEAD_COLUMNS, Metric, RunContext, part_rows
from .graph import graph_at, snapshots

LOOKAHEAD_S = 2.0  # the daemons' atra.lookahead_s default (docs/atra.md)
COUNTERS = (
    "predictions",
    "hits",
    "false_alarms",
    "breaks_not_predicted",
    "predicted_errors_sent",
    "proactive_errors_sent",
    "predicted_switches",
    "rreq_suppressed",
    "pinned_acks",
)

Prediction = tuple[float, str, str]  # Unix time, node, neighbour node
# Unix time of the report, node, neighbour node, reason, Unix time the break is dated
# (when the neighbour was last heard for a silent break, else the report's time)
Break = tuple[float, str, str, str, float]


def score(preds: list[Prediction], graph: list[dict[str, Any]], horizon_s: float) -> dict[str, Any]:
    """Ground-truth precision: a prediction is a hit when its link was in the medium's
    graph when it was made and left it within ``horizon_s`` (twice the look-ahead) after
    it; a link predicted from both ends counts once per end. The false alarms are split:
    ``false_alarms_already_gone`` (the link was not in the graph when predicted: the
    first change of the graph after it is no lead), ``false_alarms_lost_later`` (it left
    the graph later, the delays in ``late_losses_s``), ``false_alarms_never_lost`` (it
    lasted to the end of the log)."""
    hits = 0
    already = 0
    leads: list[float] = []
    late: list[float] = []
    snaps = snapshots(graph)
    walls = [w for w, _ in snaps]
    for t, a, b in preds:
        edge = frozenset((a, b))
        now = graph_at(snaps, walls, t)
        if now is not None and edge not in now:
            already += 1
            continue
        gone = next((w for w, es in snaps[bisect.bisect_right(walls, t) :] if edge not in es), None)
        if gone is not None and gone <= t + horizon_s:
            hits += 1
            leads.append(gone - t)
        elif gone is not None:
            late.append(round(gone - t, 2))
    n = len(preds)
    return {
        "predictions": n,
        "hits": hits,
        "false_alarms": n - hits,
        "precision": round(hits / n, 3) if n else None,
        "mean_lead_s": round(sum(leads) / len(leads), 2) if leads else None,
        "false_alarms_already_gone": already,
        "false_alarms_lost_later": len(late),
        "false_alarms_never_lost": n - hits - already - len(late),
        "late_losses_s": sorted(late),
    }


def classify_breaks(
    breaks: list[Break],
    preds: list[Prediction],
    graph: list[dict[str, Any]],
    horizon_s: float,
    merge_s: float = 1.0,
) -> dict[str, Any]:
    """The local link breaks, merged per node and neighbour (reports of the same link
    within ``merge_s`` of the previous one are one break: one route-down per route through
    it): ``predicted`` when that node predicted that neighbour's failure within
    ``horizon_s`` before the break's date (up to its report); the others split by the
    graph at the report into ``in_graph`` (still in range) and ``gone``, and by reason
    (``tx-failed``, ``silent``, ...); ``recall`` = predicted / breaks. Unlike the
    engines' ``breaks_not_predicted``, any link a route went over counts."""
    snaps = snapshots(graph)
    walls = [w for w, _ in snaps]
    merged: list[Break] = []
    last: dict[tuple[str, str], float] = {}
    for br in sorted(breaks):
        t, node, nb = br[:3]
        prev = last.get((node, nb))
        last[(node, nb)] = t
        if prev is None or t - prev > merge_s:
            merged.append(br)
    out: dict[str, Any] = {"breaks": len(merged), "predicted": 0, "in_graph": 0, "gone": 0,
                           "unknown": 0, "by_reason": {}}  # fmt: skip
    for t, node, nb, reason, dated in merged:
        if any(a == node and b == nb and dated - horizon_s <= tp <= t for tp, a, b in preds):
            out["predicted"] += 1
            continue
        now = graph_at(snaps, walls, t)
        kind = "unknown" if now is None else "in_graph" if frozenset((node, nb)) in now else "gone"
        out[kind] += 1
        by = out["by_reason"].setdefault(reason, {"in_graph": 0, "gone": 0, "unknown": 0})
        by[kind] += 1
    out["recall"] = round(out["predicted"] / out["breaks"], 3) if out["breaks"] else None
    return out


def from_events(events: list[dict[str, Any]]) -> tuple[list[Prediction], list[Break]]:
    """The predictions and the unpredicted local link breaks in a run's daemon events; a
    silent break dated by the ``silent_s`` of the same node's ``neighbour-down`` for that
    neighbour (within a second of the report), else at the report."""
    preds: list[Prediction] = []
    reports: list[tuple[float, str, str, str]] = []
    heard: dict[tuple[str, str], list[tuple[float, float]]] = {}  # neighbour-down: t, heard
    for ev in events:
        node = ev.get("node")
        if not node:
            continue
        kind = ev.get("event")
        if kind == "predicted-failure" and ev.get("neighbour"):
            preds.append((float(ev["time"]), node, node_of(ev["neighbour"])))
        elif kind == "route-down" and not ev.get("predicted"):
            link = ev.get("broken_link") or ()
            if len(link) == 2 and node_of(link[0]) == node:
                reports.append((float(ev["time"]), node, node_of(link[1]), str(ev.get("reason"))))
        elif kind == "neighbour-down" and ev.get("reason") == "silent" and ev.get("neighbour"):
            silent = ev.get("silent_s")
            if isinstance(silent, int | float):
                t = float(ev["time"])
                heard.setdefault((node, node_of(ev["neighbour"])), []).append((t, t - silent))
    breaks: list[Break] = []
    for t, node, nb, reason in reports:
        dated = t
        if reason == "silent":
            near = [(abs(td - t), h) for td, h in heard.get((node, nb), ()) if abs(td - t) <= 1.0]
            if near:
                dated = min(t, min(near)[1])
        breaks.append((t, node, nb, reason, dated))
    return preds, breaks


def atra_counters(statuses: list[DaemonStatus]) -> dict[str, int]:
    """The engines' Atra counters (:data:`COUNTERS`), summed over the daemons' statuses."""
    total = dict.fromkeys(COUNTERS, 0)
    for st in statuses:
        if st.atra is not None:
            for k in COUNTERS:
                total[k] += getattr(st.atra, k)
    return total


def statuses_by_node(lab: str, nodes: list[str]) -> dict[str, DaemonStatus]:
    """Every daemon's status by node (a daemon that does not answer is left out)."""
    out = {}
    for n in nodes:
        with contextlib.suppress(StatusError):
            out[n] = fetch_status(paths.daemon_socket(lab, n), 5)
    return out


def daemon_statuses(lab: str, nodes: list[str]) -> list[DaemonStatus]:
    return list(statuses_by_node(lab, nodes).values())


def _row_cells(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """A report row's cells from the runs' parts: prediction scores and break causes."""
    gt = [p["ground_truth"] for p in parts]
    br = [p["breaks"] for p in parts]
    eng = {k: sum(p["engine"].get(k, 0) for p in parts) for k in COUNTERS}
    n = sum(g["predictions"] for g in gt)
    hits = sum(g["hits"] for g in gt)
    leads = [(g["mean_lead_s"], g["hits"]) for g in gt if g["mean_lead_s"] is not None]
    nb = sum(b["breaks"] for b in br)
    return dict(
        predictions=n,
        precision=hits / n if n else None,
        already_gone=sum(g.get("false_alarms_already_gone", 0) for g in gt),
        recall=sum(b["predicted"] for b in br) / nb if nb else None,
        mean_lead_s=sum(x * h for x, h in leads) / sum(h for _, h in leads)
        if leads else None,
        breaks=nb,
        unpredicted=f"{sum(b['in_graph'] for b in br)} / {sum(b['gone'] for b in br)}",
        engine=f"{eng['hits']} / {eng['false_alarms']}",
        proactive_errors_sent=eng["proactive_errors_sent"],
    )  # fmt: skip


class Atra(Metric):
    name = "atra"
    needs_events = True
    title = "Atra's route failure prediction (Anantharaman et al.)"
    note = (
        "Predictions: the daemons' predicted-failure events in the window; precision: "
        "those whose link was in the medium's graph and left it within twice the "
        "look-ahead; of links already gone: predictions made after their link had left "
        "the graph (no hit); recall: the local link breaks (route-down events, one per "
        "node and neighbour; a silent one dated when the neighbour was last heard) a "
        "prediction of that node covered; unpredicted breaks: link still in range / gone "
        "at the report; engine hits / false: the engines' own scoring; proactive errors: "
        "PRE's route errors."
    )
    columns = [*HEAD_COLUMNS, ("predictions", "predictions", "d"),
               ("precision (truth)", "precision", ".2f"),
               ("of links already gone", "already_gone", "d"), ("recall", "recall", ".2f"),
               ("mean lead s", "mean_lead_s", ".2f"), ("breaks", "breaks", "d"),
               ("unpredicted in range / gone", "unpredicted", "s"),
               ("engine hits / false", "engine", "s"),
               ("proactive errors", "proactive_errors_sent", "d")]  # fmt: skip

    def __init__(self, lookahead_s: float = LOOKAHEAD_S) -> None:
        self.horizon_s = 2 * lookahead_s
        self.c0: dict[str, int] = {}
        self.c1: dict[str, int] = {}

    def before(self, ctx: RunContext) -> None:
        if ctx.manetkit:
            self.c0 = atra_counters(daemon_statuses(ctx.lab, ctx.nodes))

    def after(self, ctx: RunContext) -> None:
        if ctx.manetkit:
            self.c1 = atra_counters(daemon_statuses(ctx.lab, ctx.nodes))
        time.sleep(self.horizon_s)  # the last predictions' links resolve in the graph log

    def result(self, ctx: RunContext, graph: list[dict[str, Any]]) -> dict[str, Any]:
        if not ctx.manetkit or ctx.window is None:
            return {}
        w0, w1 = ctx.window
        # The graph log beside events.jsonl: with --keep-work a run can be scored again.
        with contextlib.suppress(OSError):
            (ctx.work / "ground-truth.jsonl").write_text(
                "".join(json.dumps(g) + "\n" for g in graph)
            )
        preds, breaks = from_events(ctx.events.snapshot() if ctx.events else [])
        in_window = [p for p in preds if w0 <= p[0] <= w1]
        return {
            "engine": {k: self.c1.get(k, 0) - self.c0.get(k, 0) for k in COUNTERS},
            "ground_truth": score(in_window, graph, self.horizon_s),
            "breaks": classify_breaks(
                [b for b in breaks if w0 <= b[0] <= w1], preds, graph, self.horizon_s
            ),
            "horizon_s": self.horizon_s,
        }

    @classmethod
    def rows(cls, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return part_rows(docs, cls.name, _row_cells)
