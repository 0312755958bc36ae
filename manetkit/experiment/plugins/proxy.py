"""``proxy``: what the split-TCP proxies did in the window (docs/proxy.md, docs/elfn-bus.md).

A goodput says how much arrived, not what the proxies did for it. This plug-in records,
summed over the nodes: every proxy counter that moved in the window (sessions done and
reset, BUSY answers, mesh legs dropped, the daemon's route events; read a second
before the window closes, while the traffic still runs, so the traffic's own ending is
not counted), and from the proxies' log lines stamped inside the window the sessions frozen (ELFN's and BuS's route failures) and
resumed and the seconds they stayed frozen, the mesh legs lost, and every reset by its reason (a partition timeout, an idle
stream's, a reset from the peer, an application's, a server's): an app connection the
proxies reset is a run's goodput lost, and the reason is what to fix.

Each freeze is also checked against the medium's ground-truth graph (``freezes``): did
the two proxies' nodes have a path when it came, was the link the daemon named still in
the graph (a failure the medium did not decide: fading, collisions), and how many of the
frozen seconds had a path. ELFN holds a sender for as long as a freeze lasts, so frozen
seconds with a path are where ELFN can lose to plain TCP.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from manetkit import paths
from manetkit.lab.stacks import proxy_status

from ..eventlog import node_of
from .base import HEAD_COLUMNS, Metric, RunContext, part_rows
from .graph import edge_held, graph_at, has_path, seconds_with_path, snapshots

# manetkit.proxy.relay's log lines (the session id is the first 8 hex digits)
_RESET = re.compile(r"session \S+ to \S+ \(\S+\) reset: (.*)$")
# "session <id> to <peer> frozen: route-down from <src>[, link <a>-<b>]" (older proxies
# wrote neither the peer nor the link)
_FROZEN = re.compile(r"session (\S+)(?: to (\S+))? frozen: .*?(?:, link (\S+)-(\S+))?$")
_RESUMED = re.compile(r"session (\S+) resumed \(")
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")  # logging's asctime
_LEG_LOST = re.compile(r"session \S+: mesh leg to \S+ lost ")
_ENDED = re.compile(r"session (\S+)(?: to \S+ \(\S+\) reset: | done$)")  # reset or clean close
# link sensing's delay: a neighbour gone silent is reported some seconds after it was
# last heard, so a named link counts as one the medium did not break only when it was
# in the graph for this long before the freeze as well
LINK_LOOKBACK_S = 3.0


def reset_reason(text: str) -> str:
    """A reset's reason without its particulars: ``partition timeout``, ``partition
    timeout (idle stream)``, ``peer reset: <its reason>``, ``application connection
    lost``, ``protocol error``, ``server unreachable``..."""
    text = text.strip()
    if text.startswith("peer reset: "):
        return "peer reset: " + reset_reason(text[len("peer reset: ") :])
    if text.startswith("partition timeout"):
        return "partition timeout" + (" (idle stream)" if "idle stream" in text else "")
    if text.startswith("server ") and "unreachable" in text:
        return "server unreachable"
    return re.split(r"[:(]", text, maxsplit=1)[0].strip() or "unknown"


def _stamp(line: str) -> float | None:
    m = _STAMP.match(line)
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() if m else None


def _inside(line: str, start: float, end: float) -> bool:
    """A log line stamped within [start, end] (a line without a stamp: a continuation
    of one that was, kept)."""
    t = _stamp(line)
    return t is None or start <= t <= end


def log_summary(lines: list[str]) -> dict[str, Any]:
    """Freezes, resumes, mesh legs lost and resets by reason in a proxy's log lines,
    and ``frozen_s``: the seconds sessions spent frozen, from a freeze
    to the same session's resume (a freeze never resumed is not counted: the session
    ended or the window did)."""
    resets: Counter[str] = Counter()
    out = {"frozen": 0, "resumed": 0, "legs_lost": 0}
    for line in lines:
        if m := _RESET.search(line):
            resets[reset_reason(m.group(1))] += 1
        elif _FROZEN.search(line):
            out["frozen"] += 1
        elif _RESUMED.search(line):
            out["resumed"] += 1
        elif _LEG_LOST.search(line):
            out["legs_lost"] += 1
    frozen_s = sum(
        f.end - f.start for f in freeze_spans(lines) if f.end is not None and f.how == "resumed"
    )
    return {**out, "frozen_s": round(frozen_s, 3), "resets": dict(sorted(resets.items()))}


@dataclass(frozen=True, slots=True)
class FreezeSpan:
    """One freeze in a proxy's log: Unix times, the peer proxy, the link the daemon
    named (addresses), and how it ended: ``resumed``, ``reset`` or ``closed`` at
    ``end``, or ``open`` (``end`` None: still frozen when the window closed)."""

    start: float
    end: float | None
    peer: str | None
    link: tuple[str, str] | None
    how: str = "open"


def freeze_spans(lines: list[str]) -> list[FreezeSpan]:
    """The freezes in a proxy's log lines, each to the same session's resume, reset or
    clean close."""
    open_: dict[str, tuple[float, str | None, tuple[str, str] | None]] = {}
    spans: list[FreezeSpan] = []
    for line in lines:
        t = _stamp(line)
        if t is None:
            continue
        if m := _FROZEN.search(line):
            link = (m.group(3), m.group(4)) if m.group(3) else None
            open_.setdefault(m.group(1), (t, m.group(2), link))
            continue
        if m := _RESUMED.search(line):
            how = "resumed"
        elif m := _ENDED.search(line):
            how = "closed" if line.endswith(" done") else "reset"
        else:
            continue
        if m.group(1) in open_:
            t0, peer, link = open_.pop(m.group(1))
            spans.append(FreezeSpan(t0, t, peer, link, how))
    spans += [FreezeSpan(t0, None, peer, link) for t0, peer, link in open_.values()]
    return sorted(spans, key=lambda f: f.start)


def against_graph(
    spans: dict[str, list[FreezeSpan]], graph: list[dict[str, Any]], end: float
) -> dict[str, Any]:
    """Each node's freezes checked against the medium's graph (docs/elfn-bus.md).

    At the freeze: did the node and its peer have a path (``with_path`` /
    ``without_path``); was the link the daemon named still an edge (``link_gone``
    when not), and had it been one for ``LINK_LOOKBACK_S`` before as well
    (``link_in_graph``: a failure the medium's rule did not decide, fading or
    collisions) or had it left and come back in that time (``link_returned``).
    How the freezes ended (``ended``: resumed, reset, closed, open at the window's
    end), and the seconds frozen up to that end or the window's (``frozen_s_checked``),
    of which the two ends had a path (``frozen_s_with_path``). Freezes before the
    log's first line or without a peer are ``unchecked``."""
    snaps = snapshots(graph)
    walls = [w for w, _ in snaps]
    out: dict[str, Any] = {"with_path": 0, "without_path": 0, "link_in_graph": 0,
                           "link_returned": 0, "link_gone": 0, "unchecked": 0,
                           "frozen_s_checked": 0.0, "frozen_s_with_path": 0.0}  # fmt: skip
    ended: Counter[str] = Counter()
    for node, mine in spans.items():
        for f in mine:
            edges = graph_at(snaps, walls, f.start)
            if edges is None or f.peer is None:
                out["unchecked"] += 1
                continue
            ended[f.how] += 1
            peer = node_of(f.peer)
            out["with_path" if has_path(edges, node, peer) else "without_path"] += 1
            if f.link is not None:
                edge = frozenset(node_of(x) for x in f.link)
                if edge not in edges:
                    out["link_gone"] += 1
                elif edge_held(snaps, walls, edge, f.start - LINK_LOOKBACK_S, f.start):
                    out["link_in_graph"] += 1
                else:
                    out["link_returned"] += 1
            t1 = min(f.end if f.end is not None else end, end)
            out["frozen_s_checked"] += max(t1 - f.start, 0.0)
            out["frozen_s_with_path"] += seconds_with_path(snaps, walls, node, peer, f.start, t1)
    for k in ("frozen_s_checked", "frozen_s_with_path"):
        out[k] = round(out[k], 3)
    return {**out, "ended": dict(sorted(ended.items()))}


