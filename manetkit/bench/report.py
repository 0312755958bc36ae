"""The one result writer of ``manetkit bench``: a table on stdout, the figures as JSON.

Every benchmark module ends with :func:`write` (``<out>/<name>.json``, pretty-printed) and
prints its tables through :data:`console` (whole cells when piped, :mod:`manetkit.console`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table

from manetkit.console import console


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
