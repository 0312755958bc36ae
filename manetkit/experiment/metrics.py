"""What a run is scored against: the medium's ground truth and the daemons' counters.

Holland & Vaidya, section 3, eq. 3.1: with t_i the time the shortest path between sender
and receiver has i hops during the connection and T_i the TCP throughput over a static
chain of i hops (``manetkit bench chain``), the *expected throughput* is

    T_exp = sum_i t_i T_i / sum_i t_i,      T_inf = 0 (partitioned).

The t_i come from the medium's ground-truth graph log (``manetkit.lab.medium.groundtruth``,
one line per graph change, ``wall`` = Unix time), cut to the run's traffic window. A hop
count beyond the T_i table takes the table's longest chain (802.11 chains plateau from 4
hops: Holland & Vaidya Fig. 1). Measured / expected is the paper's Fig. 4 / Fig. 11 axis.

Control overhead (manetkit stacks): routing packets the daemons sent (requests, replies,
errors, hellos, forwarded control), per data packet delivered to a host (the daemons'
TUN writes), over the traffic window. The daemons count packets, not control bytes. (The
peer stacks' overhead, packets and bytes, comes from nftables counters:
``manetkit.experiment.peercount``.)

Route discovery latency (manetkit stacks): from a source's first request for a target to
the route-up that ended the discovery (DSR RFC 4728 8.2.1, AODV RFC 3561 6.3; the
engines' ``discoveries-completed`` and ``discovery-latency-ms`` counters), mean over the
discoveries completed in the window. Proactive peers have no discovery to time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from manetkit.lab.medium.groundtruth import bfs_hops

Timeline = list[tuple[float, int | None]]

# Engine counters (manetkit.daemon.engines) that count a routing packet sent or forwarded.
CONTROL_COUNTERS = (
    # DSR / SMR (RFC 4728 route request, reply, error)
    "requests-sent", "requests-forwarded", "replies-sent", "grat-replies", "cache-replies",
    "errors-sent", "control-forwarded", "ersn-sent", "smr-extra-replies",
    # AODV (RFC 3561 RREQ, RREP, RERR, RREP-ACK, HELLO)
    "rreq-sent", "rreq-forwarded", "rrep-sent", "rrep-sent-intermediate",
    "rrep-sent-gratuitous", "rrep-forwarded", "rrep-ack-sent", "rerr-sent", "hello-sent",
    # Atra's proactive/predicted errors
    "predicted-errors-sent", "proactive-errors-sent",
)  # fmt: skip


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


def ratio(measured: float | None, expected: float | None) -> float | None:
    """Measured / expected; None when either is missing or nothing was expected."""
    if measured is None or not expected:
        return None
    return round(measured / expected, 3)


# Engine counters of route discoveries a source completed, and their summed latency.
DISCOVERY_COUNTERS = ("discoveries-completed", "discovery-latency-ms")


def control_totals(statuses: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Summed over daemons (``status`` replies): routing packets sent (by counter, plus
    the shell's beacons) and data packets delivered to hosts (TUN writes); the
    discovery counters too (kept apart: :func:`control_overhead` leaves them out)."""
    total: dict[str, int] = {"beacons": 0, "delivered": 0}
    for st in statuses:
        engine = (st.get("engine") or {}).get("counters") or {}
        for k in CONTROL_COUNTERS + DISCOVERY_COUNTERS:
            v = engine.get(k)
            if isinstance(v, int):
                total[k] = total.get(k, 0) + v
        counters = st.get("counters") or {}
        total["beacons"] += int(counters.get("beacons_sent") or 0)
        total["delivered"] += int((counters.get("dataplane") or {}).get("tun_tx") or 0)
    return total


def control_overhead(before: dict[str, int], after: dict[str, int]) -> dict[str, Any]:
    """Routing packets per delivered data packet over the window between two totals."""
    diff = {k: after.get(k, 0) - before.get(k, 0) for k in after if k not in DISCOVERY_COUNTERS}
    delivered = diff.pop("delivered", 0)
    packets = sum(diff.values())
    return {
        "control_packets": packets,
        "delivered_packets": delivered,
        "per_delivered": round(packets / delivered, 4) if delivered else None,
        "by_counter": {k: v for k, v in sorted(diff.items()) if v},
    }


def discovery_latency(before: dict[str, int], after: dict[str, int]) -> dict[str, Any]:
    """Route discoveries completed over the window between two :func:`control_totals`,
    and their mean latency in seconds (None when none completed)."""
    done = after.get("discoveries-completed", 0) - before.get("discoveries-completed", 0)
    ms = after.get("discovery-latency-ms", 0) - before.get("discovery-latency-ms", 0)
    return {
        "completed": done,
        "mean_s": round(ms / done / 1000, 4) if done > 0 else None,
        "source": "engine counters discoveries-completed / discovery-latency-ms",
    }
