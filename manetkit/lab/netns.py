"""Network namespace helpers: create, delete, list, run a command in one, find its processes.

Namespaces are made and removed through pyroute2 (``/run/netns/<name>`` bind mounts, the
same ones ``ip netns`` uses, so ``ip netns exec`` and ``ip -n`` work on them). Commands
run in a namespace through ``ip netns exec``: it also remounts ``/sys`` for the namespace,
which tools such as ``ethtool`` and ``sysctl`` need, and the process it starts is visible
with an ordinary command line.

Used by ``manetkit lab``, by benchmarks and by tests of every part.

pyroute2 makes namespaces (and ``NetNS`` sockets) in a child it forks without exec and
then stops with SIGTERM. Such a child inherits the caller's Python signal handlers: one
that raises there unwinds a copy of the caller's stack in the child (it took the
experiment runner's lab down, and made pytest run the rest of the suite a second time
inside a namespace), and an asyncio handler writes the signal to the wakeup fd the child
shares with its parent, whose loop then acts on it. So every child forked by a process
that imports this module starts with SIGTERM and SIGINT at their defaults and no wakeup
fd (``os.register_at_fork``); a child that wants handlers installs its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from pyroute2 import NetNS, netns

NETNS_RUN_DIR = Path("/var/run/netns")


def _default_signals_in_child() -> None:
    """After ``fork()`` (no exec), in the child: the caller's SIGTERM/SIGINT handlers and
    its asyncio wakeup fd are not the child's (see the module docstring). An ignored
    signal stays ignored, as across exec."""
    # ValueError: not the main thread (then the handlers are not Python's to run here)
    with contextlib.suppress(ValueError):
        for sig in (signal.SIGTERM, signal.SIGINT):
            if signal.getsignal(sig) not in (signal.SIG_IGN, signal.SIG_DFL, None):
                signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)


os.register_at_fork(after_in_child=_default_signals_in_child)


def exists(name: str) -> bool:
    return (NETNS_RUN_DIR / name).exists()


def create(name: str, *, lo_up: bool = True) -> None:
    """Create namespace ``name`` (error if it exists) and bring its loopback up."""
    if exists(name):
        raise FileExistsError(f"network namespace {name} already exists")
    netns.create(name)
    if lo_up:
        with NetNS(name) as ns:
            ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")


def delete(name: str) -> bool:
    """Delete namespace ``name``; True if it existed. Idempotent."""
    if not exists(name):
        return False
    try:
        netns.remove(name)
    except FileNotFoundError:
        return False
    return True


def list_names(prefix: str = "") -> list[str]:
    """Names of the namespaces that start with ``prefix``, sorted."""
    try:
        names = os.listdir(NETNS_RUN_DIR)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.startswith(prefix))


def exec_argv(name: str, argv: Sequence[str]) -> list[str]:
    """The argv that runs ``argv`` inside namespace ``name``."""
    return ["ip", "netns", "exec", name, *argv]


def run(
    name: str,
    argv: Sequence[str],
    *,
    check: bool = True,
    timeout: float | None = 60,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in namespace ``name`` and wait; stdout/stderr captured as text."""
    proc = subprocess.run(
        exec_argv(name, argv),
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
    )
    if check and proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, proc.args, proc.stdout, proc.stderr)
    return proc


def popen(name: str, argv: Sequence[str], **kwargs) -> subprocess.Popen:
    """Start ``argv`` in namespace ``name`` (``subprocess.Popen`` keyword arguments)."""
    return subprocess.Popen(exec_argv(name, argv), **kwargs)


CLONE_NEWNET = 0x40000000  # linux/sched.h


def _setns(fd: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@contextlib.contextmanager
def entered(name: str) -> Iterator[None]:
    """Run the block with this thread inside namespace ``name`` (setns(2)), then return.

    What the block creates stays in ``name`` after it: a TAP (the device lives in the
    namespace its creator was in, and its fd keeps working from anywhere), a socket
    whose ioctls then address that namespace's interfaces, ``/proc/self/net/dev`` opened
    there (it keeps reporting that namespace's counters). Only this thread moves;
    filesystem paths (unix sockets, ``/run/netns``) are not per namespace."""
    target = os.open(NETNS_RUN_DIR / name, os.O_RDONLY | os.O_CLOEXEC)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(target)
        os.close(home)


def sysctl(name: str, settings: dict[str, str | int]) -> None:
    """Write sysctls inside namespace ``name`` (``net.ipv4.ip_forward`` style keys)."""
    args = [f"{k}={v}" for k, v in settings.items()]
    run(name, ["sysctl", "-q", "-w", *args])


# --- processes ------------------------------------------------------------------------


def _netns_inode(name: str) -> int | None:
    try:
        return os.stat(NETNS_RUN_DIR / name).st_ino
    except FileNotFoundError:
        return None


def pids_in(names: Iterable[str]) -> set[int]:
    """Pids of the processes whose network namespace is one of ``names`` (``ip netns pids``)."""
    inodes = {i for i in (_netns_inode(n) for n in names) if i is not None}
    if not inodes:
        return set()
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}/ns/net").st_ino in inodes:
                found.add(int(entry))
        except OSError:
            continue  # gone, or a kernel thread
    return found


def cmdline(pid: int) -> list[str]:
    """A process's argv ([] if it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]
