"""``manetkit lab demo``: the main job in one command.

Brings up a lab (``chain-5`` by default: 4 hops at 2 Mbps) with a routing stack in every
node, then sends real traffic from the first node to the last through the mesh: ping
(time to the first reply includes route discovery), an HTTP download checked by SHA-256,
and an iperf3 TCP transfer. It prints what it measured and the route n1's daemon used,
and always takes the lab down again (``--keep`` leaves it up to explore).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from rich.table import Table

from manetkit import paths, procs
from manetkit.console import console
from manetkit.errors import UserError
from manetkit.lab import netns, nodes, stacks
from manetkit.lab.scenario import SHIPPED_SCENARIOS

SCENARIOS = SHIPPED_SCENARIOS


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "scenario",
        nargs="?",
        default=str(SCENARIOS / "chain-5.yaml"),
        help="scenario file (default: configs/scenarios/chain-5.yaml)",
    )
    p.add_argument("--name", dest="lab", default="demo", help="lab name (default: demo)")
    p.add_argument("--stack", choices=["aodv", "dsr"], default="dsr", help="routing protocol")
    p.add_argument("--size-kb", type=int, default=256, help="size of the HTTP download")
    p.add_argument("--duration", type=float, default=10.0, help="iperf3 seconds")
    p.add_argument("--keep", action="store_true", help="leave the lab up afterwards")
    p.set_defaults(func=run)


def _ns(lab: str, node: str) -> str:
    return paths.netns_name(lab, node)


def _ping_until(lab: str, src: str, dst: str, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        r = netns.run(_ns(lab, src), ["ping", "-c", "1", "-W", "2", dst], check=False)
        if r.returncode == 0:
            return time.monotonic() - t0
    raise UserError(f"{src} could not reach {dst} within {timeout:.0f} s")


def run(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        raise UserError("the lab needs root (network namespaces, TAP devices)")
    for tool in ("ping", "curl", "iperf3"):
        if not shutil.which(tool):
            raise UserError(f"{tool} is not installed (bash .ci/install installs it)")
    state = nodes.up(args.scenario, name=args.lab, overrides={"stack": args.stack})
    lab, first, last = state.lab, state.nodes[0], state.nodes[-1]
    dst = str(stacks.node_address(last))
    console.print(
        f"lab [bold]{lab}[/]: {len(state.nodes)} nodes, {args.stack} in every node, "
        f"up in {state.up_seconds:.1f} s; traffic {first} -> {last} ({dst})"
    )
    servers: list[subprocess.Popen] = []
    results: list[tuple[str, str]] = []
    try:
        with tempfile.TemporaryDirectory() as www:
            blob = os.urandom(args.size_kb * 1024)
            Path(www, "blob.bin").write_bytes(blob)
            servers.append(
                netns.popen(
                    _ns(lab, last),
                    ["python3", "-m", "http.server", "8080", "--bind", dst, "--directory", www],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            servers.append(
                netns.popen(
                    _ns(lab, last),
                    ["iperf3", "-s", "-1", "-B", dst],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            first_reply = _ping_until(lab, first, dst, timeout=30)
            results.append(("first ping reply (route discovery included)", f"{first_reply:.2f} s"))
            ping = netns.run(_ns(lab, first), ["ping", "-c", "5", "-i", "0.3", dst], check=False)
            results.append(("ping x5", ping.stdout.strip().splitlines()[-1]))

            t0 = time.monotonic()
            out = Path(www, "downloaded.bin")
            got = netns.run(
                _ns(lab, first),
                [
                    "curl",
                    "-sS",
                    "--retry",
                    "3",
                    "--max-time",
                    "120",
                    "-o",
                    str(out),
                    f"http://{dst}:8080/blob.bin",
                ],
                check=False,
                timeout=150,
            )
            took = time.monotonic() - t0
            body = out.read_bytes() if out.exists() else b""
            ok = (
                got.returncode == 0
                and hashlib.sha256(body).digest() == hashlib.sha256(blob).digest()
            )
            results.append(
                (
                    f"HTTP GET {args.size_kb} KiB (curl)",
                    f"{'sha256 ok' if ok else 'FAILED: ' + got.stderr.strip()}, {took:.1f} s, "
                    f"{len(blob) * 8 / took / 1e3:.0f} kbit/s",
                )
            )

            perf = netns.run(
                _ns(lab, first),
                ["iperf3", "-c", dst, "-t", str(args.duration), "-J"],
                check=False,
                timeout=args.duration + 60,
            )
            try:
                bps = json.loads(perf.stdout)["end"]["sum_received"]["bits_per_second"]
                results.append((f"iperf3 TCP {args.duration:.0f} s", f"{bps / 1e3:.0f} kbit/s"))
            except (ValueError, KeyError):
                results.append(("iperf3 TCP", "FAILED: " + (perf.stderr or perf.stdout)[-200:]))
                ok = False

        table = Table(title=f"{first} -> {last} over the emulated 802.11 mesh")
        table.add_column("test")
        table.add_column("result")
        for k, v in results:
            table.add_row(k, v)
        console.print(table)
        _print_route(lab, first, dst)
        return 0 if ok else 1
    finally:
        for s in servers:
            procs.stop(s)
        if args.keep:
            console.print(
                f"lab left up: `manetkit lab status --name {lab}`; `manetkit lab down --name {lab}`"
            )
        else:
            nodes.down(lab)
            console.print(f"lab {lab} down")


def _print_route(lab: str, node: str, dst: str) -> None:
    from manetkit.daemonstatus import AodvStatus, SourceRouteStatus, StatusError, fetch_status

    try:
        engine = fetch_status(stacks.daemon_socket(lab, node)).engine
    except StatusError:
        return
    via: str | None = None
    if isinstance(engine, SourceRouteStatus):
        path = engine.path_to(dst)
        via = " -> ".join(path) if path else None
    elif isinstance(engine, AodvStatus):
        via = engine.next_hop(dst)
    if via is not None:
        console.print(f"{node}'s {engine.protocol} route to {dst}: {via}")
