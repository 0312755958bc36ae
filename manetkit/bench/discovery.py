"""``manetkit bench discovery``: route discovery latency over 1..8 hops, per protocol.

A lab chain of 9 nodes (configs/scenarios/chain-9.yaml) at 54 Mbit/s, the daemon in
every node. From n1, destinations n2, n3, ... n9 are pinged in that order, so each
is a fresh discovery (no earlier discovery reached that far). For h hops:

  discovery(h) = RTT of the first ping (discovery + one round trip)
                 - median RTT of the following pings (the round trip alone)

Two slopes (least squares over h) are reported:
  latency per hop   slope of discovery(h): what a user waits per hop. The request and
                    the reply cross the chain once each, so this includes one lab round
                    trip per hop (radio and medium processes, airtime).
  daemon overhead   slope of first(h) - 2 * rtt(h): discovery minus the lab's own
                    traversal (request out + reply back is one round trip, the data
                    another), i.e. what the daemons add per hop for handling control
                    packets. Goal: < 2 ms per hop.
Rebroadcast jitter (DSR's BroadcastJitter, 10 ms by default; AODV's own) is a
protocol delay, not daemon overhead: it is measured with the configured jitter
(``--jitter-ms``, default 0) and the JSON says which. Likewise the ring searches'
timeouts: ``--search flood`` (default) sends one network-wide request; ``--search
rings`` keeps DSR's ring-0 request and AODV's expanding ring (their full latency).
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from rich.table import Table

from manetkit import paths
from manetkit.bench import report
from manetkit.lab.scenario import SHIPPED_SCENARIOS

GOAL_MS_PER_HOP = 2.0
REPO_SCENARIOS = SHIPPED_SCENARIOS


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--protocols", default="aodv,dsr", help="comma-separated")
    parser.add_argument("--hops", type=int, default=8, help="longest chain (1..8)")
    parser.add_argument("--rate", type=float, default=54, help="lab radio rate, Mbit/s")
    parser.add_argument(
        "--jitter-ms", type=float, default=0.0, help="rebroadcast jitter given to the engines"
    )
    parser.add_argument(
        "--search",
        choices=["flood", "rings"],
        default="flood",
        help="flood: one network-wide request (per-hop cost); rings: the protocols' ring searches",
    )
    parser.add_argument("--scenario", default=str(REPO_SCENARIOS / "chain-9.yaml"))
    parser.set_defaults(func=run)


def _mk(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "manetkit.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _ping_rtts(lab: str, dst: str, count: int) -> list[float | None]:
    """RTTs in ms of ``count`` pings 50 ms apart (None for a lost one)."""
    out = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            paths.netns_name(lab, "n1"),
            "ping",
            "-n",
            "-c",
            str(count),
            "-i",
            "0.05",
            "-W",
            "5",
            dst,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    rtts: dict[int, float] = {}
    for line in out.splitlines():
        if "icmp_seq=" in line and "time=" in line:
            seq = int(line.split("icmp_seq=")[1].split()[0])
            rtts[seq] = float(line.split("time=")[1].split()[0])
    return [rtts.get(i) for i in range(1, count + 1)]


# One network-wide request instead of the ring searches, whose timeouts are protocol
# constants (DSR's 30 ms ring-0 wait; AODV's RING_TRAVERSAL_TIME per ring), not daemon
# overhead. ``--search rings`` keeps the protocols' defaults.
FLOOD = {
    "aodv": {"ttl_start": 35, "ttl_threshold": 35},
    "dsr": {"nonprop_request_timeout_ms": 0.1},
}


def _engine_options(protocol: str, jitter_ms: float, search: str) -> dict[str, Any]:
    """Protocol section: rebroadcast jitter, and the search strategy."""
    mod = importlib.import_module(f"manetkit.daemon.engines.{protocol}")
    cls = getattr(mod, f"{protocol.capitalize()}Config")
    fields = set(getattr(cls, "model_fields", {}))
    section: dict[str, Any] = {f: jitter_ms for f in fields if "jitter" in f and f.endswith("_ms")}
    if search == "flood":
        section.update({k: v for k, v in FLOOD.get(protocol, {}).items() if k in fields})
    return {protocol: section} if section else {}


def measure(protocol: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    lab = f"bd{protocol[0]}{os.getpid() % 10000}"
    extra = tmp / f"{protocol}.yaml"
    options = _engine_options(protocol, args.jitter_ms, args.search)
    extra.write_text(yaml.safe_dump(options))
    up = _mk(
        "lab",
        "up",
        args.scenario,
        "--name",
        lab,
        "--stack",
        protocol,
        "--set",
        f"radio.rate_mbps={args.rate}",
        "--daemon-config",
        str(extra),
    )
    if up.returncode != 0:
        raise RuntimeError(f"lab up failed: {up.stderr.strip()}")
    rows = []
    try:
        time.sleep(2.0)  # let every node's link sensing see its neighbours first
        for h in range(1, args.hops + 1):
            dst = f"10.42.0.{h + 1}"
            rtts = _ping_rtts(lab, dst, 11)
            first, rest = rtts[0], [r for r in rtts[1:] if r is not None]
            if first is None or not rest:
                rows.append(
                    {
                        "hops": h,
                        "first_ms": first,
                        "rtt_ms": None,
                        "discovery_ms": None,
                        "overhead_ms": None,
                    }
                )
                continue
            rtt = statistics.median(rest)
            rows.append(
                {
                    "hops": h,
                    "first_ms": first,
                    "rtt_ms": rtt,
                    "discovery_ms": first - rtt,
                    "overhead_ms": first - 2 * rtt,
                }
            )
    finally:
        _mk("lab", "down", "--name", lab)
    return {
        "protocol": protocol,
        "engine_options": options,
        "rows": rows,
        "ms_per_hop": _slope(rows, "discovery_ms"),
        "overhead_ms_per_hop": _slope(rows, "overhead_ms"),
    }


def _slope(rows: list[dict[str, Any]], key: str) -> float | None:
    pts = [(r["hops"], r[key]) for r in rows if r[key] is not None]
    if len(pts) < 2:
        return None
    return statistics.linear_regression([p[0] for p in pts], [p[1] for p in pts])[0]


def run(args: argparse.Namespace) -> int:
    results = []
    with tempfile.TemporaryDirectory(prefix="mk-bench-disc-") as tmp:
        for proto in [p.strip() for p in args.protocols.split(",") if p.strip()]:
            results.append(measure(proto, args, Path(tmp)))
    for res in results:
        t = Table(title=f"{res['protocol']}: route discovery over a {args.rate:g} Mbit/s chain")
        for col in ("hops", "first ping ms", "round trip ms", "discovery ms", "daemon overhead ms"):
            t.add_column(col, justify="right")
        for r in res["rows"]:
            t.add_row(
                str(r["hops"]),
                *(
                    "lost" if v is None else f"{v:.2f}"
                    for v in (r["first_ms"], r["rtt_ms"], r["discovery_ms"], r["overhead_ms"])
                ),
            )
        lat, ovh = res["ms_per_hop"], res["overhead_ms_per_hop"]
        met = ovh is not None and ovh < GOAL_MS_PER_HOP
        report.show(
            t,
            f"{res['protocol']}: discovery latency "
            f"{'-' if lat is None else f'{lat:.2f}'} ms per hop; daemon overhead "
            f"{'-' if ovh is None else f'{ovh:.2f}'} ms per hop "
            f"(goal < {GOAL_MS_PER_HOP} ms): {'met' if met else 'NOT met'}",
        )
        res["goal_met"] = met
    doc = {
        "bench": "discovery",
        "time": time.time(),
        "rate_mbps": args.rate,
        "jitter_ms": args.jitter_ms,
        "search": args.search,
        "goal_ms_per_hop": GOAL_MS_PER_HOP,
        "results": results,
    }
    report.write(args.out, "discovery", doc)
    return 0
