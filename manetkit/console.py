"""The rich console every manetkit command prints through.

On a terminal rich fits tables to the window. Into a pipe or a file it would fold them
to 80 columns, cutting a MAC address to ``02:6…`` so that ``lab stations n2 | grep`` misses
it: there the console is as wide as any table needs (tables do not expand), so every cell
is printed whole.
"""

from __future__ import annotations

from rich.console import Console

# Wide enough for any table manetkit prints; tables take only the width they need.
PIPE_WIDTH = 10_000


def make_console(stderr: bool = False) -> Console:
    con = Console(stderr=stderr)
    if not con.is_terminal:
        con = Console(stderr=stderr, width=PIPE_WIDTH)
    return con


console = make_console()
