"""What of a lab exists on this machine, found without its state file: its namespaces
(``mk-<lab>-nI``), the labs those names and the run directory show, and the manetkit
processes started with ``--lab <lab>`` (how ``lab down`` cleans up after a crash)."""

from __future__ import annotations

import contextlib
import os

from manetkit import paths
from manetkit.lab import netns


def namespaces(lab: str) -> list[str]:
    """The lab's namespaces, in node order."""
    prefix = f"{paths.NETNS_PREFIX}{lab}-"
    names = netns.list_names(prefix)

    def key(n: str) -> tuple[int, str]:
        tail = n[len(prefix) :]
        return (int(tail[1:]) if tail[1:].isdigit() else 1 << 30, tail)

    return sorted(names, key=key)


def labs() -> list[str]:
    """Labs known here: a state dir under the rundir, or namespaces named ``mk-<lab>-...``."""
    found = set()
    with contextlib.suppress(FileNotFoundError):
        found.update(p.name for p in (paths.rundir() / "labs").iterdir() if p.is_dir())
    for ns in netns.list_names(paths.NETNS_PREFIX):
        lab, sep, _node = ns[len(paths.NETNS_PREFIX) :].rpartition("-")
        if sep and lab:
            found.add(lab)
    return sorted(found)


def find_processes(lab: str) -> set[int]:
    """Pids of manetkit processes whose argv has ``--lab <lab>`` (works without state)."""
    found = set()
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        argv = netns.cmdline(int(entry))
        if not any("manetkit" in a for a in argv):
            continue
        for i, a in enumerate(argv[:-1]):
            if a == "--lab" and argv[i + 1] == lab:
                found.add(int(entry))
                break
    return found
