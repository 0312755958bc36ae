"""``manetkit bench``: one sub-command per micro-benchmark module in this package.

A benchmark module provides ``register(parser)`` (arguments, ``set_defaults(func=...)``);
its results are printed as a table and written as JSON under ``--out``. Comparisons of
stacks and mechanisms over a matrix of lab runs (Atra, SMR, flapping links, the peers)
are ``manetkit experiment`` specs (``configs/experiments/``), not benches.
"""

from __future__ import annotations

import argparse
import importlib

BENCHES: list[tuple[str, str]] = [
    ("chain", "TCP throughput over static chains of 1..N hops (Holland & Vaidya Fig. 1)"),
    ("medium", "frames per second the lab medium relays, and the highest rate it keeps up with"),
    ("discovery", "route discovery latency over 1..8 hops (daemon per-hop overhead)"),
    ("dataplane", "daemon forwarding over veth pairs vs the kernel's own forwarding"),
    ("daemon", "daemon CPU and RSS idle and while forwarding"),
    ("proxy", "split-TCP proxy overhead: lab chain vs plain, fast veth through a proxy pair"),
    ("labup", "time to bring a lab up and down (rwp-30: goal under 30 s, nothing left)"),
    ("docker", "image size and build time; compose lab up time and iperf3 vs the netns lab"),
    ("lab-scale", "lab fidelity at 50-100 nodes: shared vs per-process radios, largest valid N"),
]


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench", metavar="BENCH")
    for name, help_text in BENCHES:
        mod = importlib.import_module(f"manetkit.bench.{name.replace('-', '')}")
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--out", default="results", help="directory for the JSON (and plots)")
        mod.register(p)
