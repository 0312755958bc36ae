"""What the false-failure veto and the neighbour admission did inside each run's window:
their counters summed over the nodes, per run and per variant.

Reads an experiment results directory whose runs kept their routing snapshots
(``runs/<run>/snapshot-{start,end}.json.gz``, taken at the window's start and end:
manetkit/experiment/snapshots.py) and takes, for every valid run of a stack with the
veto on, the engine counters ``veto-*`` (docs/linkquality.md "The false-failure veto")
at the end minus those at the start, summed over the nodes. Per variant it pools the
runs: failures vetoed, the share after which the link carried a frame again
(``veto-confirmed``: the veto was right), the breaks by reason, and the real breaks
the veto held back with their mean delay. With the admission on, also the control
packets it refused (``link-not-admitted``) by rule (``admission-refused-*``), and the
route discoveries completed with their mean latency. The summary is written as JSON
beside the runs, since the snapshots themselves are not committed.

    python3 tools/veto_counts.py docs/results/linkq-rwp30-20ms-r2
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from manetkit.experiment import snapshots

OUT = "veto-counts.json"


KEPT = ("veto-", "admission-", "link-not-admitted", "discoveries-completed",
        "discovery-latency-ms")  # fmt: skip


def engine_counters(snapshot: dict[str, Any]) -> dict[str, Counter[str]]:
    """Each node's engine counters of the veto, the admission and route discovery
    (peers' snapshots have none)."""
    out: dict[str, Counter[str]] = {}
    for node, snap in snapshot["nodes"].items():
        daemon = snap.get("daemon") or {}
        counters = (daemon.get("engine") or {}).get("counters") or {}
        out[node] = Counter({k: int(v) for k, v in counters.items() if k.startswith(KEPT)})
    return out


def window_counts(start: dict[str, Any], end: dict[str, Any]) -> Counter[str]:
    """End minus start, summed over the nodes; a node whose counters went down (its
    daemon restarted) counts from zero."""
    before, after = engine_counters(start), engine_counters(end)
    total: Counter[str] = Counter()
    for node, c1 in after.items():
        c0 = before.get(node, Counter())
        restarted = any(c1[k] < v for k, v in c0.items())
        total.update(c1 if restarted else Counter({k: c1[k] - c0[k] for k in c1}))
    return total


def derived(c: Counter[str]) -> dict[str, Any]:
    vetoed = c["veto-vetoed"]
    delayed = c["veto-delayed-breaks"]
    breaks = {k.removeprefix("veto-break-"): v for k, v in c.items() if k.startswith("veto-break-")}
    out: dict[str, Any] = {
        "vetoed": vetoed,
        "confirmed": c["veto-confirmed"],
        "confirmed_share": round(c["veto-confirmed"] / vetoed, 3) if vetoed else None,
        "breaks": dict(sorted(breaks.items())),
        "delayed_breaks": delayed,
        "mean_delay_ms": round(c["veto-delay-ms"] / delayed, 1) if delayed else None,
    }
    rules = {k.removeprefix("admission-refused-"): v for k, v in c.items()
             if k.startswith("admission-refused-")}  # fmt: skip
    if c["link-not-admitted"] or rules:
        out["admission"] = {
            "refused": c["link-not-admitted"],
            "by_rule": dict(sorted(rules.items())),
        }
    done = c["discoveries-completed"]
    out["discoveries"] = done
    out["discovery_mean_s"] = round(c["discovery-latency-ms"] / done / 1000, 3) if done else None
    return out


def main(results: Path) -> dict[str, Any]:
    runs: dict[str, Any] = {}
    pooled: dict[str, Counter[str]] = {}
    for f in sorted((results / "runs").glob("*.json")):
        if f.name.endswith((".invalid-1.json", ".error.json")):
            continue
        run = json.loads(f.read_text())
        snaps = f.with_suffix("")
        start, end = snaps / "snapshot-start.json.gz", snaps / "snapshot-end.json.gz"
        if not run["fidelity"]["valid"] or not (start.exists() and end.exists()):
            continue
        c = window_counts(snapshots.load(start), snapshots.load(end))
        if not any(k.startswith(("veto-", "admission-", "link-not-admitted")) for k in c):
            continue  # the veto and the admission were off (or the stack is a peer)
        stack = run["params"]["stack"]
        runs[run["run"]] = {"stack": stack, "seed": run["params"]["seed"], **derived(c)}
        pooled.setdefault(stack, Counter()).update(c)
    doc = {
        "by_variant": {
            s: {"runs": sum(r["stack"] == s for r in runs.values()), **derived(c)}
            for s, c in sorted(pooled.items())
        },
        "runs": runs,
    }
    (results / OUT).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="an experiment's results directory")
    a = ap.parse_args()
    if not (a.results / "runs").is_dir():
        ap.error(f"{a.results}: no runs/ directory (not an experiment's results)")
    print(json.dumps(main(a.results)["by_variant"], indent=1))
