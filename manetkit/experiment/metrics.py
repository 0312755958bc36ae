"""What a run is scored against: the medium's ground truth and the daemons' counters.

Expected throughput: Holland & Vaidya's eq. 3.1 (time-weighted T_i of the shortest path's
hop count, from the medium's ground-truth graph log, partitions at 0), implemented in
``manetkit.bench.expected`` (the benches use it too) and re-exported here. Measured /
expected is the paper's Fig. 4 / Fig. 11 axis. The graph's edges follow the radio
profile's own notion of a usable link (the log's first line states it: ns2, within
250 m; realistic profiles, a 1500-byte PER at the data rate at most ``usable_per`` on
the mean SNR), and the T_i table must come from a chain on the same profile:
``check_profiles`` refuses a mix.

Control overhead (manetkit stacks): routing packets the daemons sent (requests, replies,
errors, hellos, forwarded control), per data packet delivered to a host (the daemons'
TUN writes), over the traffic window; and the control bytes the daemon shell put on the
air (``counters.shell.control-tx-bytes``). (The peer stacks' overhead, packets and bytes,
comes from nftables counters: ``manetkit.experiment.peercount``.)

Route discovery latency (manetkit stacks): from a source's first request for a target to
the route-up that ended the discovery (DSR RFC 4728 8.2.1, AODV RFC 3561 6.3; the
engines' ``discoveries-completed`` and ``discovery-latency-ms`` counters), mean over the
discoveries completed in the window. Proactive peers have no discovery to time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Eq. 3.1 lives with the benches (manetkit.bench.expected: the one copy); the
# experiment runner uses it from here.
from manetkit.bench.expected import Timeline as Timeline
from manetkit.bench.expected import chain_throughput as chain_throughput
from manetkit.bench.expected import check_profiles as check_profiles
from manetkit.bench.expected import expected_throughput as expected_throughput
from manetkit.bench.expected import hop_timeline as hop_timeline
from manetkit.bench.expected import log_profile as log_profile
from manetkit.bench.expected import pair_metrics as pair_metrics
from manetkit.bench.expected import ratio as ratio
from manetkit.bench.expected import time_at_hops as time_at_hops
from manetkit.daemon.engines.base import CONTROL_COUNTERS as CONTROL_COUNTERS

# Engine counters of route discoveries a source completed, and their summed latency.
DISCOVERY_COUNTERS = ("discoveries-completed", "discovery-latency-ms")


def control_totals(statuses: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Summed over daemons (``status`` replies): routing packets sent (by counter, plus
    the shell's beacons), the bytes of those packets as the shell put them on the air
    (``control_bytes``: IP packet bytes, as the peers' nftables counters count them) and
    data packets delivered to hosts (TUN writes); the discovery counters too (kept
    apart: :func:`control_overhead` leaves them out)."""
    total: dict[str, int] = {"beacons": 0, "delivered": 0, "control_bytes": 0}
    for st in statuses:
        engine = (st.get("engine") or {}).get("counters") or {}
        for k in CONTROL_COUNTERS + DISCOVERY_COUNTERS:
            v = engine.get(k)
            if isinstance(v, int):
                total[k] = total.get(k, 0) + v
        counters = st.get("counters") or {}
        total["beacons"] += int(counters.get("beacons_sent") or 0)
        total["control_bytes"] += int((counters.get("shell") or {}).get("control-tx-bytes") or 0)
        total["delivered"] += int((counters.get("dataplane") or {}).get("tun_tx") or 0)
    return total


def control_overhead(before: dict[str, int], after: dict[str, int]) -> dict[str, Any]:
    """Routing packets (and bytes) per delivered data packet over the window between
    two totals."""
    diff = {k: after.get(k, 0) - before.get(k, 0) for k in after if k not in DISCOVERY_COUNTERS}
    delivered = diff.pop("delivered", 0)
    control_bytes = diff.pop("control_bytes", 0)
    packets = sum(diff.values())
    return {
        "control_packets": packets,
        "control_bytes": control_bytes,
        "delivered_packets": delivered,
        "per_delivered": round(packets / delivered, 4) if delivered else None,
        "bytes_per_delivered": round(control_bytes / delivered, 1) if delivered else None,
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
