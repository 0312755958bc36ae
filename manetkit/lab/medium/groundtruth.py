"""Ground truth: the connectivity graph over time, and hop counts derived from it.

The medium appends one JSON line to the lab's ground-truth log whenever the graph
changes (checked every 100 ms and after every ``move``/``link`` command):

    {"t": 12.3, "wall": 1718000000.123, "edges": [["n1", "n2"], ["n2", "n3"]]}

``t`` is seconds since the lab started, ``wall`` Unix time; an edge means the two nodes
have a link by the profile's rule (ns2: received power >= the reception threshold;
realistic profiles: a 1500-byte packet's PER at the data rate on the mean SNR at most
``usable_per``, ``channel.py``), or the link is forced up. The first line is the graph
at t = 0 and also carries ``"rule"``: that rule in words, so a reader of the log knows
what an edge meant. :func:`hop_counts` turns a log (or, for a scenario's
mobility, :func:`manetkit.lab.build.scenario_events`) into the shortest-path hop count between two nodes over time, the t_i of
Holland & Vaidya's expected-throughput formula (eq. 3.1).
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from manetkit.lab.medium.channel import LinkBudget
from manetkit.lab.medium.topology import Snapshot


def bfs_hops(edges: Iterable[tuple[str, str]] | Iterable[list[str]], a: str, b: str) -> int | None:
    """Shortest-path hop count from ``a`` to ``b`` (0 if equal), None if partitioned."""
    if a == b:
        return 0
    adj: dict[str, list[str]] = {}
    for u, v in edges:
        adj.setdefault(u, []).append(v)
        adj.setdefault(v, []).append(u)
    seen = {a}
    q = deque([(a, 0)])
    while q:
        u, d = q.popleft()
        for v in adj.get(u, ()):
            if v == b:
                return d + 1
            if v not in seen:
                seen.add(v)
                q.append((v, d + 1))
    return None


def link_rule(events: Iterable[dict[str, Any]]) -> str | None:
    """The rule a ground-truth log's edges follow (its first line's ``rule``), if any."""
    for ev in events:
        return ev.get("rule")
    return None


def snapshot_edges(snap: Snapshot | LinkBudget) -> list[list[str]]:
    return [[f"n{i + 1}", f"n{j + 1}"] for i, j in snap.edges()]


class GroundTruthLog:
    """Writes a line when the graph differs from the last one written."""

    def __init__(self, out: IO[str] | None, t0_wall: float | None = None, rule: str | None = None):
        self.out = out
        self.t0_wall = time.time() if t0_wall is None else t0_wall
        self.rule = rule
        self.last: list[list[str]] | None = None
        self.changes = 0

    def observe(self, t: float, edges: list[list[str]]) -> dict[str, Any] | None:
        if edges == self.last:
            return None
        first = self.last is None
        self.last = edges
        self.changes += 1
        event: dict[str, Any] = {
            "t": round(t, 4),
            "wall": round(self.t0_wall + t, 4),
            "edges": edges,
        }
        if first and self.rule is not None:
            event["rule"] = self.rule
        if self.out is not None:
            self.out.write(json.dumps(event, separators=(",", ":")) + "\n")
            self.out.flush()
        return event


def read_log(path: str | Path) -> list[dict[str, Any]]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def hop_counts(
    source: str | Path | Iterable[dict[str, Any]], a: str, b: str
) -> list[tuple[float, int | None]]:
    """Shortest-path hop count between ``a`` and ``b`` over time: ``[(t, hops), ...]``,
    one entry from each time it changes (None = partitioned).

    ``source`` is a ground-truth log path or an iterable of its events (for a scenario
    without a lab: :func:`manetkit.lab.build.scenario_events`).
    """
    events = read_log(source) if isinstance(source, str | Path) else source
    out: list[tuple[float, int | None]] = []
    for ev in events:
        h = bfs_hops(ev["edges"], a, b)
        if not out or out[-1][1] != h:
            out.append((float(ev["t"]), h))
    return out


def time_at_hops(counts: list[tuple[float, int | None]], end_t: float) -> dict[int | None, float]:
    """Seconds spent at each hop count up to ``end_t`` (the t_i of eq. 3.1)."""
    out: dict[int | None, float] = {}
    for k, (t, h) in enumerate(counts):
        nxt = counts[k + 1][0] if k + 1 < len(counts) else end_t
        if nxt > t:
            out[h] = out.get(h, 0.0) + min(nxt, end_t) - t
    return out
