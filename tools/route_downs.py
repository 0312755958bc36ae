"""Why a run's routes went down: the daemons' route-down and neighbour-down events of
one run, counted by reason, inside the run's window.

Reads a run's work directory kept with ``--keep-work`` from an experiment whose
``metrics`` stream the daemons' events (``events.jsonl``; the ``atra`` plug-in does)
and the run's JSON (its window), and prints, as JSON, the counts per event and reason
(``tx-failed``: 802.11 gave up on a frame; ``hello-loss``: AODV's Hellos stopped
(RFC 3561 section 6.9); ``silent``: link sensing heard nothing for its inactive time;
``rerr``: a route error from downstream; ...) and, per node, the route-downs it reported.

    python3 tools/route_downs.py RESULTS/work/RUN RESULTS/runs/RUN.json
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

KINDS = ("route-down", "neighbour-down")


def count(events: list[dict[str, Any]], w0: float, w1: float) -> dict[str, Any]:
    by_reason: dict[str, Counter[str]] = {k: Counter() for k in KINDS}
    by_node: Counter[str] = Counter()
    for e in events:
        kind = e.get("event")
        if kind not in KINDS or not w0 <= float(e["time"]) <= w1:
            continue
        by_reason[kind][e.get("reason") or "none"] += 1
        if kind == "route-down":
            by_node[e["node"]] += 1
    return {
        "window_s": round(w1 - w0, 3),
        **{k: dict(c.most_common()) for k, c in by_reason.items()},
        "route_downs_by_node": dict(sorted(by_node.items())),
    }


def main(work: Path, run_json: Path) -> dict[str, Any]:
    run = json.loads(run_json.read_text())
    events = [json.loads(x) for x in (work / "events.jsonl").read_text().splitlines() if x]
    w = run["window"]
    return {"run": run["run"], **count(events, float(w["start"]), float(w["end"]))}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2])), indent=1))
