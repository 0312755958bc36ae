"""``manetkit bench medium``: how many frames per second the lab medium relays, and the
highest emulated 802.11 rate at which it keeps up with its own airtime model, for each
radio profile side by side (``--compare ns2,outdoor``: the ns2 two-ray MAC and the
realistic SINR MAC, docs/medium.md).

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
statistics). CPU of the medium is read from /proc/<pid>/stat over the measured interval;
its cost per delivered frame is the medium's CPU time over the frames delivered
(``us_per_frame``), and the summary compares the profiles on it.

The realistic profile runs the same configurations with the nodes closer (a 10 m
circle, pairs 10 m apart): at 54 Mbit/s its links reach about 40 m, where ns-2's reach
250 m. Its MAC decides every frame on SINR, sends an ACK as a frame of its own and lets
same-slot contenders collide, so with ten saturated senders in one area a delivered
frame costs about 1.7 attempts and 2.7 transmissions where the ns2 MAC spends one
exchange (the tie always goes to one sender there).

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
import tempfile
import time
from pathlib import Path

import yaml
from rich.table import Table

from manetkit import procs
from manetkit.bench import report
from manetkit.bench.oracle import bench as oracle
from manetkit.errors import UserError
from manetkit.lab.build import medium_from_scenario
from manetkit.lab.medium import protocol as p
from manetkit.lab.medium.airtime import Airtime
from manetkit.lab.medium.control import control
from manetkit.lab.medium.mac import Delivery
from manetkit.lab.medium.server import standalone_argv
from manetkit.lab.scenario import scenario_from_dict

FRAME_LEN = 1514
WINDOW = 30
KEEP_UP = 0.95
GOAL_FPS_PER_AREA = 4500
CAPACITY_SCALE = 1e-6  # a 54 Mbps exchange then lasts < 1 ns: airtime is out of the way
ETHERTYPE = b"\x88\xb5"
PROFILES = ("ns2", "outdoor", "indoor")
# Node spacing per profile: one contention area's radius and a pair's distance (metres).
SPACING = {"ns2": 100.0, "outdoor": 10.0, "indoor": 5.0}
GOAL_COST_RATIO = 2.0  # the realistic profile's cost per delivered frame vs ns2's


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=float, default=3.0, help="seconds measured per run")
    parser.add_argument("--rates", default="2,11,24,54", help="rates (Mbps) for the 1-area runs")
    parser.add_argument("--nodes", type=int, default=10, help="synthetic radios (even)")
    parser.add_argument(
        "--compare",
        default="ns2,outdoor",
        metavar="PROFILES",
        help="radio profiles measured side by side (ns2, outdoor, indoor; default ns2,outdoor)",
    )
    oracle.register_options(parser)
    parser.set_defaults(func=run)


def one_area(n: int, radius: float = 100.0) -> tuple[list[tuple[float, float]], dict[int, int]]:
    """n nodes on a circle of ``radius`` (all in range of each other); i sends to i+1."""
    pos = [
        (radius * math.cos(2 * math.pi * k / n), radius * math.sin(2 * math.pi * k / n))
        for k in range(n)
    ]
    return pos, {i: i % n + 1 for i in range(1, n + 1)}


def pairs(n: int, spacing: float = 100.0) -> tuple[list[tuple[float, float]], dict[int, int]]:
    """n/2 pairs, 2 km apart from each other; in each pair both nodes send to the other."""
    pos, flows = [], {}
    for k in range(n // 2):
        pos += [(2000.0 * k, 0.0), (2000.0 * k + spacing, 0.0)]
        flows[2 * k + 1], flows[2 * k + 2] = 2 * k + 2, 2 * k + 1
    return pos, flows


def scenario_data(pos, rate: float, profile: str = "ns2") -> dict:
    """The bench's scenario: static ``pos``, ``rate``, the profile (seed 11)."""
    radio: dict = {"rate_mbps": rate}
    if profile != "ns2":
        radio["profile"] = profile
    return {
        "nodes": len(pos),
        "seed": 11,
        "radio": radio,
        "mobility": {
            "model": "static",
            "positions": {f"n{i + 1}": [round(x, 3), round(y, 3)] for i, (x, y) in enumerate(pos)},
        },
    }


