"""``manetkit bench daemon``: the daemon's CPU and memory, idle and while forwarding 2 Mbit/s.

Three namespaces A, B, C on veth (``VethMesh``, no medium), a daemon in each (static
routes A -> B -> C, hello link sensing so the idle figure includes the beacons). B's
process is measured from /proc: CPU = (utime + stime) over the window / window, RSS =
VmRSS at the end.
  idle        nothing but beacons for ``--seconds``
  forwarding  iperf3 UDP A -> C at 2 Mbit/s through B (1470-byte datagrams, the
              papers' 802.11 rate) for ``--seconds``
Goals (the routing daemon's targets): idle < 1 % CPU and < 60 MB RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from manetkit.bench import report
from manetkit.bench.vethlab import VethMesh
from manetkit.procs import wait_for

GOAL_IDLE_CPU_PCT = 1.0
GOAL_RSS_MB = 60.0
_TICK = os.sysconf("SC_CLK_TCK")


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each window")
    parser.add_argument("--rate", default="2M", help="forwarded load (iperf3 -b)")
    parser.set_defaults(func=run)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def window(pid: int, seconds: float) -> dict[str, float]:
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)  # the measurement window itself
    c1, t1 = cpu_seconds(pid), time.monotonic()
    return {"cpu_pct": 100 * (c1 - c0) / (t1 - t0), "rss_mb": rss_mb(pid)}


def measure(seconds: float, rate: str, workdir: Path) -> dict[str, Any]:
    with VethMesh(f"mkbd{os.getpid() % 10000}", 3, workdir) as mesh:
        routes = {1: {"10.42.0.3": "10.42.0.2"}, 2: {}, 3: {"10.42.0.1": "10.42.0.2"}}
        for i in (1, 2, 3):
            mesh.start(
                i,
                static_routes=routes[i],
                log_level="warning",
                link_sensing={"backend": "hello", "hello": {"interval_s": 1.0}},
            )
        for i, want in ((1, {"10.42.0.2"}), (2, {"10.42.0.1", "10.42.0.3"}), (3, {"10.42.0.2"})):
            wait_for(lambda i=i, want=want: mesh.neighbours_up(i, want), 10, f"n{i} neighbours")
        pid = mesh.procs[2].pid
        idle = window(pid, seconds)
        mesh.run(3, "iperf3", "-s", "-1", "-D", "-B", "10.42.0.3")
        wait_for(lambda: ":5201" in mesh.run(3, "ss", "-ltn").stdout, 5, "iperf3 server")
        client = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                mesh.ns(1),
                "iperf3",
                "-c",
                "10.42.0.3",
                "-u",
                "-b",
                rate,
                "-l",
                "1470",
                "-t",
                str(seconds + 2),
                "-J",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.0)  # past iperf3's start-up
        busy = window(pid, seconds)
        out, _ = client.communicate(timeout=seconds + 30)
        rx = json.loads(out)["end"]["sum"]
        fwd = mesh.status(2).engine.counters.get("forwarded", 0)
    return {
        "idle": idle,
        "forwarding": busy,
        "forwarded_mbps": rx.get("bits_per_second", 0) / 1e6,
        "lost_percent": rx.get("lost_percent"),
        "forwarded_packets_total": fwd,
    }


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="mk-bench-daemon-") as tmp:
        r = measure(args.seconds, args.rate, Path(tmp))
    t = Table(title="forwarding daemon (node B): CPU and memory")
    for col in ("state", "CPU %", "RSS MB", "goal"):
        t.add_column(col, justify="right" if col != "state" else "left")
    ok_idle = r["idle"]["cpu_pct"] < GOAL_IDLE_CPU_PCT and r["idle"]["rss_mb"] < GOAL_RSS_MB
    t.add_row(
        "idle (beacons only)",
        f"{r['idle']['cpu_pct']:.2f}",
        f"{r['idle']['rss_mb']:.1f}",
        f"< {GOAL_IDLE_CPU_PCT} %, < {GOAL_RSS_MB:.0f} MB: {'met' if ok_idle else 'NOT met'}",
    )
    t.add_row(
        f"forwarding {r['forwarded_mbps']:.2f} Mbit/s UDP",
        f"{r['forwarding']['cpu_pct']:.2f}",
        f"{r['forwarding']['rss_mb']:.1f}",
        f"loss {r['lost_percent']:.2f} %" if r["lost_percent"] is not None else "",
    )
    report.show(t)
    doc = {
        "bench": "daemon",
        "time": time.time(),
        "seconds": args.seconds,
        "rate": args.rate,
        **r,
        "goal_idle_cpu_pct": GOAL_IDLE_CPU_PCT,
        "goal_rss_mb": GOAL_RSS_MB,
        "goals_met": ok_idle,
    }
    report.write(args.out, "daemon", doc)
    return 0
