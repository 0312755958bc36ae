"""Waiting for a condition and stopping child processes: one copy for lab, bench and tests."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    cond: Callable[[], T], timeout: float, what: str, interval: float = 0.05
) -> T:
    """Poll ``cond`` until it returns something true, and return that.

    Raises ``TimeoutError`` naming ``what`` after ``timeout`` seconds. For readiness of
    real processes and sockets only; protocol timers are tested with fake clocks.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def stop(proc: subprocess.Popen, grace: float = 5.0) -> int | None:
    """SIGTERM ``proc``, SIGKILL it if still running after ``grace`` s; reap it.

    Returns the exit status (None only if even SIGKILL did not end it within 5 s).
    """
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
    try:
        return proc.wait(5)
    except subprocess.TimeoutExpired:
        return None
