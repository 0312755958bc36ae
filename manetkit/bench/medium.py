"""``manetkit bench medium``: how many frames per second the lab medium relays, and the
highest emulated 802.11 rate at which it keeps up with its own airtime model.

A real medium process (``python -m manetkit.lab.medium.server``) serves 10 synthetic
radios (AF_UNIX datagram sockets in this process, no namespaces). Each radio sends
1514-byte Ethernet frames (1500-byte payloads) to the next one as fast as the medium
takes them, with at most ``WINDOW`` frames outstanding, so the MAC queues stay full but
never overflow. Configurations:

- ``1 area``: the 10 nodes within 250 m of each other (one contention area), one run per
  rate (2, 11, 24, 54 Mbps);
- ``5 areas``: 5 pairs 2 km apart at 54 Mbps (five independent channels), to show the
  relay's headroom beyond one channel;
- ``1 area, capacity``: the 1-area set-up at 54 Mbps with every 802.11 duration scaled by
  ``CAPACITY_SCALE`` (the medium's hidden ``--airtime-scale``), so the airtime model no
  longer limits anything: the frames/s one contention area relays before the medium
  process (or this benchmark's clients) run out of CPU. The MAC still does all its work
  per frame (queues, backoff draws, carrier-sense freezing, deliveries).

The first rows are the honest 802.11 figures (bounded by airtime: one 54 Mbps area cannot
carry more than ~2,900 frames/s of 1514 bytes); the capacity row is the medium's own
ceiling per contention area, the figure to compare with the 4,500 frames/s goal.

"Keeps up" means: delivered frames/s >= 95% of what the same sans-I/O model delivers on
a fake clock for the same configuration (the model's own capacity, with its backoff
statistics). CPU of the medium is read from /proc/<pid>/stat over the measured interval.

With ``--oracle ns3`` the command instead runs the ns-3 reference curves the realistic
profiles are validated against (:mod:`manetkit.bench.oracle.bench`).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.table import Table

from manetkit import procs
from manetkit.bench import report
from manetkit.bench.oracle import bench as oracle
from manetkit.lab.medium import protocol as p
from manetkit.lab.medium.airtime import Airtime
from manetkit.lab.medium.control import control
from manetkit.lab.medium.mac import Delivery, Medium
from manetkit.lab.medium.mobility import Static, World

FRAME_LEN = 1514
WINDOW = 30
KEEP_UP = 0.95
GOAL_FPS_PER_AREA = 4500
CAPACITY_SCALE = 1e-6  # a 54 Mbps exchange then lasts < 1 ns: airtime is out of the way
ETHERTYPE = b"\x88\xb5"


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=float, default=3.0, help="seconds measured per run")
    parser.add_argument("--rates", default="2,11,24,54", help="rates (Mbps) for the 1-area runs")
    parser.add_argument("--nodes", type=int, default=10, help="synthetic radios (even)")
    oracle.register_options(parser)
    parser.set_defaults(func=run)


def one_area(n: int) -> tuple[list[tuple[float, float]], dict[int, int]]:
    """n nodes on a circle of radius 100 m (all within 250 m); i sends to i+1."""
    pos = [
        (100 * math.cos(2 * math.pi * k / n), 100 * math.sin(2 * math.pi * k / n)) for k in range(n)
    ]
    return pos, {i: i % n + 1 for i in range(1, n + 1)}


def pairs(n: int) -> tuple[list[tuple[float, float]], dict[int, int]]:
    """n/2 pairs, 2 km apart from each other; in each pair both nodes send to the other."""
    pos, flows = [], {}
    for k in range(n // 2):
        pos += [(2000.0 * k, 0.0), (2000.0 * k + 100, 0.0)]
        flows[2 * k + 1], flows[2 * k + 2] = 2 * k + 2, 2 * k + 1
    return pos, flows


def model_fps(pos, flows, rate: float, seconds: float = 2.0) -> float:
    """Frames/s the sans-I/O model delivers for saturated flows, on a fake clock."""
    m = Medium(World(Static(pos), len(pos)), Airtime(rate), seed=11)
    frames = {
        s: p.node_mac(d) + p.node_mac(s) + ETHERTYPE + bytes(FRAME_LEN - 14)
        for s, d in flows.items()
    }
    t, n = 0.0, 0
    while t < seconds:
        for s, f in frames.items():
            while len(m.nodes[s - 1].queue) < 10:
                m.transmit(t, s, f)
        t = m.get_timer()
        m.handle_timer(t)
        while (ev := m.next_event()) is not None:
            n += type(ev) is Delivery
    return n / seconds


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    pos, flows, rate: float, duration: float, workdir: Path, airtime_scale: float = 1.0
) -> dict:
    """Start a medium for this configuration, drive it, return the measurements."""
    n = len(pos)
    scen = workdir / f"bench-{rate:g}-{len(flows)}.yaml"
    positions = ", ".join(f"n{i + 1}: [{x:.3f}, {y:.3f}]" for i, (x, y) in enumerate(pos))
    scen.write_text(
        f"nodes: {n}\nseed: 11\nradio: {{rate_mbps: {rate:g}}}\n"
        f"mobility: {{model: static, positions: {{{positions}}}}}\n"
    )
    sock, ctl = workdir / "medium.sock", workdir / "ctl.sock"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "manetkit.lab.medium.server",
            str(scen),
            "--lab",
            "benchmed",
            "--socket",
            str(sock),
            "--control",
            str(ctl),
            "--ground-truth",
            str(workdir / "gt.jsonl"),
            "--airtime-scale",
            repr(airtime_scale),
            # normal scheduling: the capacity run saturates the medium, and this process's
            # synthetic radios must keep their share of the CPU to measure it
            "--realtime",
            "0",
        ],
    )
    radios: dict[int, socket.socket] = {}
    sel = selectors.DefaultSelector()
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(Exception):
                if control(ctl, {"cmd": "ping"}, timeout=1)["ok"]:
                    break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the medium did not start")
            time.sleep(0.05)
        for i in range(1, n + 1):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            path = workdir / f"r{i}.sock"
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            s.bind(str(path))
            s.connect(str(sock))
            s.send(p.attach(i))
            s.settimeout(5)
            if not isinstance(p.parse(s.recv(100)), p.Attached):
                raise RuntimeError(f"n{i} not attached")
            s.setblocking(False)
            radios[i] = s
            sel.register(s, selectors.EVENT_READ, i)
        frames = {
            s: p.tx(p.node_mac(d) + p.node_mac(s) + ETHERTYPE + bytes(FRAME_LEN - 14))
            for s, d in flows.items()
        }
        outstanding = dict.fromkeys(flows, 0)
        delivered = 0

        def top_up() -> None:
            for s, f in frames.items():
                sk = radios[s]
                while outstanding[s] < WINDOW:
                    try:
                        sk.send(f)
                    except (BlockingIOError, InterruptedError):
                        break
                    outstanding[s] += 1

        def pump(until: float) -> int:
            got = 0
            while time.monotonic() < until:
                top_up()
                for key, _ in sel.select(0.05):
                    sk = key.fileobj
                    while True:
                        try:
                            data = sk.recv(4096)
                        except (BlockingIOError, InterruptedError):
                            break
                        if data[0] == p.DELIVER:
                            src = p.mac_node(data[3 + 6 : 3 + 12])
                            outstanding[src] -= 1
                            got += 1
                        elif data[0] == p.TXSTATUS and not data[8]:
                            outstanding[p.mac_node(data[8 + 1 + 6 : 8 + 1 + 12])] -= 1
            return got

        pump(time.monotonic() + 0.5)  # warm-up: queues fill, caches warm
        before = control(ctl, {"cmd": "stats"})
        cpu0, bench0, t0 = cpu_seconds(proc.pid), time.process_time(), time.monotonic()
        delivered = pump(t0 + duration)
        elapsed = time.monotonic() - t0
        cpu1, bench1 = cpu_seconds(proc.pid), time.process_time()
        after = control(ctl, {"cmd": "stats"})
        fps = delivered / elapsed
        # The model's own capacity only means something at real airtime.
        model = model_fps(pos, flows, rate) if airtime_scale == 1.0 else None
        medium_cpu = (cpu1 - cpu0) / elapsed
        return {
            "rate_mbps": rate,
            "airtime_scale": airtime_scale,
            "nodes": n,
            "flows": len(flows),
            "duration_s": round(elapsed, 3),
            "frames_delivered": delivered,
            "frames_per_s": round(fps, 1),
            "model_frames_per_s": round(model, 1) if model else None,
            "ratio": round(fps / model, 4) if model else None,
            "throughput_mbps": round(fps * (FRAME_LEN - 14) * 8 / 1e6, 3),
            "medium_cpu_pct": round(100 * medium_cpu, 1),
            # frames the medium relays per second of its own CPU: its ceiling on one core
            "frames_per_medium_cpu_s": round(fps / medium_cpu, 1) if medium_cpu > 0 else None,
            "bench_cpu_pct": round(100 * (bench1 - bench0) / elapsed, 1),
            "queue_drops": after["medium"]["queue_drops"] - before["medium"]["queue_drops"],
            "send_drops": after["server"]["send_drops"] - before["server"]["send_drops"],
        }
    finally:
        for s in radios.values():
            sel.unregister(s)
            s.close()
        procs.stop(proc, grace=10)


def run(args: argparse.Namespace) -> int:
    if args.oracle:
        return oracle.run(args)
    n = args.nodes
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    results = []
    with tempfile.TemporaryDirectory(prefix="mk-bench-medium-") as tmp:
        work = Path(tmp)
        pos, flows = one_area(n)
        for rate in rates:
            results.append(
                {"config": "1 area", "areas": 1, **measure(pos, flows, rate, args.duration, work)}
            )
        pos, flows = pairs(n)
        multi = {
            "config": f"{n // 2} areas",
            "areas": n // 2,
            **measure(pos, flows, 54.0, args.duration, work),
        }
        results.append(multi)
        pos, flows = one_area(n)
        capacity = {
            "config": "capacity",
            "areas": 1,
            **measure(pos, flows, 54.0, args.duration, work, CAPACITY_SCALE),
        }
        results.append(capacity)
    kept = [
        r["rate_mbps"]
        for r in results
        if r["areas"] == 1 and r["ratio"] is not None and r["ratio"] >= KEEP_UP
    ]
    best = max(kept) if kept else None
    summary = {
        "highest_rate_kept_up_mbps": best,
        "keep_up_criterion": f"delivered >= {KEEP_UP:.0%} of the model's fake-clock frames/s",
        "relay_frames_per_s_max": max(r["frames_per_s"] for r in results),
        "per_area_frames_per_s_at_54": round(multi["frames_per_s"] / multi["areas"], 1),
        "airtime_limit_one_area_54mbps": round(1e6 / Airtime(54).mean_exchange_us(FRAME_LEN), 1),
        "goal_frames_per_s_per_area": GOAL_FPS_PER_AREA,
        # The medium's own capacity for one contention area (airtime made negligible).
        "capacity_one_area_frames_per_s": capacity["frames_per_s"],
        "capacity_one_area_medium_cpu_pct": capacity["medium_cpu_pct"],
        "capacity_one_area_bench_cpu_pct": capacity["bench_cpu_pct"],
        "capacity_one_area_frames_per_medium_cpu_s": capacity["frames_per_medium_cpu_s"],
        "capacity_meets_goal": capacity["frames_per_s"] >= GOAL_FPS_PER_AREA,
        "capacity_airtime_scale": CAPACITY_SCALE,
    }
    table = Table(title="lab medium: 10 synthetic radios, 1514-byte frames")
    for col in (
        "config",
        "rate",
        "f/s",
        "model",
        "ratio",
        "Mbit/s",
        "med CPU",
        "f/CPU-s",
        "bench",
        "drops",
    ):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(
            r["config"],
            f"{r['rate_mbps']:g}",
            f"{r['frames_per_s']:.0f}",
            "-" if r["model_frames_per_s"] is None else f"{r['model_frames_per_s']:.0f}",
            "-" if r["ratio"] is None else f"{r['ratio']:.3f}",
            f"{r['throughput_mbps']:.2f}",
            f"{r['medium_cpu_pct']:.0f}%",
            "-" if r["frames_per_medium_cpu_s"] is None else f"{r['frames_per_medium_cpu_s']:.0f}",
            f"{r['bench_cpu_pct']:.0f}%",
            str(r["queue_drops"] + r["send_drops"]),
        )
    report.show(
        table,
        "f/s: frames relayed per second; model: the airtime model's frames/s on a fake clock; "
        "med CPU: the medium's share of a core; f/CPU-s: frames per medium CPU-second; "
        "bench: the clients' CPU; capacity: one area at 54 Mbps with airtime "
        f"x{CAPACITY_SCALE:g} (the medium's own limit, not 802.11's)",
        f"highest rate kept up with (1 area): {best} Mbps; max relayed {summary['relay_frames_per_s_max']:.0f} frames/s; "
        f"one 54 Mbps area's airtime allows ~{summary['airtime_limit_one_area_54mbps']:.0f} frames/s (lone sender)",
        f"medium capacity, one contention area (airtime x{CAPACITY_SCALE:g}): "
        f"{capacity['frames_per_s']:.0f} frames/s at {capacity['medium_cpu_pct']:.0f}% of a core "
        f"(benchmark clients {capacity['bench_cpu_pct']:.0f}%); goal {GOAL_FPS_PER_AREA} frames/s: "
        f"{'met' if summary['capacity_meets_goal'] else 'NOT met'}",
    )
    report.write(args.out, "medium", {"runs": results, "summary": summary})
    return 0 if best is not None else 1
