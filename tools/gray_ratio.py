"""Gray-zone chain: goodput with link quality on against off, per stack.

Reads an experiment results directory of docs/results/linkq-gray-r2/spec.yaml's shape
(stacks ``dsr`` and ``aodv`` with link quality off, and variants named after them:
``dsr-adm``, ``aodv-adm``, ``aodv-adm-veto``, ...) and prints, for each variant, the
valid runs' goodputs, their medians and the ratio variant/off (the variant's own stack
off) with its percentile bootstrap 95 % interval (manetkit/experiment/stats.py), and
beside it the seed-paired interval (whole seeds drawn for both sides). The goal, >= 2x,
is met only when the independent interval's lower end clears it.

    python3 tools/gray_ratio.py docs/results/linkq-gray-r2 > ratios.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from manetkit.experiment import stats

GOAL = 2.0


def main(results: Path) -> dict[str, Any]:
    by: dict[str, list[tuple[float, int, bool]]] = {}
    for f in sorted((results / "runs").glob("*.json")):
        run = json.loads(f.read_text())
        goodput = run["bulk"]["flows"][0]["goodput_kbps"]
        p = run["params"]
        by.setdefault(p["stack"], []).append((goodput, p["seed"], bool(run["fidelity"]["valid"])))
    out: dict[str, Any] = {}
    for variant in sorted(by):
        base = variant.split("-", 1)[0]
        if variant == base or base not in by:
            continue
        off_runs = [(g, seed) for g, seed, valid in by[base] if valid]
        on_runs = [(g, seed) for g, seed, valid in by[variant] if valid]
        if not off_runs or not on_runs:
            continue
        off, on = [g for g, _ in off_runs], [g for g, _ in on_runs]
        ratio = stats.ratio_ci(on, off)
        out[variant] = {
            "off_kbps": off,
            "on_kbps": on,
            "median_off": stats.median_ci(off).to_json(),
            "median_on": stats.median_ci(on).to_json(),
            "ratio": ratio.to_json(),
            "ratio_seed_paired": stats.paired_ratio_ci(on_runs, off_runs).to_json(),
            "goal_2x_lower_end_clears": ratio.clears(GOAL),
            "invalid_runs": sum(not v for st in (base, variant) for *_, v in by[st]),
        }
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1])), indent=1))
