"""A child forked without exec by a process that uses manetkit.lab.netns starts with
SIGTERM/SIGINT at their defaults (pyroute2's namespace helpers are such children: see the
module docstring of manetkit.lab.netns)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Iterator

import pytest
from pyroute2.process import ChildProcess

from manetkit.lab import netns  # noqa: F401 - importing it registers the fork hook


@pytest.fixture
def handlers() -> Iterator[None]:
    """Whatever a test installs is put back."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def _raise(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")  # what the experiment runner's did


def fork_and_signal(sig: int, then: Callable[[], None] = lambda: None) -> int:
    """Fork; the child sends itself ``sig`` and exits 0 if it survives it, 3 if a Python
    handler ran there (an exception). Returns the child's exit code (-sig: killed)."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.kill(os.getpid(), sig)
            then()
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_forked_child_dies_by_the_signal_not_by_the_parents_handler(handlers, sig):
    signal.signal(sig, _raise)
    assert fork_and_signal(sig) == -sig
    with pytest.raises(KeyboardInterrupt):  # the parent's own handler is untouched
        os.kill(os.getpid(), sig)


def test_pythons_keyboardinterrupt_is_not_inherited_either(handlers):
    """default_int_handler raises KeyboardInterrupt: in the child it would unwind the
    parent's stack (its finally blocks take the parent's lab down)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    assert fork_and_signal(signal.SIGINT) == -signal.SIGINT


def test_an_ignored_signal_stays_ignored_in_the_child(handlers):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    assert fork_and_signal(signal.SIGTERM) == 0


def test_a_childs_signal_does_not_reach_the_parents_asyncio_loop():
    """loop.add_signal_handler writes the signal number to a wakeup fd the forked child
    shares: without the reset, the child's SIGTERM ran the parent's SIGTERM callback."""
    got: list[str] = []

    async def main() -> int:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, got.append, "parent's callback")
        barrier = asyncio.Event()
        loop.add_signal_handler(signal.SIGUSR1, barrier.set)
        try:
            code = fork_and_signal(signal.SIGTERM)
            # The loop dispatches the signals of its self-pipe in order: once our own
            # SIGUSR1, sent after the child ended, is handled, anything the child wrote
            # there was handled before it.
            os.kill(os.getpid(), signal.SIGUSR1)
            await asyncio.wait_for(barrier.wait(), 5)
            return code
        finally:
            loop.remove_signal_handler(signal.SIGTERM)
            loop.remove_signal_handler(signal.SIGUSR1)

    assert asyncio.run(main()) == -signal.SIGTERM
    assert got == []


def _child_handlers() -> bytes:
    return " ".join(str(signal.getsignal(s)) for s in (signal.SIGTERM, signal.SIGINT)).encode()


def test_pyroute2s_forked_helper_starts_with_default_handlers(handlers):
    """The helper netns.create and NetNS fork (and stop with SIGTERM), seen from inside."""
    signal.signal(signal.SIGTERM, _raise)
    signal.signal(signal.SIGINT, _raise)
    with ChildProcess(target=_child_handlers, args=[]) as proc:
        seen = proc.get_data(timeout=10).decode()
    assert seen == f"{signal.SIG_DFL} {signal.SIG_DFL}"
