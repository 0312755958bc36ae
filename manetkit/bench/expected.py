"""Expected throughput (Holland & Vaidya, section 3, eq. 3.1) from the medium's ground truth.

With t_i the time the shortest path between sender and receiver has i hops during the
connection and T_i the TCP throughput over a static chain of i hops (``manetkit bench
chain``), the *expected throughput* is

    T_exp = sum_i t_i T_i / sum_i t_i,      T_inf = 0 (partitioned).

It is what TCP could carry if routing always used the current shortest path and lost
nothing to breaks: the ceiling a routing or transport variant can approach, not pass
(except by a few per cent of noise: T_i is itself one measurement). Measured / expected
is the paper's Fig. 4 / Fig. 11 axis.

The t_i come from the medium's ground-truth graph log (``manetkit.lab.medium.groundtruth``,
one line per graph change, ``wall`` = Unix time), cut to the run's traffic window. A hop
count beyond the T_i table takes the table's longest chain (802.11 chains plateau from 4
hops: Holland & Vaidya Fig. 1).

The graph and the table must follow the same physics: on the ns2 profile an edge is a
pair within 250 m and T_i a 200 m chain; on a realistic profile an edge is a link whose
1500-byte PER at the data rate is at most ``usable_per`` on its mean SNR (the log's
first line states the rule) and T_i must be measured on that profile (``manetkit bench
chain --set radio.profile=outdoor``: hops at 60 % of the usable distance). A bench chain
JSON records its profile; :func:`expected_for_pair` refuses a table of another profile
than the log's (``table_profile``), since measured / expected would then compare a run
with a ceiling from another world.

One call per flow::

    from manetkit.bench import expected
    gt = expected.expected_for_pair(graph_log, "n3", "n17", w0, w1, DEFAULT_CHAIN_KBPS)
    gt["expected_kbps"], gt["hops_s"], gt["partition_s"]

``manetkit experiment`` scores its runs with the same functions (re-exported by
``manetkit.experiment.metrics``), T_i from the spec's ``expected:``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from manetkit.errors import UserError
from manetkit.lab.medium.groundtruth import bfs_hops, link_rule, read_log

Timeline = list[tuple[float, int | None]]

# T_i in kbit/s: `manetkit bench chain --max-hops 6 --duration 10` on the lab's 2 Mbit/s
# 802.11 with RTS/CTS (README bench table: T_1 1.366 Mbit/s; T_i/T_1 = 1, 0.50, 0.34,
# 0.31, 0.29, 0.28), as the experiment specs' ``expected.table_kbps`` give it.
DEFAULT_CHAIN_KBPS: dict[int, float] = {1: 1366, 2: 683, 3: 464, 4: 423, 5: 396, 6: 382}


def hop_timeline(events: Iterable[dict[str, Any]], a: str, b: str) -> Timeline:
    """``[(wall, hops), ...]`` from a ground-truth log: one entry per change of the
    shortest-path hop count between ``a`` and ``b`` (None = partitioned)."""
    out: Timeline = []
    for ev in events:
        h = bfs_hops(ev["edges"], a, b)
        if not out or out[-1][1] != h:
            out.append((float(ev["wall"]), h))
    return out


def time_at_hops(timeline: Timeline, start: float, end: float) -> dict[int | None, float]:
    """Seconds spent at each hop count within ``[start, end]`` (the t_i of eq. 3.1).

    Before the timeline's first entry nothing is known and nothing is counted."""
    out: dict[int | None, float] = {}
    for k, (t, h) in enumerate(timeline):
        nxt = timeline[k + 1][0] if k + 1 < len(timeline) else end
        lo, hi = max(t, start), min(nxt, end)
        if hi > lo:
            out[h] = out.get(h, 0.0) + hi - lo
    return out


def chain_throughput(table: dict[int, float], hops: int) -> float:
    """T_i for ``hops``; beyond the table, its longest chain's (the plateau)."""
    if hops in table:
        return table[hops]
    longest = max(table)
    if hops > longest:
        return table[longest]
    raise ValueError(f"no T_i for {hops} hops (table has {sorted(table)})")


