"""Plots of delivery-ratio curves and chain tables, one or more curve sets side by side.

Every function takes ``{label: document}``: the first set is drawn in solid lines, the
next ones dashed and dotted in the same colour per rate, so the ns-3 oracle's curves
and the lab medium's (the same JSON shape, :mod:`manetkit.bench.oracle.curves`) can be
read against each other on one figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from manetkit.bench import report
from manetkit.bench.oracle import curves

STYLES = ("-", "--", ":", "-.")
FADING_TITLE = {"none": "no fading", "nakagami": "Nakagami fading"}


def plot_delivery(curve_sets: Mapping[str, dict[str, Any]], out_dir: Path) -> list[Path]:
    """One PNG per (profile, standard) of the first set: delivery ratio vs distance, a
    panel per frame size (rows) and fading (columns), a line per rate and set."""
    plt = report.pyplot()
    labels = list(curve_sets)
    indexed = [curves.index(curve_sets[label]) for label in labels]
    first = curve_sets[labels[0]]["curves"]
    written = []
    groups = sorted({(c["profile"], c["standard"]) for c in first})
    for profile, standard in groups:
        mine = [c for c in first if (c["profile"], c["standard"]) == (profile, standard)]
        frames = sorted({int(c["frame_bytes"]) for c in mine})
        fadings = [f for f in ("none", "nakagami") if any(c["fading"] == f for c in mine)]
        rates = sorted({float(c["rate_mbps"]) for c in mine})
        colours = {r: plt.get_cmap("tab10")(i % 10) for i, r in enumerate(rates)}
        fig, axes = plt.subplots(
            len(frames), len(fadings), figsize=(5.2 * len(fadings), 3.6 * len(frames)),
            squeeze=False, sharex=True, sharey=True,
        )  # fmt: skip
        for row, frame in enumerate(frames):
            for col, fading in enumerate(fadings):
                ax = axes[row][col]
                for rate in rates:
                    key = (profile, standard, rate, frame, fading)
                    for k, (label, curves_of) in enumerate(zip(labels, indexed, strict=True)):
                        curve = curves_of.get(key)
                        if curve is None:
                            continue
                        xs = [p["distance_m"] for p in curve["points"]]
                        ys = [p["delivery"] for p in curve["points"]]
                        ax.plot(
                            xs, ys, STYLES[k % len(STYLES)], color=colours[rate],
                            label=f"{rate:g} Mbit/s" + (f" ({label})" if len(labels) > 1 else ""),
                        )  # fmt: skip
                ax.set_title(f"{frame}-byte frames, {FADING_TITLE[fading]}", fontsize=10)
                if row == len(frames) - 1:
                    ax.set_xlabel("distance (m)")
                ax.set_ylim(-0.02, 1.02)
                ax.grid(alpha=0.3)
                if col == 0:
                    ax.set_ylabel("delivery ratio")
        axes[0][0].legend(fontsize=7, loc="lower left")
        fig.suptitle(
            f"{profile} {standard}: one broadcast transmission received, vs distance "
            f"({' vs '.join(labels)})",
            fontsize=11,
        )
        path = out_dir / f"delivery-{profile}-{standard.replace('802.', '')}.png"
        written.append(report.save_figure(fig, path))
    return written


def plot_chain(tables: Mapping[str, dict[str, Any]], path: Path) -> Path:
    """T_i/T_1 vs hops for each chain table (a label each)."""
    plt = report.pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for k, (label, table) in enumerate(tables.items()):
        rows = table["rows"]
        ax.plot(
            [r["hops"] for r in rows], [r["ratio_to_1hop"] for r in rows],
            STYLES[k % len(STYLES)], marker="o",
            label=f"{label} (T_1 = {rows[0]['throughput_mbps']:.2f} Mbit/s)",
        )  # fmt: skip
    ax.set_xlabel("hops")
    ax.set_ylabel("T_i / T_1")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("bulk TCP over a static 802.11b chain at 11 Mbit/s", fontsize=10)
    return report.save_figure(fig, path)
