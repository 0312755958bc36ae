"""What a metric plug-in is: hooks a run calls, and the rows the report makes of them.

A spec names the plug-ins its runs measure (``metrics: [atra, retrans]``); the runner
makes one instance per run and calls, in order:

* :meth:`Metric.before` once the window opens (the lab up, the traffic starting);
* :meth:`Metric.closing` :data:`CLOSING_LEAD_S` before the window closes (the traffic's
  connections still open: read their sockets);
* :meth:`Metric.after` when the window closes (the lab still up: read the daemons);
* :meth:`Metric.result` once the lab is down, with the medium's ground-truth graph log:
  what goes into the run's JSON under the plug-in's name.

The report calls :meth:`Metric.rows` on the finished runs (each with its ``params`` and
the plug-in's part) for a table of its own (:attr:`Metric.columns`, :attr:`Metric.title`,
:attr:`Metric.note`). Plug-ins that need the daemons' events say so
(:attr:`Metric.needs_events`): the run then records them from the window's start
(:class:`~manetkit.experiment.eventlog.EventLog`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from manetkit.experiment.eventlog import EventLog

Column = tuple[str, str, str]  # title, row field, format (manetkit.bench.report.row_cell)
CLOSING_LEAD_S = 1.0


@dataclass
class Connection:
    """A TCP connection of the run's traffic: the application's, from ``src`` to ``dst``
    on ``port`` (a plug-in finds it, or the proxy's mesh leg for it, in ``src``)."""

    src: str
    dst: str
    port: int


@dataclass
class RunContext:
    """What a plug-in may read of a run."""

    lab: str
    nodes: list[str]
    stack: str  # the lab's stack: dsr, aodv, smr, babeld, batmand, none
    proxy: str  # the lab's proxy mode: none, plain, fixed-rto, elfn, bus
    work: Path
    connections: list[Connection] = field(default_factory=list)
    events: EventLog | None = None
    window: tuple[float, float] | None = None  # Unix time, set when it closed
    # the stream traffic's receivers' samples per flow (CLOCK_MONOTONIC, total bytes),
    # and the window in that clock
    samples: list[list[tuple[float, int]]] = field(default_factory=list)
    window_mono: tuple[float, float] | None = None
    stream_flows: list[dict[str, Any]] = field(default_factory=list)  # their results
    # link flap restorations in the window: CLOCK_MONOTONIC and Unix time
    link_ups: list[float] = field(default_factory=list)
    link_ups_wall: list[float] = field(default_factory=list)
    link_downs: list[float] = field(default_factory=list)

    @property
    def manetkit(self) -> bool:
        return self.stack in ("dsr", "aodv", "smr")


class Metric:
    """A plug-in: the hooks do nothing unless a subclass says otherwise."""

    name: ClassVar[str] = ""
    needs_events: ClassVar[bool] = False
    title: ClassVar[str] = ""
    note: ClassVar[str] = ""
    columns: ClassVar[list[Column]] = []

    def before(self, ctx: RunContext) -> None:
        """The window opens."""

    def closing(self, ctx: RunContext) -> None:
        """The window closes in :data:`CLOSING_LEAD_S`; the traffic still runs."""

    def after(self, ctx: RunContext) -> None:
        """The window closed; the lab is still up."""

    def result(self, ctx: RunContext, graph: list[dict[str, Any]]) -> dict[str, Any]:
        """The run's JSON part, once the lab is down (``graph``: the ground-truth log)."""
        return {}

    @classmethod
    def rows(cls, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The report's rows from finished runs that measured this plug-in."""
        return []


def group(docs: list[dict[str, Any]], part: str) -> dict[tuple, list[dict[str, Any]]]:
    """Runs with a ``part`` by (scenario, traffic, variant, speed), sorted: a report row each."""
    from manetkit.experiment.goals import variant

    groups: dict[tuple, list[dict[str, Any]]] = {}
    for d in docs:
        if d.get(part) is not None:
            p = d["params"]
            key = (p["scenario"], p["traffic"], variant(p), float(p["speed"]))
            groups.setdefault(key, []).append(d)
    return dict(sorted(groups.items()))


def row_head(key: tuple, runs: list[dict[str, Any]]) -> dict[str, Any]:
    scen, traffic, var, speed = key
    return {"scenario": scen, "traffic": traffic, "variant": var, "speed": speed,
            "runs": len(runs)}  # fmt: skip


def part_rows(
    docs: list[dict[str, Any]], part: str, cells: Callable[[list[dict[str, Any]]], dict[str, Any]]
) -> list[dict[str, Any]]:
    """A report row per group of runs with a ``part``: :func:`row_head` and the ``cells``
    made of the group's non-empty parts. A group whose parts are all empty (the plug-in
    did not apply to its stack) gets no row."""
    out = []
    for key, runs in group(docs, part).items():
        parts = [d[part] for d in runs if d[part]]
        if parts:
            out.append({**row_head(key, runs), **cells(parts)})
    return out


HEAD_COLUMNS: list[Column] = [("scenario", "scenario", "s"), ("traffic", "traffic", "s"),
                              ("stack", "variant", "s"), ("speed m/s", "speed", "g"),
                              ("runs", "runs", "d")]  # fmt: skip


def mean(xs: Any) -> float | None:
    got = [x for x in xs if x is not None]
    return sum(got) / len(got) if got else None
