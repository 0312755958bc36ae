"""Measured / expected throughput of runs made without a T_i table, scored afterwards.

Holland & Vaidya's expected throughput (section 3, eq. 3.1; manetkit/bench/expected.py)
needs the seconds each flow's shortest path spent at each hop count, which every run
records from the medium's ground truth (``ground_truth.pairs[<src>-<dst>].hops_s``), and
the throughput T_i of a static i-hop chain on the same radio profile (``manetkit bench
chain``). A run made before its profile had a chain table has ``expected_kbps`` null;
this scores it from its recorded hop times and a chain JSON, the same eq. 3.1 the
experiment applies while it runs.

For each stack (``<stack>+<mode>`` for a run with a proxy) it prints the valid runs'
measured / expected, their median with a percentile bootstrap 95 % interval
(manetkit/stats.py), and whether the interval's lower end clears ``--goal``
(0.8 by default: ">= 80 % of expected at 20 m/s"). Only one-flow bulk runs are scored.
A chain measured on another profile or at another data rate than a run's scenario is
refused (measured / expected would compare a run with another world's ceiling); the
chain's rate control and spacing are printed with the scores, since on a rate-adaptive
profile T_i depends on how long the chain's hops are (docs/experiments.md).

    manetkit bench chain --scenario configs/scenarios/rwp-30-outdoor.yaml --max-hops 7 \\
        --duration 30 --out docs/results/chain-outdoor-11b
    python3 tools/expected_rescore.py docs/results/linkq-rwp30-20ms-r2 \\
        --chain docs/results/chain-outdoor-11b/chain.json --speed 20
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from manetkit import stats
from manetkit.bench import expected
from manetkit.errors import UserError
from manetkit.lab import scenario


def hop_seconds(doc: dict[str, Any]) -> dict[int | None, float]:
    """The run's one flow's seconds at each hop count (None: partitioned)."""
    flow = doc["bulk"]["flows"][0]
    pair = doc["ground_truth"]["pairs"][f"{flow['src']}-{flow['dst']}"]
    return {(None if h == "inf" else int(h)): float(t) for h, t in pair["hops_s"].items()}


def radio_of(doc: dict[str, Any]) -> tuple[str, float]:
    """The run's radio profile and data rate (its scenario with its overrides)."""
    path = Path(doc["scenario_file"])
    if not path.exists():  # made from another checkout: the shipped scenario of that name
        path = scenario.SHIPPED_SCENARIOS / path.name
    sc = scenario.load_scenario(path, overrides={
        k: v for k, v in doc.get("overrides", {}).items() if k.startswith("radio.")
    })  # fmt: skip
    return sc.radio.profile, float(sc.radio.rate_mbps)


def rescore(doc: dict[str, Any], table: dict[int, float]) -> dict[str, float] | None:
    """``{"expected_kbps", "measured_over_expected"}`` of a one-flow bulk run, or None
    when it has no flow, no recorded hop times or no connected second."""
    flows = (doc.get("bulk") or {}).get("flows") or []
    if len(flows) != 1:
        return None
    try:
        t_at = hop_seconds(doc)
    except KeyError:
        return None
    exp = expected.expected_throughput(t_at, table)
    if not exp:
        return None
    return {
        "expected_kbps": round(exp, 1),
        "measured_over_expected": flows[0]["goodput_kbps"] / exp,
    }


def main(
    results: list[Path], chain: Path, speed: float | None = None, goal: float = 0.8
) -> dict[str, Any]:
    table = expected.chain_table(chain)
    doc_chain = json.loads(chain.read_text())
    chain_profile = expected.chain_table_profile(chain)
    chain_rate = doc_chain["rate_bps"] / 1e6
    by: dict[str, list[float]] = {}
    invalid: dict[str, int] = {}
    for d in results:
        for f in sorted((d / "runs").glob("*.json")):
            if f.name.endswith(".error.json"):
                continue
            doc = json.loads(f.read_text())
            p = doc["params"]
            if speed is not None and float(p.get("speed", 0)) != speed:
                continue
            profile, rate = radio_of(doc)
            if (profile, rate) != (chain_profile, chain_rate):
                raise UserError(
                    f"{f.name}: {profile} at {rate:g} Mbit/s, but {chain} was measured on "
                    f"{chain_profile} at {chain_rate:g} Mbit/s"
                )
            proxy = p.get("proxy", "none")
            key = p["stack"] if proxy == "none" else f"{p['stack']}+{proxy}"
            if not doc["fidelity"]["valid"]:
                invalid[key] = invalid.get(key, 0) + 1
                continue
            got = rescore(doc, table)
            if got is not None:
                by.setdefault(key, []).append(got["measured_over_expected"])
    radio = doc_chain.get("radio") or {}
    out: dict[str, Any] = {
        "chain": {"kbps": table, "profile": chain_profile, "rate_mbps": chain_rate,
                  "rate_control": radio.get("rate_control"), "spacing_m": doc_chain.get("spacing_m")},
        "goal": goal,
    }  # fmt: skip
    for key, fracs in sorted(by.items()):
        ci = stats.median_ci(fracs)
        out[key] = {
            "measured_over_expected": [round(x, 3) for x in fracs],
            "median": ci.to_json(),
            "goal_lower_end_clears": ci.clears(goal),
            "invalid_runs": invalid.get(key, 0),
        }
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, nargs="+", help="experiment results directories")
    ap.add_argument("--chain", type=Path, required=True, help="a manetkit bench chain JSON")
    ap.add_argument("--speed", type=float, default=None, help="only the runs at this speed")
    ap.add_argument("--goal", type=float, default=0.8, help="the fraction a goal asks for")
    a = ap.parse_args()
    for r in a.results:
        if not (r / "runs").is_dir():
            ap.error(f"{r}: no runs/ directory (not an experiment's results)")
    print(json.dumps(main(a.results, a.chain, a.speed, a.goal), indent=1))
