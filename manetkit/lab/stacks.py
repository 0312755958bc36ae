"""The per-node software a scenario asks for besides the radio: routing daemon, proxy.

``lab up`` starts what :func:`node_processes` returns inside each node's namespace once
every radio is attached, and ``lab down`` stops it. The daemon and proxy engineers fill
this in as their parts become runnable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from manetkit.errors import UserError


@dataclass(frozen=True)
class ProcessSpec:
    """One process of a lab.

    ``argv`` must contain ``--lab <lab>``: that is how ``lab down`` finds the process after
    a crash, when no state file is left (``manetkit.lab.nodes.find_processes``).
    """

    name: str  # unique in the lab; its output goes to logs/<name>.log
    argv: list[str]
    netns: str | None = None  # namespace to run in (None: the root namespace)
    env: dict[str, str] = field(default_factory=dict)


def node_processes(lab: str, scenario, node: str) -> list[ProcessSpec]:
    """Extra processes for ``node`` (``n1``..) given the scenario's ``stack`` and ``proxy``."""
    stack = getattr(scenario, "stack", "none")
    proxy = getattr(scenario, "proxy", "none")
    specs: list[ProcessSpec] = []
    if stack != "none":
        raise UserError(f"stack {stack!r} is not built yet (use stack: none)")
    if proxy != "none":
        raise UserError(f"proxy {proxy!r} is not built yet (use proxy: none)")
    return specs