def model_fps(
    pos, flows, rate: float, seconds: float = 2.0, profile: str = "ns2", airtime_scale: float = 1.0
) -> tuple[float, float]:
    """Frames/s the sans-I/O model delivers for saturated flows on a fake clock, and its
    CPU time per delivered frame in microseconds (this process, no sockets)."""
    m = medium_from_scenario(
        scenario_from_dict(scenario_data(pos, rate, profile)), airtime_scale=airtime_scale
    )
    frames = {
        s: p.node_mac(d) + p.node_mac(s) + ETHERTYPE + bytes(FRAME_LEN - 14)
        for s, d in flows.items()
    }
    t, n = 0.0, 0
    horizon = seconds * airtime_scale
    cpu0 = time.process_time()
    while t < horizon:
        for s, f in frames.items():
            while m.queue_length(s) < 10:
                m.transmit(t, s, f)
        t = m.get_timer()
        m.handle_timer(t)
        while (ev := m.next_event()) is not None:
            n += type(ev) is Delivery
    cpu = time.process_time() - cpu0
    return n / horizon, (1e6 * cpu / n if n else math.inf)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    pos,
    flows,
    rate: float,
    duration: float,
    workdir: Path,
    airtime_scale: float = 1.0,
    profile: str = "ns2",
) -> dict:
    """Start a medium for this configuration, drive it, return the measurements."""
    n = len(pos)
    scen = workdir / f"bench-{profile}-{rate:g}-{len(flows)}.yaml"
    scen.write_text(yaml.safe_dump(scenario_data(pos, rate, profile)))
    sock, ctl = workdir / "medium.sock", workdir / "ctl.sock"
    proc = subprocess.Popen(
        [
            *standalone_argv(
                scen, lab="benchmed", socket=sock, control=ctl, ground_truth=workdir / "gt.jsonl"
            ),
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
        model = model_fps(pos, flows, rate, profile=profile)[0] if airtime_scale == 1.0 else None
        medium_cpu = (cpu1 - cpu0) / elapsed
        return {
            "profile": profile,
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
            # the medium's CPU time per delivered frame, microseconds
            "us_per_frame": round(1e6 * medium_cpu / fps, 2) if fps > 0 else None,
            "bench_cpu_pct": round(100 * (bench1 - bench0) / elapsed, 1),
            "queue_drops": after["medium"]["queue_drops"] - before["medium"]["queue_drops"],
            "send_drops": after["server"]["send_drops"] - before["server"]["send_drops"],
        }
    finally:
        for s in radios.values():
            sel.unregister(s)
            s.close()
        procs.stop(proc, grace=10)


def parse_profiles(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in PROFILES]
    if bad or not names:
        raise UserError(f"--compare {text!r}: choose from {', '.join(PROFILES)}")
    return names


def measure_profile(profile: str, args: argparse.Namespace, rates: list[float], work: Path):
    """The rows of one profile: 1 area at each rate, n/2 areas at 54, the capacity row."""
    n, spacing = args.nodes, SPACING[profile]
    rows = []
    pos, flows = one_area(n, spacing)
    for rate in rates:
        rows.append(
            {
                "config": "1 area",
                "areas": 1,
                **measure(pos, flows, rate, args.duration, work, profile=profile),
            }
        )
    pos, flows = pairs(n, spacing)
    rows.append(
        {
            "config": f"{n // 2} areas",
            "areas": n // 2,
            **measure(pos, flows, 54.0, args.duration, work, profile=profile),
        }
    )
    pos, flows = one_area(n, spacing)
    rows.append(
        {
            "config": "capacity",
            "areas": 1,
            **measure(pos, flows, 54.0, args.duration, work, CAPACITY_SCALE, profile),
        }
    )
    # The MAC alone on a fake clock (no sockets): its CPU per delivered frame.
    rows[-1]["model_us_per_frame"] = round(
        model_fps(pos, flows, 54.0, seconds=0.5, profile=profile, airtime_scale=CAPACITY_SCALE)[1],
        2,
    )
    return rows


def profile_summary(rows: list[dict]) -> dict:
    multi = next(r for r in rows if r["config"].endswith("areas"))
    capacity = next(r for r in rows if r["config"] == "capacity")
    kept = [
        r["rate_mbps"]
        for r in rows
        if r["areas"] == 1 and r["ratio"] is not None and r["ratio"] >= KEEP_UP
    ]
    return {
        "highest_rate_kept_up_mbps": max(kept) if kept else None,
        "relay_frames_per_s_max": max(r["frames_per_s"] for r in rows),
        "per_area_frames_per_s_at_54": round(multi["frames_per_s"] / multi["areas"], 1),
        "capacity_one_area_frames_per_s": capacity["frames_per_s"],
        "capacity_one_area_medium_cpu_pct": capacity["medium_cpu_pct"],
        "capacity_one_area_bench_cpu_pct": capacity["bench_cpu_pct"],
        "capacity_one_area_frames_per_medium_cpu_s": capacity["frames_per_medium_cpu_s"],
        "capacity_us_per_frame": capacity["us_per_frame"],
        "capacity_model_us_per_frame": capacity["model_us_per_frame"],
        "capacity_meets_goal": capacity["frames_per_s"] >= GOAL_FPS_PER_AREA,
    }


def run(args: argparse.Namespace) -> int:
    if args.oracle:
        from manetkit.bench.mediumcurves import medium_curve_set

        return oracle.run(args, beside={"lab medium": medium_curve_set})
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    profiles = parse_profiles(args.compare)
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="mk-bench-medium-") as tmp:
        for profile in profiles:
            results += measure_profile(profile, args, rates, Path(tmp))
    per_profile = {
        pr: profile_summary([r for r in results if r["profile"] == pr]) for pr in profiles
    }
    first = per_profile[profiles[0]]
    summary: dict = {
        **first,  # the first profile's figures at the top level, as before
        "keep_up_criterion": f"delivered >= {KEEP_UP:.0%} of the model's fake-clock frames/s",
        "airtime_limit_one_area_54mbps": round(1e6 / Airtime(54).mean_exchange_us(FRAME_LEN), 1),
        "goal_frames_per_s_per_area": GOAL_FPS_PER_AREA,
        "capacity_airtime_scale": CAPACITY_SCALE,
        "profiles": per_profile,
    }
    if "ns2" in per_profile:
        base = per_profile["ns2"]
        for pr, sm in per_profile.items():
            if pr == "ns2":
                continue
            ratio = (
                sm["capacity_us_per_frame"] / base["capacity_us_per_frame"]
                if sm["capacity_us_per_frame"] and base["capacity_us_per_frame"]
                else None
            )
            model_ratio = sm["capacity_model_us_per_frame"] / base["capacity_model_us_per_frame"]
            sm["cost_per_frame_vs_ns2"] = round(ratio, 2) if ratio else None
            sm["mac_cost_per_frame_vs_ns2"] = round(model_ratio, 2)
            sm["cost_goal_met"] = ratio is not None and ratio <= GOAL_COST_RATIO
    table = Table(title=f"lab medium: {args.nodes} synthetic radios, 1514-byte frames")
    for col in (
        "profile",
        "config",
        "rate",
        "f/s",
        "model",
        "ratio",
        "Mbit/s",
        "med CPU",
        "us/frame",
        "f/CPU-s",
        "bench",
        "drops",
    ):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(
            r["profile"],
            r["config"],
            f"{r['rate_mbps']:g}",
            f"{r['frames_per_s']:.0f}",
            "-" if r["model_frames_per_s"] is None else f"{r['model_frames_per_s']:.0f}",
            "-" if r["ratio"] is None else f"{r['ratio']:.3f}",
            f"{r['throughput_mbps']:.2f}",
            f"{r['medium_cpu_pct']:.0f}%",
            "-" if r["us_per_frame"] is None else f"{r['us_per_frame']:.1f}",
            "-" if r["frames_per_medium_cpu_s"] is None else f"{r['frames_per_medium_cpu_s']:.0f}",
            f"{r['bench_cpu_pct']:.0f}%",
            str(r["queue_drops"] + r["send_drops"]),
        )
    lines = [
        "f/s: frames relayed per second; model: the airtime model's frames/s on a fake clock; "
        "med CPU: the medium's share of a core; us/frame: medium CPU per delivered frame; "
        "f/CPU-s: frames per medium CPU-second; bench: the clients' CPU; capacity: one area "
        f"at 54 Mbps with airtime x{CAPACITY_SCALE:g} (the medium's own limit, not 802.11's)",
    ]
    for pr, sm in per_profile.items():
        line = (
            f"{pr}: highest rate kept up with (1 area) {sm['highest_rate_kept_up_mbps']} Mbps; "
            f"capacity {sm['capacity_one_area_frames_per_s']:.0f} frames/s at "
            f"{sm['capacity_one_area_medium_cpu_pct']:.0f}% of a core, "
            f"{sm['capacity_us_per_frame']} us of medium CPU per delivered frame "
            f"(MAC alone {sm['capacity_model_us_per_frame']} us)"
        )
        if "cost_per_frame_vs_ns2" in sm:
            line += (
                f"; {sm['cost_per_frame_vs_ns2']}x ns2's per delivered frame "
                f"(goal <= {GOAL_COST_RATIO:g}x: {'met' if sm['cost_goal_met'] else 'NOT met'}; "
                f"MAC alone {sm['mac_cost_per_frame_vs_ns2']}x)"
            )
        lines.append(line)
    report.show(table, *lines)
    report.write(args.out, "medium", {"runs": results, "summary": summary})
    return 0 if first["highest_rate_kept_up_mbps"] is not None else 1
