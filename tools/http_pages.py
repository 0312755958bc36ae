"""An experiment's HTTP runs page by page: what the goal's figure leaves out.

The HTTP goal (manetkit/experiment/goals.py) compares the medians of the runs' mean page
service times over *completed* pages, so a stack that fails its slow pages looks faster
by that figure. For each stack, over its valid runs, this prints:

Only valid runs count (manetkit/experiment/validity.py); the others are counted.

- pages completed, failed and cut (by the window's end), and the share completed of
  the pages that ended (completed + failed);
- ``service``: the median of the runs' mean service times (the goal's figure) with its
  percentile-bootstrap 95 % interval (manetkit/stats.py);
- ``censored``: the same with each failed page counted at its timeout, a lower bound of
  what it would have taken;
- ``unicast_acked``: the median over the runs of the share of unicast transmit attempts
  that were acknowledged (the run's ``rates``: a stack on long, weak links pays retries),
  and ``control_per_s``: the median of the network-wide routing control packets per
  second of window (the run's ``control``);

and for each ``--pair A:B`` the reduction 1 - A/B of both figures with its interval, and
page for page: over the transactions both stacks completed, 1 - (A's total service time
/ B's). A client's i-th transaction asks for the same page in every stack of a seed (its
random generator is seeded by the seed and the server: manetkit/experiment/webclient.py);
the repeat r of A is matched with the repeat r of B.

    python3 tools/http_pages.py docs/results/linkq-rwp30-http-20ms \\
        --pair aodv:babeld --pair aodv:batmand > pages.json

Given several results directories (cells made with the same seeds, e.g. one setting
against another, made on different days: not side by side), each stack is named
``STACK@DIR`` (DIR the directory's last component), so the pairs can cross cells:

    python3 tools/http_pages.py docs/results/linkq-rwp30-http-10ms \\
        docs/results/linkq-rwp30-http-10ms-mcast \\
        --pair aodv-mcast55@linkq-rwp30-http-10ms-mcast:aodv@linkq-rwp30-http-10ms
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from manetkit import stats
from manetkit.experiment import validity
from manetkit.experiment.report import http_page_outcomes

Key = tuple[int, int, str, int]  # seed, repeat, client, transaction index


def _runs(cells: list[Path]) -> dict[str, list[dict[str, Any]]]:
    """The HTTP runs by stack (failed-to-run records left out); with several results
    directories, by ``STACK@DIR``."""
    by: dict[str, list[dict[str, Any]]] = {}
    for results in cells:
        for f in sorted((results / "runs").glob("*.json")):
            if f.name.endswith(".error.json"):
                continue
            run = json.loads(f.read_text())
            if run.get("http"):
                name = run["params"]["stack"]
                if len(cells) > 1:
                    name = f"{name}@{results.resolve().name}"
                by.setdefault(name, []).append(run)
    return by


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def run_figures(run: dict[str, Any]) -> dict[str, Any]:
    """A run's pages: counts, mean service time of the completed ones, and the mean with
    each failed page at its timeout."""
    timeout = float(run["traffic"]["page_timeout_s"])
    done, failed, cut = http_page_outcomes(run)
    return {
        "completed": len(done),
        "failed": failed,
        "cut": cut,
        "service_s": _mean(done),
        "censored_s": _mean(done + [timeout] * failed),
    }


def _median(xs: list[float]) -> float | None:
    xs = sorted(xs)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def air_figures(run: dict[str, Any]) -> dict[str, float | None]:
    """A run's share of acknowledged unicast attempts and its control packets per second
    (None where the run did not record them)."""
    totals = (run.get("rates") or {}).get("totals") or {}
    attempts = sum(t["attempts"] for t in totals.values())
    acked = sum(t["acked"] for t in totals.values())
    control = (run.get("control") or {}).get("control_packets")
    window = (run.get("window") or {}).get("duration_s")
    return {
        "unicast_acked": acked / attempts if attempts else None,
        "control_per_s": control / window if control is not None and window else None,
    }


def _transactions(run: dict[str, Any]) -> dict[Key, dict[str, Any]]:
    p = run["params"]
    return {
        (p["seed"], p.get("repeat", 1), pair["client"], i): page
        for pair in run["http"]["pairs"]
        for i, page in enumerate(pair["pages"])
    }


def page_for_page(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> dict[str, Any]:
    """1 - ours / theirs over the transactions both completed (the same page asked)."""
    a = {k: v for r in ours for k, v in _transactions(r).items()}
    b = {k: v for r in theirs for k, v in _transactions(r).items()}
    both = [k for k in a.keys() & b.keys() if a[k]["ok"] and b[k]["ok"]]
    same = [k for k in both if a[k]["page"] == b[k]["page"]]
    sa = sum(a[k]["service_s"] for k in same)
    sb = sum(b[k]["service_s"] for k in same)
    return {
        "pages": len(same),
        "different_page": len(both) - len(same),  # should be 0: the clients' seeding
        "ours_s": round(sa, 3),
        "theirs_s": round(sb, 3),
        "reduction": round(1 - sa / sb, 4) if sb > 0 else None,
    }


def main(results: Path | list[Path], pairs: list[tuple[str, str]]) -> dict[str, Any]:
    by = _runs(results if isinstance(results, list) else [results])
    split = {s: validity.split(rs) for s, rs in by.items()}
    valid = {s: v["valid"] for s, v in split.items()}
    figs = {s: [run_figures(r) for r in rs] for s, rs in valid.items()}
    air = {s: [air_figures(r) for r in rs] for s, rs in valid.items()}
    out: dict[str, Any] = {"stacks": {}, "pairs": {}}
    for stack, fs in sorted(figs.items()):
        done = sum(f["completed"] for f in fs)
        failed = sum(f["failed"] for f in fs)
        service = [f["service_s"] for f in fs if f["service_s"] is not None]
        censored = [f["censored_s"] for f in fs if f["censored_s"] is not None]
        out["stacks"][stack] = {
            "runs": len(fs),
            "invalid_runs": len(split[stack]["invalid"]),
            "unrecorded_runs": len(split[stack]["unrecorded"]),  # made before fidelity
            "completed": done,
            "failed": failed,
            "cut": sum(f["cut"] for f in fs),
            "completed_share": round(done / (done + failed), 4) if done + failed else None,
            "service": stats.median_ci(service).to_json() if service else None,
            "censored": stats.median_ci(censored).to_json() if censored else None,
        }
        for what in ("unicast_acked", "control_per_s"):
            m = _median([a[what] for a in air[stack] if a[what] is not None])
            out["stacks"][stack][what] = round(m, 4) if m is not None else None
    for ours, theirs in pairs:
        if ours not in figs or theirs not in figs:
            continue
        got: dict[str, Any] = {}
        for what in ("service_s", "censored_s"):
            a = [f[what] for f in figs[ours] if f[what] is not None]
            b = [f[what] for f in figs[theirs] if f[what] is not None]
            got[what.removesuffix("_s")] = stats.reduction_ci(a, b).to_json() if a and b else None
        got["page_for_page"] = page_for_page(valid[ours], valid[theirs])
        out["pairs"][f"{ours}/{theirs}"] = got
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "results", type=Path, nargs="+",
        help="an experiment's results directory; several name their stacks STACK@DIR",
    )  # fmt: skip
    ap.add_argument(
        "--pair", action="append", default=[], metavar="OURS:THEIRS",
        help="how much lower OURS's page times are than THEIRS's (repeatable)",
    )  # fmt: skip
    a = ap.parse_args()
    for d in a.results:
        if not (d / "runs").is_dir():
            ap.error(f"{d}: no runs/ directory (not an experiment's results)")
    if len({d.resolve().name for d in a.results}) < len(a.results):
        ap.error("two results directories with the same name: their stacks would clash")
    pairs = []
    for p in a.pair:
        ours, sep, theirs = p.partition(":")
        if not sep or not ours or not theirs:
            ap.error(f"--pair {p!r}: give OURS:THEIRS, two stack names")
        pairs.append((ours, theirs))
    known = _runs(a.results)
    for name in {n for pair in pairs for n in pair} - known.keys():
        ap.error(f"--pair: no HTTP runs of {name!r}; the stacks are {', '.join(sorted(known))}")
    print(json.dumps(main(a.results, pairs), indent=1))
