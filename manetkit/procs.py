"""Waiting for a condition and stopping processes: one copy for lab, bench and tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    cond: Callable[[], T],
    timeout: float = 10.0,
    what: str = "condition",
    interval: float = 0.05,
    *,
    detail: Callable[[], str] | None = None,
) -> T:
    """Poll ``cond`` every ``interval`` s until it returns something true, and return that.

    ``cond`` is always asked at least once; an exception it raises (a process it watches
    died) ends the wait. After ``timeout`` seconds raises ``TimeoutError`` naming
    ``what``, followed by ``detail()`` when given (what was still missing). The one
    waiting loop of the lab, the benches, the field rig and the tests: for readiness of
    real processes and sockets only; protocol timers are tested with fake clocks.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, what, detail)
        time.sleep(interval)


async def wait_for_async(
    cond: Callable[[], T],
    timeout: float = 10.0,
    what: str = "condition",
    interval: float = 0.01,
    *,
    detail: Callable[[], str] | None = None,
) -> T:
    """:func:`wait_for` inside a coroutine: the event loop runs between the polls (a
    server under test keeps serving while its client waits)."""
    import asyncio

    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, what, detail)
        await asyncio.sleep(interval)


def _timed_out(timeout: float, what: str, detail: Callable[[], str] | None) -> TimeoutError:
    more = f": {detail()}" if detail is not None else ""
    return TimeoutError(f"timed out after {timeout:g} s waiting for {what}{more}")


def stop(proc: subprocess.Popen, grace: float = 5.0) -> int | None:
    """SIGTERM ``proc``, SIGKILL it if still running after ``grace`` s; reap it.

    Returns the exit status (None only if even SIGKILL did not end it within 5 s).
    """
    stop_all([proc], grace)
    return proc.returncode


def stop_all(
    procs: Iterable[subprocess.Popen], grace: float = 5.0, sig: int = signal.SIGTERM
) -> None:
    """Send ``sig`` to every running process of ``procs`` at once (a sender and its
    receiver end together, neither sees the other go first), then reap each, SIGKILLing
    any still running ``grace`` s after the signal."""
    procs = list(procs)
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(sig)
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(5)


def alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie counts as dead: it only waits to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state letter follows the ")" that closes the command name.
    return stat[stat.rindex(")") + 2] not in "ZX"


def _reap(pid: int) -> None:
    # Our own children (tests, ``lab up`` before it exits) must be waited for, or they
    # stay zombies; anyone else's are reaped by their parent.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def terminate(pids: Iterable[int], *, grace: float = 5.0) -> list[int]:
    """SIGTERM ``pids``, SIGKILL those still running after ``grace`` s; returns the killed."""
    me = {os.getpid(), os.getppid()}
    pending = {p for p in pids if p not in me}
    _signal(pending, signal.SIGTERM)
    _wait_gone(pending, grace)
    killed = sorted(pending)
    _signal(pending, signal.SIGKILL)
    _wait_gone(pending, 2.0)
    return killed


def _signal(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _wait_gone(pending: set[int], timeout: float) -> None:
    """Remove from ``pending`` every pid that exits within ``timeout`` s (reaping ours)."""
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            _reap(pid)
            if not alive(pid):
                pending.discard(pid)
        if pending:
            time.sleep(0.02)
