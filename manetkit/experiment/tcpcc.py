"""The TCP congestion control of a run, set explicitly in every node's namespace.

``net.ipv4.tcp_congestion_control`` is per network namespace (Linux 4.15 and later); a
new namespace starts with the host's default, which is BBR on some machines and CUBIC on
the laptops this project is for. A run therefore sets it in every node right after ``lab
up``, before any of its traffic opens a connection (every socket takes the namespace's
default when it is made, an accepted one included, unless the program chose one with
``TCP_CONGESTION``), and reads it back into the run's JSON.

A spec names algorithms the kernel may lack (``bbr`` is a module); :func:`require`
refuses those before any run starts, after trying to load the module, naming them.

A namespace other than the host's may only take as its default an algorithm the host
*allows* (``net.ipv4.tcp_allowed_congestion_control``; the kernel refuses any other with
EPERM, ``tcp_set_default_congestion_control()`` in net/ipv4/tcp_cong.c). The allowed list
holds the host's default and reno, so on a host that runs BBR, cubic is not in it:
:func:`allowing` adds what a matrix needs to the list for the matrix's duration and puts
the host's list back afterwards. Two matrices may overlap (two users, or a matrix and a
bench): each registers what it needs, and the list goes back to the host's only when the
last of them ends, so the first to end cannot take cubic away from the other's runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from manetkit import paths
from manetkit.errors import UserError
from manetkit.lab import netns

SYSCTL = "net.ipv4.tcp_congestion_control"
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
ALLOWED = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")


def available(path: Path = AVAILABLE) -> set[str]:
    """The algorithms this kernel has now."""
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def _modprobe(name: str) -> None:
    subprocess.run(["modprobe", "-q", f"tcp_{name}"], capture_output=True, timeout=20, check=False)


def require(
    names: Iterable[str],
    have: Callable[[], set[str]] = available,
    load: Callable[[str], None] = _modprobe,
) -> None:
    """Refuse (naming it) an algorithm the kernel lacks, after trying its module."""
    missing = [n for n in names if n not in have()]
    for n in missing:
        load(n)
    still = [n for n in missing if n not in have()]
    if still:
        raise UserError(
            f"congestion_control: {', '.join(still)} not in this kernel "
            f"(tcp_available_congestion_control: {' '.join(sorted(have())) or 'unreadable'}; "
            f"modprobe tcp_{still[0]} did not add it)"
        )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holders(state: Path) -> dict[Path, list[str]]:
    """The live holders' needs; a dead process's file is removed (a matrix killed -9)."""
    out: dict[Path, list[str]] = {}
    for f in state.glob("holder-*"):
        pid = int(f.name.split("-")[1])
        if _alive(pid):
            out[f] = f.read_text().split()
        else:
            f.unlink(missing_ok=True)
    return out


def _write(path: Path, state: Path, original: list[str]) -> None:
    """The allowed list: the host's own plus what the live holders need."""
    needed = [n for names in _holders(state).values() for n in names]
    path.write_text(" ".join(dict.fromkeys(original + needed)) + "\n")


@contextlib.contextmanager
def allowing(
    names: Iterable[str], path: Path = ALLOWED, state: Path | None = None
) -> Iterator[list[str]]:
    """The host's allowed list widened by ``names`` for the block (yields what was
    added); the host's list back when the last overlapping block ends, whatever
    happens. ``state`` (default: the run directory's ``tcpcc``) holds the host's list
    and one file per live holder, under a lock."""
    state = state or paths.rundir() / "tcpcc"
    state.mkdir(parents=True, exist_ok=True)
    original_file = state / "original"
    me = state / f"holder-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    with open(state / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        current = path.read_text().split()
        if original_file.exists():  # another holder's, or one killed before it put it back
            original = original_file.read_text().split()
        else:  # the first holder: the list as it is now is the host's
            original = current
            original_file.write_text(" ".join(original) + "\n")
        added = [n for n in dict.fromkeys(names) if n not in current]
        me.write_text(" ".join(dict.fromkeys(names)) + "\n")
        _write(path, state, original)
    try:
        yield added
    finally:
        with open(state / "lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            me.unlink(missing_ok=True)
            _write(path, state, original)
            if not _holders(state):
                original_file.unlink(missing_ok=True)


def set_lab(lab: str, nodes: list[str], cc: str) -> dict[str, Any]:
    """Set ``cc`` in every node's namespace and read it back: ``{"congestion_control",
    "nodes", "read_back": {algorithm: nodes}}``; raises when a node refused it."""
    script = f"sysctl -q -w {SYSCTL}={cc} && sysctl -n {SYSCTL}"  # cc: the spec's checked name
    seen: dict[str, int] = {}
    for n in nodes:
        got = netns.run(paths.netns_name(lab, n), ["sh", "-c", script], check=False)
        name = got.stdout.strip() or f"refused: {got.stderr.strip()}"
        seen[name] = seen.get(name, 0) + 1
    if set(seen) != {cc}:
        raise RuntimeError(f"{SYSCTL} = {cc} did not hold in every node of {lab}: {seen}")
    return {"congestion_control": cc, "nodes": len(nodes), "read_back": seen}
