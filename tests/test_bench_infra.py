"""The shared pieces the benchmarks stop processes and configure labs with (one
terminate-then-kill, one env-config writer, one goodput reader)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from manetkit import procs
from manetkit.bench import stream

# Writes "ready", then on SIGTERM writes the signal's arrival time and exits 3 (or, with
# "ignore", ignores it and must be SIGKILLed).
CHILD = """
import signal, sys, time, pathlib
out = pathlib.Path(sys.argv[1])
def on_term(*_):
    out.with_suffix(".term").write_text(repr(time.monotonic()))
    if sys.argv[2] != "ignore":
        sys.exit(3)
signal.signal(signal.SIGTERM, on_term)
out.write_text("ready")
while True:
    time.sleep(0.01)
"""


def _child(tmp: Path, name: str, how: str) -> tuple[subprocess.Popen[bytes], Path]:
    out = tmp / f"{name}.txt"
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(out), how])
    procs.wait_for(out.exists, timeout=10, what=f"{name} ready")
    return p, out


def test_stop_all_signals_everyone_first_then_kills_the_stubborn(tmp_path: Path) -> None:
    stubborn, s_out = _child(tmp_path, "stubborn", "ignore")
    polite, p_out = _child(tmp_path, "polite", "exit")
    t0 = time.monotonic()
    procs.stop_all([stubborn, polite], grace=1.0)
    took = time.monotonic() - t0
    # The polite one got its SIGTERM without waiting for the stubborn one's grace.
    t_polite = float(p_out.with_suffix(".term").read_text())
    t_stubborn = float(s_out.with_suffix(".term").read_text())
    assert abs(t_polite - t_stubborn) < 0.5
    assert polite.returncode == 3
    assert stubborn.returncode == -signal.SIGKILL
    assert 1.0 <= took < 5.0


def test_stop_returns_the_exit_status(tmp_path: Path) -> None:
    polite, _ = _child(tmp_path, "polite", "exit")
    assert procs.stop(polite, grace=5) == 3
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    assert procs.stop(done) == 0


def test_received_kbps_reads_the_receivers_samples(tmp_path: Path) -> None:
    out = tmp_path / "recv.json"
    out.write_text(json.dumps({"bytes": 3000, "samples": [[0.5, 1000], [1.5, 2000], [2.5, 3000]]}))
    # 2000 bytes between t=1 and t=3 -> 16 kbit / 2 s
    assert stream.received_kbps(out, 1.0, 3.0) == 8.0
    assert stream.received_kbps(tmp_path / "missing.json", 1.0, 3.0) == 0.0
