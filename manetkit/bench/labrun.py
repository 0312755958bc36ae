"""What every lab benchmark and experiment run does around its runs: Python started
inside a node's namespace, an optional flock around each run (``--lock``: one lab at a time on a shared
machine without holding the lock for a whole matrix), SIGTERM turned into an exception a
run unwinds, and the medium's clock (:func:`medium_time`, :func:`wait_medium`: a window
anchored to it sees the same movement in every run of a seed).

A run's own daemon or proxy settings reach every node as ``lab up --daemon-config`` /
``--proxy-config`` (``nodes.up``'s ``daemon_config`` / ``proxy_config``).
"""

from __future__ import annotations

import contextlib
import fcntl
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

from manetkit.lab.medium import control as medium_control
from manetkit.paths import netns_name


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
