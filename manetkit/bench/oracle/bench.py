"""``manetkit bench medium --oracle ns3``: ns-3's delivery curves and chain table.

Builds the ns-3 programs (:mod:`.build`), runs the validation grid of :mod:`.params`
(delivery ratio vs distance per profile, standard, rate, frame size, with and without
Nakagami fading) and the 1..7-hop chain, prints the distances of 50 % delivery and the
gray-zone ratio, and writes ``DIR/ns3-delivery.json``, ``DIR/ns3-chain.json`` and the
plots (``DIR/delivery-*.png``, ``DIR/chain.png``). More curve sets of the same shape
(the lab medium's) are drawn beside ns-3's when :func:`run` is given them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.table import Table

from manetkit.bench import report
from manetkit.bench.oracle import curves, params, plot, simulate
from manetkit.bench.oracle.params import CurveSpec
from manetkit.console import console

ORACLES = ("ns3",)
# Curve sets to draw beside the oracle's: label -> f(grid, frames) -> curve set.
CurveSource = Callable[[list[CurveSpec], int], dict[str, Any]]


def register_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("oracle (--oracle ns3: needs apt-get install g++ libns3-dev)")
    g.add_argument("--oracle", choices=ORACLES, help="run the reference simulator's curves")
    g.add_argument("--profiles", default="outdoor,indoor", help="profiles of the grid")
    g.add_argument("--frames", type=int, default=simulate.FRAMES, help="frames per grid point")
    g.add_argument("--no-chain", action="store_true", help="skip the 1..7-hop chain table")
    g.add_argument(
        "--chain-duration", type=float, default=60.0,
        help="seconds of TCP per chain run (the first third, at most 10 s, not counted)",
    )  # fmt: skip


def _profiles(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    for n in names:
        if n not in params.PROFILES:
            raise SystemExit(f"--profiles: {n!r} is not one of {', '.join(params.PROFILES)}")
    return names


def d50_table(curve_set: dict[str, Any]) -> Table:
    """Distance of 50 % delivery (m) per curve: a row per profile/standard/frame/fading,
    a column per rate."""
    by_row: dict[tuple[str, str, int, str], dict[float, float | None]] = {}
    rates: set[float] = set()
    for c in curve_set["curves"]:
        row = (c["profile"], c["standard"], int(c["frame_bytes"]), c["fading"])
        by_row.setdefault(row, {})[float(c["rate_mbps"])] = c["d50_m"]
        rates.add(float(c["rate_mbps"]))
    table = Table(title=f"{curve_set['source']}: distance (m) of 50 % delivery")
    for col in ("profile", "standard", "frame B", "fading"):
        table.add_column(col)
    cols = sorted(rates)
    for r in cols:
        table.add_column(f"{r:g}", justify="right")
    for row, d50 in sorted(by_row.items()):
        table.add_row(
            row[0], row[1], str(row[2]), row[3], *(report.cell(d50.get(r), ".0f") for r in cols)
        )
    return table


def run(args: argparse.Namespace, beside: dict[str, CurveSource] | None = None) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    grid = params.validation_grid(_profiles(args.profiles))

    def progress(spec: CurveSpec, curve: curves.Curve) -> None:
        console.print(f"ns-3 {spec.key}: d50 {report.cell(curve['d50_m'], '.1f')} m")

    delivery = simulate.run_grid(grid, frames=args.frames, progress=progress)
    report.write(out, "ns3-delivery", delivery)
    sets = {"ns-3": delivery}
    for label, make in (beside or {}).items():
        sets[label] = make(grid, args.frames)
    for path in plot.plot_delivery(sets, out):
        console.print(f"written {path}")
    notes = []
    if "outdoor" in _profiles(args.profiles):
        for fading in ("none", "nakagami"):
            ratio = curves.gray_zone_ratio(delivery, fading)
            notes.append(
                f"gray zone (outdoor 802.11b, {fading}): 60-byte frames at 1 Mbit/s reach "
                f"50 % delivery {ratio:.2f}x as far as 1000-byte frames at 11 Mbit/s"
            )
    report.show(d50_table(delivery), *notes)
    if not args.no_chain:
        tables = {}
        for fading in (False, True):
            name = "nakagami" if fading else "none"

            def row_done(row: dict[str, Any], name: str = name) -> None:
                console.print(
                    f"ns-3 chain ({name}) {row['hops']} hops: {row['throughput_mbps']:.3f} Mbit/s"
                )

            tables[name] = simulate.run_chain_table(
                fading=fading,
                duration=args.chain_duration,
                warmup=min(10.0, args.chain_duration / 3),
                progress=row_done,
            )
        report.write(out, "ns3-chain", tables)
        path = plot.plot_chain({f"ns-3, {k}": t for k, t in tables.items()}, out / "chain.png")
        console.print(f"written {path}")
        table = Table(title=f"ns-3 chain, {params.CHAIN_HOP_M:g} m hops, 802.11b 11 Mbit/s")
        table.add_column("hops", justify="right")
        for name in tables:
            table.add_column(f"T_i Mbit/s ({name})", justify="right")
            table.add_column(f"T_i/T_1 ({name})", justify="right")
        for i, h in enumerate(params.CHAIN_HOPS):
            cells = [str(h)]
            for t in tables.values():
                row = t["rows"][i]
                cells += [f"{row['throughput_mbps']:.3f}", report.cell(row["ratio_to_1hop"], ".3f")]
            table.add_row(*cells)
        report.show(table)
    return 0
