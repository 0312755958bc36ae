"""``manetkit bench labup``: how long ``lab up`` and ``lab down`` take for a scenario.

The lab's goal is that a 30-node random-waypoint lab (``rwp-30.yaml``) comes up in
under 30 s and goes down leaving nothing; this measures it (wall-clock, as the user
waits) and checks that nothing of the lab is left afterwards.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from rich.table import Table

from manetkit import paths
from manetkit.bench import report
from manetkit.errors import UserError
from manetkit.lab import netns, nodes
from manetkit.lab.scenario import SHIPPED_SCENARIOS

GOAL_UP_S = 30.0


def measure(scenario: Path, runs: int) -> dict:
    ups, downs, leftovers = [], [], []
    for r in range(runs):
        lab = f"bup{os.getpid() % 10000}{r}"
        t0 = time.monotonic()
        try:
            state = nodes.up(scenario, name=lab)
            ups.append(time.monotonic() - t0)
            count = len(state.nodes)
        finally:
            t1 = time.monotonic()
            nodes.down(lab)
            if len(downs) < len(ups):
                downs.append(time.monotonic() - t1)
        left = netns.list_names(f"{paths.NETNS_PREFIX}{lab}-") + [
            str(p) for p in nodes.find_processes(lab)
        ]
        if paths.lab_dir(lab).exists():
            left.append(str(paths.lab_dir(lab)))
        leftovers.append(left)
    return {
        "scenario": str(scenario),
        "nodes": count,
        "up_s": [round(x, 3) for x in ups],
        "down_s": [round(x, 3) for x in downs],
        "goal_up_s": GOAL_UP_S,
        "leftovers": leftovers,
    }


def run(args: argparse.Namespace) -> int:
    scenario = Path(args.scenario)
    if not scenario.exists():
        raise UserError(f"scenario {scenario}: no such file")
    if args.runs < 1:
        raise UserError("--runs must be >= 1")
    result = measure(scenario, args.runs)
    t = Table(
        "run", "lab up (s)", "lab down (s)", "left behind", title=f"bench labup: {scenario.name}"
    )
    for i, (u, d, left) in enumerate(
        zip(result["up_s"], result["down_s"], result["leftovers"], strict=True), 1
    ):
        t.add_row(str(i), f"{u:.1f}", f"{d:.1f}", ", ".join(left) or "nothing")
    worst = max(result["up_s"])
    verdict = "meets" if worst < GOAL_UP_S else "MISSES"
    report.show(
        t,
        f"{result['nodes']} nodes: worst lab up {worst:.1f} s, {verdict} the {GOAL_UP_S:g} s goal",
    )
    report.write(args.out, "labup", result)
    return 0 if worst < GOAL_UP_S and not any(result["leftovers"]) else 1


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario",
        default=str(SHIPPED_SCENARIOS / "rwp-30.yaml"),
        help="scenario (default: the shipped rwp-30.yaml)",
    )
    parser.add_argument("--runs", type=int, default=1, help="repetitions (1)")
    parser.set_defaults(func=run)
