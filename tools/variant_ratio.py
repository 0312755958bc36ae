"""Every variant of an experiment against its own stack: bulk goodput ratios.

Reads an experiment results directory whose variants are named after the stack they
change (``dsr-adm``, ``aodv-adm-veto``, ``dsr-atra``: docs/results/linkq-gray-r2,
docs/results/atra-rwp30-20ms) and prints, for each variant, the valid runs' goodputs,
their medians and the ratio variant / stack with its percentile bootstrap 95 % interval
(manetkit/stats.py), beside it the seed-paired interval (whole seeds drawn
for both sides), and, for a variant that extends another (``aodv-adm-veto`` of
``aodv-adm``), the ratio over that one too. A goal (``--goal``, 2x by default: the gray
chain's) is met only when the independent interval's lower end clears it.

With ``--proxies`` it compares proxy modes instead: in each stack, every proxy mode's
runs against the runs with no proxy (``none``), named ``<stack>+<mode>``
(docs/results/elfn-rwp30-20ms). Without it, only the runs with no proxy count.

    python3 tools/variant_ratio.py docs/results/linkq-gray-r2 > ratios.json
    python3 tools/variant_ratio.py docs/results/atra-rwp30-20ms --goal 1.2
    python3 tools/variant_ratio.py docs/results/elfn-rwp30-20ms --proxies --goal 1.0
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from manetkit import stats


def _runs(results: Path, proxies: bool) -> dict[str, list[tuple[float, int, bool]]]:
    """Goodput, seed and validity of every run, by stack (``<stack>+<mode>`` for a run
    with a proxy when ``proxies``; left out otherwise)."""
    by: dict[str, list[tuple[float, int, bool]]] = {}
    for f in sorted((results / "runs").glob("*.json")):
        if f.name.endswith(".error.json"):
            continue  # a run that failed to run (the runner makes it again on resume)
        run = json.loads(f.read_text())
        goodput = run["bulk"]["flows"][0]["goodput_kbps"]
        p = run["params"]
        proxy = p.get("proxy", "none")
        if proxy != "none" and not proxies:
            continue
        key = p["stack"] if proxy == "none" else f"{p['stack']}+{proxy}"
        by.setdefault(key, []).append((goodput, p["seed"], bool(run["fidelity"]["valid"])))
    return by


def _base(variant: str, proxies: bool) -> str:
    """What a variant is measured against: its stack with no proxy (``--proxies``), or
    the stack its name starts with."""
    return variant.split("+", 1)[0] if proxies else variant.split("-", 1)[0]


def main(
    results: Path,
    goal: float = 2.0,
    proxies: bool = False,
    pairs: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """``pairs``: (variant, what it is measured against) instead of every variant against
    its stack (a variant against another: admission with the veto against the veto)."""
    by = _runs(results, proxies)
    out: dict[str, Any] = {}
    todo = pairs or [(v, _base(v, proxies)) for v in sorted(by)]
    for variant, base in todo:
        if variant == base or base not in by or variant not in by:
            continue
        off_runs = [(g, seed) for g, seed, valid in by[base] if valid]
        on_runs = [(g, seed) for g, seed, valid in by[variant] if valid]
        if not off_runs or not on_runs:
            continue
        off, on = [g for g, _ in off_runs], [g for g, _ in on_runs]
        ratio = stats.ratio_ci(on, off)
        # a variant that extends another (aodv-adm-veto of aodv-adm); none with --proxies
        parent = base if proxies or pairs else variant.rsplit("-", 1)[0]
        out[variant if not pairs else f"{variant}/{base}"] = {
            "off_kbps": off,
            "on_kbps": on,
            "median_off": stats.median_ci(off).to_json(),
            "median_on": stats.median_ci(on).to_json(),
            "ratio": ratio.to_json(),
            "ratio_seed_paired": stats.paired_ratio_ci(on_runs, off_runs).to_json(),
            "goal": goal,
            "goal_lower_end_clears": ratio.clears(goal),
            "invalid_runs": sum(not v for st in (base, variant) for *_, v in by[st]),
        }
        if parent != base and parent in by:
            under = [g for g, _, valid in by[parent] if valid]
            out[variant]["over_" + parent] = stats.ratio_ci(on, under).to_json()
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="an experiment's results directory")
    ap.add_argument("--goal", type=float, default=2.0, help="the ratio a goal asks for")
    ap.add_argument(
        "--proxies", action="store_true", help="each proxy mode against no proxy, per stack"
    )
    ap.add_argument(
        "--pair",
        action="append",
        default=[],
        metavar="ON:OFF",
        help="a variant against another, e.g. dsr-floor:dsr-veto (repeatable; only these)",
    )
    a = ap.parse_args()
    if not (a.results / "runs").is_dir():
        ap.error(f"{a.results}: no runs/ directory (not an experiment's results)")
    pairs = []
    for p in a.pair:
        on, sep, off = p.partition(":")
        if not sep or not on or not off:
            ap.error(f"--pair {p!r}: give ON:OFF, two variant names")
        pairs.append((on, off))
    print(json.dumps(main(a.results, a.goal, a.proxies, pairs or None), indent=1))
