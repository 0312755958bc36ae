"""``proxy``: what the split-TCP proxies did in the window (docs/proxy.md, docs/elfn-bus.md).

A goodput says how much arrived, not what the proxies did for it. This plug-in records,
summed over the nodes: every proxy counter that moved in the window (sessions done and
reset, BUSY answers, mesh legs dropped, the daemon's route events), and from the
proxies' logs over the window the sessions frozen (ELFN's and BuS's route failures) and
resumed, the mesh legs lost, and every reset by its reason (a partition timeout, an idle
stream's, a reset from the peer, an application's, a server's): an app connection the
proxies reset is a run's goodput lost, and the reason is what to fix.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from manetkit import paths
from manetkit.daemon.statuscli import fetch_proxy

from .base import HEAD_COLUMNS, Metric, RunContext, part_rows

# manetkit.proxy.relay's log lines (the session id is the first 8 hex digits)
_RESET = re.compile(r"session \S+ to \S+ \(\S+\) reset: (.*)$")
_FROZEN = re.compile(r"session \S+ frozen: ")
_RESUMED = re.compile(r"session \S+ resumed \(")
_LEG_LOST = re.compile(r"session \S+: mesh leg to \S+ lost ")


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


def log_summary(lines: list[str]) -> dict[str, Any]:
    """Freezes, resumes, mesh legs lost and resets by reason in a proxy's log lines."""
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
    return {**out, "resets": dict(sorted(resets.items()))}


def _log(lab: str, node: str) -> Path:
    return paths.logs_dir(lab) / f"proxy-{node}.log"  # manetkit.lab.stacks' process name


def _counters(lab: str, node: str) -> dict[str, int]:
    st = fetch_proxy(str(paths.proxy_socket(lab, node)))
    if st is None:
        return {}
    return {k: int(v) for k, v in st.get("counters", {}).items() if isinstance(v, int)}


def _row_cells(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """A report row's cells: summed over its runs."""
    logs = [p.get("log", {}) for p in parts]
    return {
        "resets": sum(sum(lg.get("resets", {}).values()) for lg in logs),
        "frozen": sum(lg.get("frozen", 0) for lg in logs),
        "legs_lost": sum(lg.get("legs_lost", 0) for lg in logs),
        "done": sum(p.get("counters", {}).get("done", 0) for p in parts),
        "peer_busy": sum(p.get("counters", {}).get("peer_busy", 0) for p in parts),
    }


class Proxy(Metric):
    name = "proxy"
    title = "What the proxies did"
    note = (
        "Summed over the nodes and the runs of a row, in the window: app connections the "
        "proxies reset and those closed cleanly, sessions frozen (route failures), mesh "
        "legs lost, BUSY answers taken. Each run's JSON has the resets by reason."
    )
    columns = [*HEAD_COLUMNS, ("resets", "resets", "d"), ("done", "done", "d"),
               ("frozen", "frozen", "d"), ("legs lost", "legs_lost", "d"),
               ("busy", "peer_busy", "d")]  # fmt: skip

    def __init__(self) -> None:
        self.c0: dict[str, dict[str, int]] = {}
        self.c1: dict[str, dict[str, int]] = {}
        self.offsets: dict[str, int] = {}
        self.lines: list[str] = []

    def before(self, ctx: RunContext) -> None:
        if ctx.proxy == "none":
            return
        for n in ctx.nodes:
            self.c0[n] = _counters(ctx.lab, n)
            log = _log(ctx.lab, n)
            self.offsets[n] = log.stat().st_size if log.exists() else 0

    def after(self, ctx: RunContext) -> None:
        if ctx.proxy == "none":
            return
        for n in ctx.nodes:
            self.c1[n] = _counters(ctx.lab, n)
            log = _log(ctx.lab, n)
            if log.exists():
                with open(log, "rb") as f:
                    f.seek(self.offsets.get(n, 0))
                    self.lines += f.read().decode(errors="replace").splitlines()

    def result(self, ctx: RunContext, graph: list[dict[str, Any]]) -> dict[str, Any]:
        if ctx.proxy == "none":
            return {}
        delta: Counter[str] = Counter()
        for n, after in self.c1.items():
            before = self.c0.get(n, {})
            for k, v in after.items():
                delta[k] += v - before.get(k, 0)
        return {
            "proxies": len(self.c1),
            "answered": sum(1 for c in self.c1.values() if c),
            "counters": {k: v for k, v in sorted(delta.items()) if v},
            "log": log_summary(self.lines),
        }

    @classmethod
    def rows(cls, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return part_rows(docs, cls.name, _row_cells)
