"""What ``lab up`` starts: one process of a lab, described before it runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProcessSpec:
    """One process of a lab.

    ``argv`` must contain ``--lab <lab>``: that is how ``lab down`` finds the process after
    a crash, when no state file is left (``manetkit.lab.nodes.find_processes``).
    ``ready``, if given, is polled by ``lab up`` until true (e.g. the daemon's socket).
    """

    name: str  # unique in the lab; its output goes to logs/<name>.log
    argv: list[str]
    netns: str | None = None  # namespace to run in (None: the root namespace)
    env: dict[str, str] = field(default_factory=dict)
    ready: Callable[[], bool] | None = field(default=None, compare=False)
