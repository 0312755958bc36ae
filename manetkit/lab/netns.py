"""Network namespace helpers: create, delete, list, run a command in one, find its processes.

Namespaces are made and removed through pyroute2 (``/run/netns/<name>`` bind mounts, the
same ones ``ip netns`` uses, so ``ip netns exec`` and ``ip -n`` work on them). Commands
run in a namespace through ``ip netns exec``: it also remounts ``/sys`` for the namespace,
which tools such as ``ethtool`` and ``sysctl`` need, and the process it starts is visible
with an ordinary command line.

Used by ``manetkit lab``, by benchmarks and by tests of every part.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from pyroute2 import NetNS, netns

NETNS_RUN_DIR = Path("/var/run/netns")


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
    for pid in pending:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            _reap(pid)
            if not alive(pid):
                pending.discard(pid)
        if pending:
            time.sleep(0.02)
    killed = sorted(pending)
    for pid in killed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            _reap(pid)
            if not alive(pid):
                pending.discard(pid)
        if pending:
            time.sleep(0.02)
    return killed