def merge(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`log_summary` of several proxies, summed."""
    out: dict[str, Any] = {"frozen": 0, "resumed": 0, "legs_lost": 0, "frozen_s": 0.0}
    resets: Counter[str] = Counter()
    for one in summaries:
        for k in out:
            out[k] += one[k]
        resets.update(one["resets"])
    out["frozen_s"] = round(out["frozen_s"], 3)
    return {**out, "resets": dict(sorted(resets.items()))}


def _log(lab: str, node: str) -> Path:
    return paths.logs_dir(lab) / f"proxy-{node}.log"  # manetkit.lab.stacks' process name


def _counters(lab: str, node: str) -> dict[str, int]:
    st = proxy_status(lab, node) or {}  # {}: no proxy answers
    return {k: int(v) for k, v in st.get("counters", {}).items() if isinstance(v, int)}


def _row_cells(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """A report row's cells: summed over its runs."""
    logs = [p.get("log", {}) for p in parts]
    return {
        "resets": sum(sum(lg.get("resets", {}).values()) for lg in logs),
        "frozen": sum(lg.get("frozen", 0) for lg in logs),
        "frozen_s": round(sum(lg.get("frozen_s", 0.0) for lg in logs), 1),
        "legs_lost": sum(lg.get("legs_lost", 0) for lg in logs),
        "false_links": sum(p.get("freezes", {}).get("link_in_graph", 0) for p in parts),
        "frozen_s_path": round(
            sum(p.get("freezes", {}).get("frozen_s_with_path", 0.0) for p in parts), 1
        ),
        "done": sum(p.get("counters", {}).get("done", 0) for p in parts),
        "peer_busy": sum(p.get("counters", {}).get("peer_busy", 0) for p in parts),
    }


class Proxy(Metric):
    name = "proxy"
    title = "What the proxies did"
    note = (
        "Summed over the nodes and the runs of a row, in the window: app connections the "
        "proxies reset and those closed cleanly, sessions frozen (route failures) and "
        "the seconds they stayed frozen; of the freezes, those whose broken link was "
        "still in the medium's graph (a false failure as the medium sees it) and the "
        "seconds frozen while the two ends had a path in it; mesh "
        "legs lost, BUSY answers taken. Each run's JSON has the resets by reason."
    )
    columns = [*HEAD_COLUMNS, ("resets", "resets", "d"), ("done", "done", "d"),
               ("frozen", "frozen", "d"), ("frozen s", "frozen_s", ".1f"),
               ("link in graph", "false_links", "d"),
               ("frozen s, path", "frozen_s_path", ".1f"),
               ("legs lost", "legs_lost", "d"),
               ("busy", "peer_busy", "d")]  # fmt: skip

    def __init__(self) -> None:
        self.c0: dict[str, dict[str, int]] = {}
        self.c1: dict[str, dict[str, int]] = {}
        self.offsets: dict[str, int] = {}
        self.lines: dict[str, list[str]] = {}
        self.opened = 0.0
        self.end = 0.0

    def before(self, ctx: RunContext) -> None:
        if ctx.proxy == "none":
            return
        self.opened = time.time()
        for n in ctx.nodes:
            self.c0[n] = _counters(ctx.lab, n)
            log = _log(ctx.lab, n)
            self.offsets[n] = log.stat().st_size if log.exists() else 0

    def closing(self, ctx: RunContext) -> None:
        if ctx.proxy != "none":
            self.c1 = {n: _counters(ctx.lab, n) for n in ctx.nodes}

    def after(self, ctx: RunContext) -> None:
        if ctx.proxy == "none":
            return
        if not self.c1:  # the closing hook did not run (a traffic that ended early)
            self.c1 = {n: _counters(ctx.lab, n) for n in ctx.nodes}
        end = self.end = ctx.window[1] if ctx.window is not None else time.time()
        for n in ctx.nodes:
            log = _log(ctx.lab, n)
            if log.exists():
                with open(log, "rb") as f:
                    f.seek(self.offsets.get(n, 0))
                    lines = f.read().decode(errors="replace").splitlines()
                self.lines[n] = [ln for ln in lines if _inside(ln, self.opened, end)]

    def result(self, ctx: RunContext, graph: list[dict[str, Any]]) -> dict[str, Any]:
        if ctx.proxy == "none":
            return {}
        delta: Counter[str] = Counter()
        for n, after in self.c1.items():
            before = self.c0.get(n, {})
            if not before or not after:
                continue  # a proxy that did not answer at one end: no change to tell
            for k, v in after.items():
                delta[k] += v - before.get(k, 0)
        return {
            "proxies": len(self.c1),
            "answered": sum(1 for n, c in self.c1.items() if c and self.c0.get(n)),
            "counters": {k: v for k, v in sorted(delta.items()) if v},
            "log": merge([log_summary(lines) for lines in self.lines.values()]),
            "freezes": against_graph(
                {n: freeze_spans(lines) for n, lines in self.lines.items()}, graph, self.end
            ),
        }

    @classmethod
    def rows(cls, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return part_rows(docs, cls.name, _row_cells)
