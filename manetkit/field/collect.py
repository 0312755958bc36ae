"""``field-tests/collect``: sample a node's view of the mesh into one tarball.

Every ``--every`` seconds for ``--duration`` seconds: the radio's station dump (signal,
inactivity, tx retries/failures per neighbour: the raw link-layer view) and the daemon's
``manetkit status --json`` (neighbours, routes), each preceded by a timestamp line, so
``report`` can line them up across laptops (keep the laptops' clocks in sync with NTP
before a run). At the end: the daemon's and proxy's journal, then a tarball.
"""

from __future__ import annotations

import argparse
import socket

from manetkit.field import validate
from manetkit.field.runner import Plan, ScriptError, main_wrapper

MARK = "=== sample"  # report.py splits the sample files on this


def build(args: argparse.Namespace) -> Plan:
    validate.ifname(args.interface)
    if args.every <= 0 or args.duration < 0:
        raise ScriptError("--every must be > 0 and --duration >= 0 (seconds)")
    rounds = int(args.duration // args.every) + 1
    if rounds > 100_000:
        raise ScriptError(f"--duration/--every gives {rounds} samples; at most 100000")
    out = args.out or f"manetkit-run-{args.node}"
    plan = Plan()
    plan.run("mkdir", "-p", out)
    plan.write(
        f"{out}/meta.txt",
        f"node={args.node}\ninterface={args.interface}\nevery={args.every}\n",
    )
    stations, status = f"{out}/stations.txt", f"{out}/status.jsonl"
    for i in range(rounds):
        for target in (stations, status):
            plan.run("date", f"+{MARK} {i} %s.%N", stdout=target)
        plan.run("iw", "dev", args.interface, "station", "dump", stdout=stations, check=False)
        plan.run(
            "manetkit", "status", "--json", "--socket", args.socket, stdout=status, check=False
        )
        if i + 1 < rounds:
            plan.run("sleep", f"{args.every:g}")
    plan.run(
        "journalctl", "--no-pager", "-o", "short-iso-precise", "-u", "manetkit-daemon",
        "-u", "manetkit-proxy", "--since", f"-{int(args.duration) + 60}s",
        stdout=f"{out}/journal.txt", check=False,
    )  # fmt: skip
    plan.run("tar", "czf", f"{out}.tar.gz", out)
    return plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="collect", description="Sample station dumps and daemon status into a tarball."
    )
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.add_argument("-i", "--interface", default="wlan0")
    parser.add_argument("--node", default=socket.gethostname(), help="name used in the report")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--every", type=float, default=1.0, help="sample period, seconds")
    parser.add_argument("--socket", default="/run/manetkit/events.sock", help="daemon socket")
    parser.add_argument("--out", help="output folder (default manetkit-run-NODE)")
    return main_wrapper("collect", build, argv, parser)
