"""The rich console every manetkit command prints through.

On a terminal rich fits tables to the window. Into a pipe or a file it would fold them
to 80 columns, cutting a MAC address to ``02:6…`` so that ``lab stations n2 | grep`` misses
it: there the console is as wide as any table needs (tables do not expand), so every cell
is printed whole.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

# Wide enough for any table manetkit prints; tables take only the width they need.
PIPE_WIDTH = 10_000


def make_console(stderr: bool = False) -> Console:
    con = Console(stderr=stderr)
    if not con.is_terminal:
        con = Console(stderr=stderr, width=PIPE_WIDTH)
    return con


console = make_console()


def fidelity_table(fid: dict[str, Any], title: str = "emulation fidelity") -> Table:
    """A lab medium's ``stats`` ``fidelity`` section (its scheduling lag since the start
    and over the last seconds, the drops its model decided and those it did not) as one
    table: ``lab status`` and ``manetkit status --medium`` print it."""
    t = Table("", "outputs", "lag p50 ms", "lag p99 ms", "lag max ms", title=title)
    for when, lag in fid.get("lag_ms", {}).items():
        t.add_row(
            when.replace("_", " "),
            str(lag.get("outputs")),
            *("-" if lag.get(k) is None else f"{lag[k]:g}" for k in ("p50", "p99", "max")),
        )
    drops = fid.get("drops", {})
    for kind in ("unmodelled", "modelled"):
        counts = drops.get(kind, {})
        lost = sum(counts.values())
        detail = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if v) or "none"
        mark = "[red]" if kind == "unmodelled" and lost else ""
        t.add_row(f"{kind} drops", f"{mark}{lost}", detail, "", "")
    return t