def expected_throughput(t_at: dict[int | None, float], table: dict[int, float]) -> float | None:
    """Eq. 3.1: sum t_i T_i / sum t_i, T_inf = 0; None when no time was observed."""
    total = sum(t_at.values())
    if total <= 0:
        return None
    acc = sum(t * chain_throughput(table, h) for h, t in t_at.items() if h is not None)
    return acc / total


def pair_metrics(
    events: list[dict[str, Any]],
    a: str,
    b: str,
    start: float,
    end: float,
    table: dict[int, float] | None,
) -> dict[str, Any]:
    """Ground truth for one pair over ``[start, end]``: seconds at each hop count (key
    ``"inf"`` for partitioned), partition time, time-weighted mean hops, T_exp (kbit/s)."""
    t_at = time_at_hops(hop_timeline(events, a, b), start, end)
    connected = {h: t for h, t in t_at.items() if h is not None}
    up = sum(connected.values())
    return {
        "hops_s": {("inf" if h is None else str(h)): round(t, 3) for h, t in sorted(
            t_at.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))},
        "partition_s": round(t_at.get(None, 0.0), 3),
        "mean_hops": round(sum(h * t for h, t in connected.items()) / up, 2) if up else None,
        "expected_kbps": (
            None if table is None or (e := expected_throughput(t_at, table)) is None
            else round(e, 1)
        ),
    }  # fmt: skip


def log_profile(events: list[dict[str, Any]]) -> str | None:
    """The profile whose link rule a ground-truth log follows (its first word), if stated."""
    rule = link_rule(events)
    return rule.split()[0] if rule else None


def check_profiles(events: list[dict[str, Any]], table_profile: str | None) -> None:
    """Refuse T_i measured on another profile than the ground truth's (module doc)."""
    graph = log_profile(events)
    if graph is not None and table_profile is not None and graph != table_profile:
        raise UserError(
            f"the ground truth follows the {graph} profile's link rule but the chain table "
            f"was measured on {table_profile}: measure T_i on the same profile "
            f"(manetkit bench chain --set radio.profile={graph})"
        )


def expected_for_pair(
    graph_log: str | Path | list[dict[str, Any]],
    src: str,
    dst: str,
    start_wall: float,
    end_wall: float,
    table: dict[int, float] | None = None,
    table_profile: str | None = None,
) -> dict[str, Any]:
    """Eq. 3.1 for one flow ``src`` -> ``dst`` (node names, ``"n3"``) over the window
    ``[start_wall, end_wall]`` (Unix time), from a ground-truth log (its path, or its
    events as :func:`manetkit.lab.medium.groundtruth.read_log` returns them) and T_i
    (kbit/s by hop count; default :data:`DEFAULT_CHAIN_KBPS`, measured on the ns2
    profile), ``table_profile`` the profile T_i was measured on (checked against the
    log's rule when both are known).

    Returns :func:`pair_metrics`' dict: ``expected_kbps`` (None for an empty log),
    ``hops_s`` (seconds at each hop count, ``"inf"`` = partitioned), ``partition_s``,
    ``mean_hops``; plus ``covered_s``, the seconds of the window the log covers."""
    events = read_log(graph_log) if isinstance(graph_log, str | Path) else graph_log
    check_profiles(events, table_profile if table else "ns2")
    got = pair_metrics(events, src, dst, start_wall, end_wall, table or DEFAULT_CHAIN_KBPS)
    got["covered_s"] = round(sum(got["hops_s"].values()), 3)
    return got


def ratio(measured: float | None, expected: float | None) -> float | None:
    """Measured / expected; None when either is missing or nothing was expected."""
    if measured is None or not expected:
        return None
    return round(measured / expected, 3)


def chain_table(path: str | Path) -> dict[int, float]:
    """T_i in kbit/s from a ``manetkit bench chain`` JSON (``hops``, ``throughput_bps``)."""
    try:
        doc = json.loads(Path(path).read_text())
        return {
            int(h): float(b) / 1000 for h, b in zip(doc["hops"], doc["throughput_bps"], strict=True)
        }
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path}: not a bench chain result ({exc})") from None


def chain_table_profile(path: str | Path) -> str:
    """The radio profile a ``manetkit bench chain`` JSON was measured on (ns2 before the
    realistic profiles existed)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: not a bench chain result ({exc})") from None
    return str(doc.get("profile") or (doc.get("radio") or {}).get("profile") or "ns2")
