"""The TCP congestion control of a run, set explicitly in every node's namespace.

``net.ipv4.tcp_congestion_control`` is per network namespace (Linux 4.15 and later); a
new namespace starts with the host's default, which is BBR on some machines and CUBIC on
the laptops this project is for. An experiment run (and a bench that measures TCP)
therefore sets it in every node right after ``lab up``, before any of its traffic opens
a connection (every socket takes the namespace's default when it is made, an accepted
one included, unless the program chose one with ``TCP_CONGESTION``), and reads it back
into the run's JSON.

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


# The allowed list is the host's, whatever run directory a matrix uses (tests set their
# own MANETKIT_RUNDIR): its holders' state lives at one fixed place.
STATE = Path("/run/manetkit-tcpcc")


def _holders(state: Path) -> dict[Path, list[str]]:
    """The live holders' needs. A holder keeps its file flock'ed for its life, so a file
    whose lock can be taken is a dead holder's (a matrix killed with -9): removed."""
    out: dict[Path, list[str]] = {}
    for f in state.glob("holder-*"):
        try:
            with open(f) as fd:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            out[f] = f.read_text().split()  # held: alive
        except FileNotFoundError:
            continue
        else:
            f.unlink(missing_ok=True)
    return out


def _write(path: Path, state: Path, original: list[str]) -> None:
    """The allowed list: the host's own plus what the live holders need (written only
    when it changes)."""
    needed = [n for names in _holders(state).values() for n in names]
    want = list(dict.fromkeys(original + needed))
    if path.read_text().split() != want:
        path.write_text(" ".join(want) + "\n")


def _save(file: Path, names: list[str]) -> None:
    tmp = file.with_suffix(".tmp")
    tmp.write_text(" ".join(names) + "\n")
    tmp.replace(file)  # atomic: a kill mid-write leaves the old file or the new one


@contextlib.contextmanager
def allowing(
    names: Iterable[str], path: Path = ALLOWED, state: Path = STATE
) -> Iterator[list[str]]:
    """The host's allowed list widened by ``names`` for the block (yields what was
    added); the host's list back when the last overlapping block ends, whatever
    happens. ``state`` holds the host's list and one locked file per live holder, under
    a lock."""
    state.mkdir(parents=True, exist_ok=True)
    original_file = state / "original"
    me = state / f"holder-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    wanted = list(dict.fromkeys(names))
    mine = open(me, "w")  # noqa: SIM115 - locked for the block's life: the liveness proof
    try:
        fcntl.flock(mine, fcntl.LOCK_EX)
        mine.write(" ".join(wanted) + "\n")
        mine.flush()
        with open(state / "lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            current = path.read_text().split()
            if original_file.exists():  # another holder's, or one killed before it put it back
                original = original_file.read_text().split()
            else:  # the first holder: the list as it is now is the host's
                original = current
                _save(original_file, original)
            added = [n for n in wanted if n not in current]
            _write(path, state, original)
        yield added
    finally:
        with open(state / "lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            me.unlink(missing_ok=True)
            mine.close()
            if original_file.exists():
                _write(path, state, original_file.read_text().split())
                if not _holders(state):
                    original_file.unlink(missing_ok=True)


def set_lab(lab: str, nodes: list[str], cc: str) -> dict[str, Any]:
    """Set ``cc`` in every node's namespace and read it back: ``{"congestion_control",
    "nodes", "read_back": {algorithm: nodes}}``; raises when a node refused it."""
    return set_namespaces([paths.netns_name(lab, n) for n in nodes], cc, lab)


def set_namespaces(names: list[str], cc: str, what: str = "the namespaces") -> dict[str, Any]:
    """:func:`set_lab` for namespaces by their own names (a bench's bare pair)."""
    script = f"sysctl -q -w {SYSCTL}={cc} && sysctl -n {SYSCTL}"  # cc: a checked name
    seen: dict[str, int] = {}
    for ns in names:
        got = netns.run(ns, ["sh", "-c", script], check=False)
        name = got.stdout.strip() or f"refused: {got.stderr.strip()}"
        seen[name] = seen.get(name, 0) + 1
    if set(seen) != {cc}:
        raise RuntimeError(f"{SYSCTL} = {cc} did not hold in every node of {what}: {seen}")
    return {"congestion_control": cc, "nodes": len(names), "read_back": seen}
