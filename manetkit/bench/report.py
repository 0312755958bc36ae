"""The one result writer of ``manetkit bench``: a table on stdout, the figures as JSON.

Every benchmark module ends with :func:`write` (``<out>/<name>.json``, pretty-printed) and
prints its tables through :data:`console` (whole cells when piped, :mod:`manetkit.console`).
Plots (benchmarks and ``manetkit experiment report``) start from :func:`pyplot` and end
with :func:`save_figure`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.table import Table

from manetkit.console import console
from manetkit.extras import require


def write(out: str | Path, name: str, doc: Any) -> Path:
    """Write ``doc`` to ``<out>/<name>.json``; say where."""
    path = Path(out) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    console.print(f"written {path}")
    return path


def show(table: Table, *notes: str) -> None:
    """Print a result table and the notes under it."""
    console.print(table)
    for note in notes:
        console.print(note)


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """The command line a result came from (for the JSON), without argparse's handler."""
    return {k: v for k, v in vars(args).items() if k != "func"}


def mean(xs: Iterable[float | None]) -> float | None:
    """Mean of the values that exist (a run that measured nothing is left out); None if none."""
    got = [x for x in xs if x is not None]
    return sum(got) / len(got) if got else None


def cell(x: float | None, fmt: str) -> str:
    """A table cell: ``x`` formatted, ``-`` when it was not measured."""
    return "-" if x is None else format(x, fmt)


def row_cell(v: Any, fmt: str) -> str:
    """A table cell of a row dict: ``fmt`` ``seeds`` joins a list, ``s`` prints as is,
    anything else formats a number as :func:`cell`."""
    if fmt == "seeds":
        return ",".join(map(str, v))
    if fmt == "s":
        return str(v)
    return cell(v, fmt)


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend: files only, no display needed."""
    matplotlib = require("matplotlib", "plotting")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, dpi: int = 110) -> Path:
    """Every plot ends the same way: laid out, written, closed (pyplot keeps figures)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
