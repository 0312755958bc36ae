"""What every lab benchmark does around its runs: a config file merged into every node's
daemon or proxy while the lab comes up, Python started inside a node's namespace, and an
optional flock around each run (``--lock``: one lab at a time on a shared machine without
holding the lock for a whole matrix), and a measurement window anchored to the medium's
clock (:class:`MediumWindow`, :func:`wait_medium`, :func:`add_window_argument`).

``manetkit.lab.stacks`` reads the two environment variables (``EXTRA_ENV``,
``PROXY_EXTRA_ENV``) when ``lab up`` writes each node's configs.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from manetkit.errors import UserError
from manetkit.lab.medium import control as medium_control
from manetkit.paths import netns_name

# A lateness at or under this (s) is the control socket's round trip, not a late lab.
LATE_TOLERANCE_S = 0.5


@contextlib.contextmanager
def env_config(var: str, path: Path, doc: dict[str, Any]) -> Iterator[None]:
    """Write ``doc`` (YAML) to ``path`` and point ``var`` at it; restore ``var`` after."""
    old = os.environ.get(var)
    path.write_text(yaml.safe_dump(doc))
    os.environ[var] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = old


def interrupt(signum: int, frame: object) -> None:
    """A handler for SIGTERM and SIGINT: an exception the current run unwinds."""
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def term_as_interrupt() -> Iterator[None]:
    """SIGTERM (and SIGINT, which a shell ignores in a background job) raise
    KeyboardInterrupt inside: a run's ``finally`` then stops its processes and brings its
    lab down (the default action would leave its namespaces and daemons behind). A child
    pyroute2 forks gets the default handlers back (manetkit.lab.netns)."""
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def locked(path: str | None) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (created if missing) for the block; None: no lock."""
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ns_python(
    lab: str, node: str, module: str, *args: str, stderr: int | None = None
) -> subprocess.Popen[bytes]:
    """``python -m module args`` inside lab node ``node`` (``n4``); stdout discarded,
    stderr inherited unless ``stderr`` says otherwise (``subprocess.DEVNULL``)."""
    argv = ["ip", "netns", "exec", netns_name(lab, node), sys.executable, "-m", module, *args]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr)


def medium_time(lab: str, control: Callable[[str, dict], dict] = medium_control.control) -> float:
    """``lab``'s medium time now (s since the medium started: ``ping``'s ``t``)."""
    return float(control(lab, {"cmd": "ping"})["t"])


def wait_medium(
    lab: str,
    t: float,
    control: Callable[[str, dict], dict] = medium_control.control,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Wait until ``lab``'s medium time (seconds since the medium started: its mobility
    clock, ``{"cmd": "ping"}``'s ``t``) reaches ``t``; return how late (s) the medium
    already was past ``t`` when called, 0.0 if it had not reached it.

    Polls ``ping`` and sleeps the remainder it reports (one sleep, then a ping to check:
    the medium's clock and ``time.sleep`` are both CLOCK_MONOTONIC, so a second sleep
    is rare), never a busy loop."""
    first = True
    while True:
        now = medium_time(lab, control)
        if now >= t:
            return round(now - t, 3) if first else 0.0
        first = False
        sleep(max(t - now, 0.001))


def add_window_argument(parser: argparse.ArgumentParser, default: float, why: str) -> None:
    """``--window-start S``: the medium time at which the measured window opens."""
    parser.add_argument(
        "--window-start",
        type=float,
        default=default,
        help=f"medium seconds at which the measured window opens; the traffic starts "
        f"--warmup s before it ({default:g}: {why}; same seed = same movement in the "
        f"window)",
    )


def check_window(args: argparse.Namespace) -> None:
    """The traffic starts at medium time ``--window-start - --warmup``: not before 0."""
    if args.window_start < args.warmup:
        raise UserError(
            f"--window-start {args.window_start:g} is before --warmup {args.warmup:g} s "
            "of traffic could run (the medium's time starts at 0)"
        )


class MediumWindow:
    """A bench run's measured window, anchored to the medium's clock: made once the lab
    is up (``lab_up_s``); :meth:`traffic` waits until medium time ``start - warmup``,
    :meth:`open` until ``start`` and :meth:`close` until the window's end, the last two
    returning (``time.monotonic()``, ``time.time()``) for the receivers' samples and the
    ground-truth log (whose ``wall`` is the medium's start + ``t``, so the wall window
    is the medium window). A lab that came up after ``start`` is not silently shifted:
    the window opens when it can, ``window_late_s`` says by how much, with a warning."""

    def __init__(
        self,
        lab: str,
        tag: str,
        args: argparse.Namespace,
        control: Callable[[str, dict], dict] = medium_control.control,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.lab, self.tag, self._control, self._sleep = lab, tag, control, sleep
        self.start, self.warmup, self.duration = args.window_start, args.warmup, args.duration
        self.up = medium_time(lab, control)
        self.late = self.traffic_late = 0.0

    def _wait(self, t: float) -> float:
        return wait_medium(self.lab, t, self._control, self._sleep)

    def traffic(self) -> None:
        self.traffic_late = self._wait(self.start - self.warmup)

    def open(self) -> tuple[float, float]:
        self.late = self._wait(self.start)
        if self.late > LATE_TOLERANCE_S:
            print(f"warning: {self.tag}: the lab came up at medium t = {self.up:.1f} s, "
                  f"the window opens {self.late:.1f} s after --window-start "
                  f"{self.start:g}: not the other runs' window (raise --window-start)",
                  file=sys.stderr, flush=True)  # fmt: skip
        return time.monotonic(), time.time()

    def close(self) -> tuple[float, float]:
        self._wait(self.start + self.late + self.duration)
        return time.monotonic(), time.time()

    def record(self) -> dict[str, Any]:
        """The run JSON's window in medium time: ``lab_up_s`` (what ``--window-start``
        must leave room for), ``window_medium`` [start, end] as measured (``start`` +
        ``window_late_s`` when the lab came up late) and ``warmup_late_s`` (the traffic
        started that much after ``start - warmup``: a shorter warm-up)."""
        s = self.start + self.late
        return {
            "lab_up_s": round(self.up, 1),
            "window_start_s": self.start,
            "window_medium": [round(s, 3), round(s + self.duration, 3)],
            "window_late_s": self.late,
            "warmup_late_s": self.traffic_late,
        }
