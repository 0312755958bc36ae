"""Tables printed into a pipe are not folded (``lab stations n2 | grep`` used to miss
the MAC because rich cut it to "02:6…" at 80 columns)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
from rich.table import Table
from manetkit.console import console
t = Table("station", "signal", "avg", "inactive ms", "rx pkts", "rx bytes", "tx pkts",
          "tx bytes", "tx retries", "tx failed", title="lab n2 radio0")
t.add_row("02:6d:6b:00:00:01", "-61.3 dBm", "-61.0 dBm", "120", "123456789", "98765432101",
          "55555", "4444444444", "333", "22")
console.print(t)
"""


def test_a_piped_table_prints_every_cell_whole():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        env={"COLUMNS": "40", "PATH": "/usr/bin:/bin"},
    ).stdout
    row = next(line for line in out.splitlines() if "02:6d" in line)
    for cell in ("02:6d:6b:00:00:01", "-61.3 dBm", "123456789", "98765432101", "4444444444"):
        assert cell in row
    assert "…" not in out
