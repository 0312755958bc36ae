"""``manetkit bench proxy``: what the split-TCP proxy costs when nothing breaks.

Issue 4, "Must show" (proxy overhead with no breaks):

* ``lab``: chain-4 at 2 Mbit/s (3 hops, DSR daemons, ``lab up --proxy elfn``): bulk TCP
  n1 -> n4 through the proxy pair, and plain kernel TCP over the same lab in the same
  run, alternating (``--rounds``): the plain sender sets the proxy's own SO_MARK, which
  the interception rules let through (docs/proxy.md, "Interception"), so both share
  the daemons, the medium and the moment. Goal: the proxy's goodput within 5% of plain.
* ``fast``: two namespaces on one veth (no medium, no daemon: the mesh leg is a plain
  veth route): iperf3 directly, then through a proxy pair. Goal: >= 500 Mbit/s through
  the proxy pair.

``--parts lab,fast`` picks which; JSON in ``OUT/proxy.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from rich.table import Table

from manetkit import paths, procs
from manetkit.bench import labrun, report, stream
from manetkit.console import console
from manetkit.errors import UserError
from manetkit.jsonlines import request
from manetkit.lab import nodes
from manetkit.lab.scenario import SHIPPED_SCENARIOS

GOAL_LAB_PCT = 5.0
GOAL_FAST_MBPS = 500.0
OWN_MARK = 0x4D4B  # ProxyConfig.own_mark's default: the redirect rules skip it
PORT = 5299
SRC, DST, DST_ADDR = "n1", "n4", "10.42.0.4"


# --- (a) the lab chain ---------------------------------------------------------------------------


def _transfer(lab: str, work: Path, tag: str, mark: int | None, warmup: float, secs: float) -> dict:
    """One bulk transfer n1 -> n4 (the stream's sender and receiver, manetkit.bench.stream);
    goodput of its window."""
    rx, tx = work / f"{tag}-recv.json", work / f"{tag}-send.json"
    for f in (rx, tx, rx.with_suffix(".first")):
        f.unlink(missing_ok=True)
    r = labrun.ns_python(lab, DST, "manetkit.bench.stream", "recv", "--port", str(PORT),
                         "--out", str(rx))  # fmt: skip
    time.sleep(0.3)
    extra = ["--mark", str(mark)] if mark else []
    s = labrun.ns_python(
        lab, SRC, "manetkit.bench.stream", "send", "--addr", DST_ADDR, "--port", str(PORT),
        "--out", str(tx), *extra,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not rx.with_suffix(".first").exists():
            if time.monotonic() > deadline or r.poll() is not None or s.poll() is not None:
                raise UserError(f"bench proxy: transfer {tag} did not start within 60 s")
            time.sleep(0.1)
        t0 = time.monotonic() + warmup
        time.sleep(warmup + secs)
    finally:
        procs.stop_all((r, s), grace=10)
    res = json.loads(rx.read_text())
    samples = [(float(a), int(b)) for a, b in res["samples"]]
    intact = res["bytes"] > 0 and res["sha256"] == stream.stream_sha256(res["bytes"])
    return {"kbps": round(stream.goodput_kbps(samples, t0, t0 + secs), 1), "intact": intact}


def bench_lab(args: argparse.Namespace, work: Path) -> dict:
    lab = f"bpx{os.getpid() % 10000}"
    overrides = {"stack": "dsr", "proxy": "elfn", "radio.rate_mbps": str(args.rate)}
    nodes.down(lab)
    plain, proxied = [], []
    try:
        nodes.up(SHIPPED_SCENARIOS / "chain-4.yaml", name=lab, overrides=overrides)
        for i in range(args.rounds):
            plain.append(_transfer(lab, work, f"plain{i}", OWN_MARK, args.warmup, args.seconds))
            proxied.append(_transfer(lab, work, f"proxy{i}", None, args.warmup, args.seconds))
        st = request(paths.node_dir(lab, "n1") / "proxy.sock", {"cmd": "status"})["status"]
    finally:
        nodes.down(lab)
    p = sum(x["kbps"] for x in plain) / len(plain)
    q = sum(x["kbps"] for x in proxied) / len(proxied)
    return {
        "rate_mbps": args.rate,
        "seconds_each": args.seconds,
        "plain_kbps": [x["kbps"] for x in plain],
        "proxy_kbps": [x["kbps"] for x in proxied],
        "plain_mean_kbps": round(p, 1),
        "proxy_mean_kbps": round(q, 1),
        "proxy_vs_plain_pct": round(100 * (q - p) / p, 1) if p else None,
        "intact": all(x["intact"] for x in plain + proxied),
        "sessions_through_proxy": st["counters"]["accepted"],
        "goal_pct": GOAL_LAB_PCT,
    }


# --- (b) fast links ------------------------------------------------------------------------------


def _sh(*cmd: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    return subprocess.run(full, capture_output=True, text=True, check=check, timeout=120)


def _iperf(client: str, addr: str, secs: float) -> float:
    r = _sh("iperf3", "-c", addr, "-t", str(secs), "-J", "-O", "1", ns=client)
    return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6


def _start_proxy(ns: str, work: Path, mode: str) -> tuple[subprocess.Popen[bytes], Path]:
    sock = work / f"{ns}.sock"
    cfg = {"mode": mode, "daemon_socket": None, "status_socket": str(sock)}
    path = work / f"{ns}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    log = open(work / f"{ns}.log", "wb")  # noqa: SIM115 - the proxy's for its life
    argv = ["ip", "netns", "exec", ns, sys.executable, "-m", "manetkit.proxy", "--config"]
    proc = subprocess.Popen([*argv, str(path)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 15
    while True:
        with contextlib.suppress(OSError, ValueError):
            if request(sock, {"cmd": "status"}, timeout=1).get("ok"):
                return proc, sock
        if proc.poll() is not None or time.monotonic() > deadline:
            raise UserError(f"proxy in {ns} did not start: {(work / f'{ns}.log').read_text()}")
        time.sleep(0.05)


def bench_fast(args: argparse.Namespace, work: Path) -> dict:
    tag = f"mkbp{os.getpid() % 10000}"
    client, server = f"{tag}c", f"{tag}s"
    a, b = "10.42.200.1", "10.42.200.2"
    started: list[subprocess.Popen[bytes]] = []
    try:
        for ns in (client, server):
            _sh("ip", "netns", "add", ns)
            _sh("ip", "link", "set", "lo", "up", ns=ns)
        _sh("ip", "link", "add", "v0", "netns", client, "type", "veth", "peer", "name", "v0",
            "netns", server)  # fmt: skip
        for ns, ip in ((client, a), (server, b)):
            _sh("ip", "addr", "add", f"{ip}/24", "dev", "v0", ns=ns)
            _sh("ip", "link", "set", "v0", "up", ns=ns)
        started.append(
            subprocess.Popen(
                ["ip", "netns", "exec", server, "iperf3", "-s", "-B", b],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        deadline = time.monotonic() + 10
        while ":5201" not in _sh("ss", "-ltn", ns=server).stdout:
            if time.monotonic() > deadline:
                raise UserError("bench proxy: iperf3 server did not start")
            time.sleep(0.05)
        direct = _iperf(client, b, args.fast_seconds)
        p1, s1 = _start_proxy(client, work, args.fast_mode)
        started.append(p1)
        p2, _ = _start_proxy(server, work, args.fast_mode)
        started.append(p2)
        through = _iperf(client, b, args.fast_seconds)
        accepted = request(s1, {"cmd": "status"})["status"]["counters"]["accepted"]
    finally:
        for p in reversed(started):
            procs.stop(p, grace=10)
        for ns in (client, server):
            _sh("ip", "netns", "del", ns, check=False)
    return {
        "mode": args.fast_mode,
        "seconds": args.fast_seconds,
        "direct_mbps": round(direct, 1),
        "proxy_pair_mbps": round(through, 1),
        "sessions_through_proxy": accepted,
        "goal_mbps": GOAL_FAST_MBPS,
    }


# --- the command ---------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if not parts or any(p not in ("lab", "fast") for p in parts):
        raise UserError(f"--parts: use lab, fast or lab,fast (got {args.parts!r})")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc: dict = {"bench": "proxy"}
    ok = True
    with tempfile.TemporaryDirectory(prefix="mk-bench-proxy-") as tmp:
        work = Path(tmp)
        if "fast" in parts:
            console.print("fast: iperf3 over one veth, direct then through the proxy pair ...")
            doc["fast"] = f = bench_fast(args, work)
            ok &= f["sessions_through_proxy"] >= 1
        if "lab" in parts:
            console.print(
                f"lab: chain-4 at {args.rate:g} Mbit/s, plain vs proxy x{args.rounds} ..."
            )
            doc["lab"] = bench_lab(args, work)
            ok &= doc["lab"]["intact"]
    t = Table("part", "plain / direct", "through the proxy pair", "difference", "goal", "verdict",
              title="bench proxy: overhead with no breaks")  # fmt: skip
    if "lab" in doc:
        d = doc["lab"]
        pct = d["proxy_vs_plain_pct"]
        met = pct is not None and pct >= -GOAL_LAB_PCT
        t.add_row(
            f"lab chain-4 3 hops {d['rate_mbps']:g} Mbit/s (kbit/s)",
            f"{d['plain_mean_kbps']:.0f} ({', '.join(f'{x:.0f}' for x in d['plain_kbps'])})",
            f"{d['proxy_mean_kbps']:.0f} ({', '.join(f'{x:.0f}' for x in d['proxy_kbps'])})",
            f"{pct:+.1f}%" if pct is not None else "-",
            f"within {GOAL_LAB_PCT:g}%",
            "meets" if met else "[red]misses[/]",
        )
    if "fast" in doc:
        d = doc["fast"]
        met = d["proxy_pair_mbps"] >= GOAL_FAST_MBPS
        t.add_row(
            f"fast veth, {d['mode']} (Mbit/s)",
            f"{d['direct_mbps']:.0f}",
            f"{d['proxy_pair_mbps']:.0f}",
            f"{100 * (d['proxy_pair_mbps'] / d['direct_mbps'] - 1):+.1f}%",
            f">= {GOAL_FAST_MBPS:g} Mbit/s",
            "meets" if met else "[red]misses[/]",
        )
    report.show(t)
    report.write(out, "proxy", doc)
    return 0 if ok else 1


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--parts", default="lab,fast", help="lab, fast or both (lab,fast)")
    parser.add_argument("--rate", type=float, default=2.0, help="lab radio Mbit/s (2)")
    parser.add_argument("--rounds", type=int, default=2, help="lab: plain/proxy pairs (2)")
    parser.add_argument("--seconds", type=float, default=15.0, help="lab: window per run (15)")
    parser.add_argument("--warmup", type=float, default=3.0, help="lab: s before each window (3)")
    parser.add_argument("--fast-seconds", type=float, default=5.0, help="fast: iperf3 -t (5)")
    parser.add_argument(
        "--fast-mode", default="fixed-rto", choices=["fixed-rto", "elfn", "bus"], help="fast"
    )
    parser.set_defaults(func=run)
