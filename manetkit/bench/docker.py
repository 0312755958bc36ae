"""``manetkit bench docker``: the image and a compose lab against the netns lab.

Measures, in one run and one after the other (never both labs at once on two cores):

- the image: size, build time from scratch (``--scratch``: the base from Debian's packages
  and every layer) and cached (the same build again);
- a compose lab of ``--scenario`` (default chain-5): seconds from ``compose up -d`` until
  every node's daemon answers its health check;
- bulk TCP (iperf3, ``--duration`` s) from the first node to the last (4 hops on chain-5)
  in the compose lab, then in the netns lab (``lab up``) of the same scenario and stack.

Goals (docs/docker.md): image < 400 MB, compose up < 20 s once the image exists,
throughput within 10 % of the netns lab's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from rich.table import Table

from manetkit import procs
from manetkit.bench import report
from manetkit.errors import UserError
from manetkit.lab import dockerctl, netns, nodes
from manetkit.lab.scenario import SHIPPED_SCENARIOS, load_scenario
from manetkit.paths import netns_name

GOAL_IMAGE_MB = 400.0
GOAL_UP_S = 20.0
GOAL_RATIO = 0.10
IPERF_PORT = 5202


def _seconds_until(pred, timeout: float, what: str) -> float:
    """How long until ``pred()`` held (polled as :func:`manetkit.procs.wait_for` does)."""
    t0 = time.monotonic()
    try:
        procs.wait_for(pred, timeout, what)
    except TimeoutError as exc:
        raise UserError(str(exc)) from None
    return time.monotonic() - t0


def measure_build(tag: str, scratch: bool) -> dict:
    out: dict = {"tag": tag}
    if scratch:
        base = os.environ.get("MK_DOCKER_BASE", "manetkit-base:bookworm")
        # the tag, then the build's stage images (dangling once the tag is gone), the base
        for cmd in (["rmi", "-f", tag], ["image", "prune", "-f"], ["rmi", base]):
            dockerctl.run(["docker", *cmd], check=False)
        if dockerctl.run(["docker", "image", "inspect", base], check=False).returncode == 0:
            raise UserError(f"--scratch: {base} is still used by other images (docker images)")
        out["scratch_s"] = round(dockerctl.build_image(tag), 1)
    out["cached_s"] = round(dockerctl.build_image(tag), 1)
    out["size_mb"] = round(dockerctl.image_size(tag) / 1e6, 1)
    return out


def iperf(server, client, dst_addr: str, duration: float) -> float:
    """Bulk TCP to ``dst_addr`` for ``duration`` s; the receiver's bits per second.
    ``server(argv)`` starts iperf3's server in the last node (in the background),
    ``client(argv, timeout)`` runs the client in the first and returns its process."""
    server(["iperf3", "-s", "-1", "-p", str(IPERF_PORT), "-B", dst_addr])
    argv = ["iperf3", "-c", dst_addr, "-p", str(IPERF_PORT), "-t", f"{duration:g}", "-J"]
    argv += ["-O", "1" if duration >= 4 else "0", "--connect-timeout", "3000"]
    for _ in range(50):  # the server needs a moment to listen
        got = client(argv, duration + 60)
        if "refused" not in got.stdout + got.stderr:
            break
        time.sleep(0.1)
    try:
        return float(json.loads(got.stdout)["end"]["sum_received"]["bits_per_second"])
    except (ValueError, KeyError, TypeError):
        raise UserError(f"iperf3 to {dst_addr}: {got.stdout[-300:]}{got.stderr}") from None


def measure_compose(scenario: Path, stack: str, tag: str, duration: float) -> dict:
    sc = load_scenario(scenario, {"stack": stack})
    name = f"bd{os.getpid() % 10000}"
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "docker-compose.yml"
        subprocess.run(
            ["manetkit", "lab", "compose", str(scenario), "--stack", stack, "--lab", name]
            + ["--image", tag, "-o", str(file)],
            check=True,
        )
        lab = dockerctl.ComposeLab(file, project=name, lab=name)
        up_s = lab.up()
        try:
            last = sc.nodes
            route_s = _seconds_until(
                lambda: (
                    lab.exec(
                        "n1", "ping", "-c", "1", "-W", "1", f"10.42.0.{last}", check=False
                    ).returncode
                    == 0
                ),
                60,
                "first ping in the compose lab",
            )
            bps = iperf(
                lambda argv: lab.exec_detached(f"n{last}", *argv),
                lambda argv, timeout: lab.exec("n1", *argv, check=False, timeout=timeout),
                f"10.42.0.{last}",
                duration,
            )
        finally:
            left = lab.down()
    return {
        "up_s": round(up_s, 2),
        "first_ping_s": round(route_s, 2),
        "mbps": round(bps / 1e6, 3),
        "left": left,
    }


def measure_netns(scenario: Path, stack: str, duration: float) -> dict:
    sc = load_scenario(scenario, {"stack": stack})
    name = f"bn{os.getpid() % 10000}"
    last = sc.nodes
    first_ns, last_ns = netns_name(name, "n1"), netns_name(name, f"n{last}")
    servers: list[subprocess.Popen] = []
    t0 = time.monotonic()
    nodes.up(scenario, name=name, overrides={"stack": stack})
    up_s = time.monotonic() - t0
    try:
        route_s = _seconds_until(
            lambda: (
                netns.run(
                    first_ns, ["ping", "-c", "1", "-W", "1", f"10.42.0.{last}"], check=False
                ).returncode
                == 0
            ),
            60,
            "first ping in the netns lab",
        )
        bps = iperf(
            lambda argv: servers.append(
                netns.popen(last_ns, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            ),
            lambda argv, timeout: netns.run(first_ns, argv, check=False, timeout=timeout),
            f"10.42.0.{last}",
            duration,
        )
    finally:
        procs.stop_all(servers)
        nodes.down(name)
    return {"up_s": round(up_s, 2), "first_ping_s": round(route_s, 2), "mbps": round(bps / 1e6, 3)}


def run(args: argparse.Namespace) -> int:
    problem = dockerctl.docker_problem()
    if problem:
        raise UserError(problem)
    scenario = Path(args.scenario)
    if not scenario.exists():
        scenario = SHIPPED_SCENARIOS / args.scenario
    if not scenario.exists():
        raise UserError(f"scenario {args.scenario}: no such file")
    result: dict = {"settings": report.settings(args), "runs": []}
    result["image"] = measure_build(args.tag, args.scratch)
    for _ in range(args.runs):
        result["runs"].append(
            {
                "compose": measure_compose(scenario, args.stack, args.tag, args.duration),
                "netns": measure_netns(scenario, args.stack, args.duration),
            }
        )
    img = result["image"]
    t = Table("what", "figure", "goal", title=f"bench docker: {scenario.name}, {args.stack}")
    t.add_row("image size", f"{img['size_mb']:.0f} MB", f"< {GOAL_IMAGE_MB:g} MB")
    if "scratch_s" in img:
        t.add_row("build from scratch", f"{img['scratch_s']:.0f} s", "")
    t.add_row("build, cached", f"{img['cached_s']:.1f} s", "")
    for i, r in enumerate(result["runs"], 1):
        c, n = r["compose"], r["netns"]
        ratio = c["mbps"] / n["mbps"] - 1 if n["mbps"] else None
        r["compose_vs_netns"] = None if ratio is None else round(ratio, 4)
        t.add_row(f"[{i}] compose up (healthy)", f"{c['up_s']:.1f} s", f"< {GOAL_UP_S:g} s")
        t.add_row(f"[{i}] netns lab up", f"{n['up_s']:.1f} s", "")
        t.add_row(
            f"[{i}] first ping compose / netns",
            f"{c['first_ping_s']:.1f} / {n['first_ping_s']:.1f} s",
            "",
        )
        t.add_row(
            f"[{i}] iperf3 n1->n{load_scenario(scenario).nodes} compose / netns",
            f"{c['mbps']:.3f} / {n['mbps']:.3f} Mbit/s ({report.cell(ratio and ratio * 100, '+.1f')} %)",
            f"within {GOAL_RATIO * 100:g} %",
        )
        t.add_row(f"[{i}] left after down -v", ", ".join(c["left"]) or "nothing", "nothing")
    report.show(t)
    report.write(args.out, "docker", result)
    return 0


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", default="chain-5.yaml", help="scenario (chain-5.yaml)")
    parser.add_argument("--stack", default="dsr", choices=["aodv", "dsr", "smr"])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of iperf3 (10)")
    parser.add_argument("--runs", type=int, default=1, help="compose+netns pairs (1)")
    parser.add_argument("--tag", default="manetkit:bench", help="image tag (manetkit:bench)")
    parser.add_argument(
        "--scratch",
        action="store_true",
        help="remove the image and its base first, so the build starts from Debian's packages",
    )
    parser.set_defaults(func=run)
