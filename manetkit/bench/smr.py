"""``manetkit bench smr``: TCP over DSR and the three SMR modes, side by side.

Lim, Xu & Gerla's setting (ICC'03, section III-C; docs/smr.md): 50 nodes in
1000 x 1000 m (configs/scenarios/rwp-50.yaml), random waypoint with speeds uniform in
0..``--speed`` m/s (30) and zero pause (the scenario's Holland-style speed spread and
its speed are overridden), 2 Mbit/s 802.11 with RTS/CTS, fixed RTO on (every node runs
``manetkit proxy`` in ``fixed-rto`` mode: Dyer & Boppana's Reno-F, the paper's III-B),
TCP Reno on the mesh leg (``--cc reno``, the paper's III-C; the kernel default here is
BBR, which neither halves its window on three duplicate ACKs nor reads reordering as
loss, so it would hide the effect section IV measures; ``--cc default`` keeps it).
Traffic patterns (``--traffic``): ``1tcp`` (one bulk TCP flow), ``1tcp4cbr`` (plus four
CBR/UDP flows of 512-byte packets at 4 packets/s, the CMU cbrgen default; the paper gives
no rate) and ``5tcp``. Flows are random distinct node pairs drawn from the seed.

Each (traffic, seed) runs every variant (``--variants``: dsr, concurrent, backup1,
backup2; backup1-cache is backup1 with ``after_all_broken: cache``, SMR as it was before
a source rediscovered once both paths broke) on a fresh lab with the same mobility and
flows. After ``--warmup`` s the
window of ``--duration`` s is measured:

* throughput: bytes each TCP receiver's application got in the window / its length
  (kbit/s; the mean over the TCP flows);
* retransmission ratio (the paper's Fig. 2 definition: retransmitted segments / all
  segments sent) of the TCP connection that crosses the mesh: the source proxy's mesh
  leg to the destination's proxy (``ss -tin`` in the source node, ``dst`` the
  destination, ``dport`` the leg's remote port as the source proxy's status socket
  names it: ``retrans`` total / ``data_segs_out``), read at the end of the window, so
  over the whole connection; summed over the TCP flows. A leg the proxy replaced and closed
  is no longer counted (``mesh_leg_resumes`` says how often that happened) and a flow
  with no leg at that moment is left out;
* normalised control overhead (the paper's Fig. 4): control packets sent or forwarded
  by all daemons in the window (route requests sent and rebroadcast, replies sent,
  requests/replies/errors forwarded along source routes, errors sent) / data packets
  delivered to destinations by all daemons in the window (TCP data and ACKs, CBR);
* SMR's counters over the window: path switches and discoveries avoided; every daemon
  counter that moved (``counters``, summed over the nodes: ``request-ratelimited``,
  ``errors-ratelimited``, ``smr-all-broken``...) and, per TCP flow end
  (``endpoints``), its own counters, its SMR paths at the end and its cache size.

The full matrix (Lim/Xu/Gerla use 30 seeds; issue 9 asks at least 3)::

    manetkit bench smr --traffic 1tcp,1tcp4cbr,5tcp --seeds 1,2,3 --duration 300

Everything runs in real time on this machine: 50 daemons, 50 proxies, 50 radios and
the medium share its cores, so a node's processing delay is far from QualNet's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from manetkit import procs
from manetkit.bench import flap, labrun, report
from manetkit.errors import UserError
from manetkit.jsonlines import request
from manetkit.lab import nodes, stacks
from manetkit.lab.scenario import SHIPPED_SCENARIOS
from manetkit.paths import daemon_socket, netns_name, proxy_socket

VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "dsr": ("dsr", {}),
    "concurrent": ("smr", {"mode": "concurrent"}),
    "backup1": ("smr", {"mode": "backup1"}),
    "backup2": ("smr", {"mode": "backup2"}),
    # SMR before a source rediscovered once both paths broke (it kept to DSR's cache).
    "backup1-cache": ("smr", {"mode": "backup1", "after_all_broken": "cache"}),
}
TRAFFIC: dict[str, tuple[int, int]] = {"1tcp": (1, 0), "1tcp4cbr": (1, 4), "5tcp": (5, 0)}
NODES = 50
TCP_PORT = 5400
CBR_PORT = 5500
CBR_BYTES, CBR_PPS = 512, 4.0
# Control packets in the daemons' counters (dsr.py/smr.py names).
CONTROL = (
    "requests-sent",
    "requests-forwarded",
    "replies-sent",
    "control-forwarded",
    "errors-sent",
)


def flows(seed: int, tcp: int, cbr: int, n: int = NODES) -> list[tuple[str, int, int]]:
    """(kind, source, destination) for each flow; no node is in two flows."""
    rng = random.Random(f"smr-flows-{seed}")
    picked = rng.sample(range(1, n + 1), 2 * (tcp + cbr))
    out = []
    for i in range(tcp + cbr):
        out.append(("tcp" if i < tcp else "cbr", picked[2 * i], picked[2 * i + 1]))
    return out


def addr(i: int) -> str:
    return str(stacks.node_address(f"n{i}"))


def statuses(lab: str) -> dict[int, dict[str, Any]]:
    """Every daemon's engine status (``manetkit status --json``'s ``engine``) by node
    number; a daemon that does not answer is left out."""
    out: dict[int, dict[str, Any]] = {}
    for i in range(1, NODES + 1):
        try:
            st = request(daemon_socket(lab, f"n{i}"), {"cmd": "status"}, timeout=5)["status"]
            out[i] = st["engine"]
        except (OSError, ValueError, KeyError):
            continue
    return out


def counters(engines: dict[int, dict[str, Any]]) -> dict[str, int]:
    """The engines' counters, summed over the nodes."""
    total: dict[str, int] = {}
    for eng in engines.values():
        for k, v in eng.get("counters", {}).items():
            if isinstance(v, int):
                total[k] = total.get(k, 0) + v
    return total


def endpoints(
    fl: list[tuple[str, int, int]], s0: dict[int, dict[str, Any]], s1: dict[int, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per TCP flow end: its counters that moved in the window and, at the end of the
    window, its SMR paths (``multipath``) and route cache size: where the source's
    packets went (its path set, or DSR's cache once every path broke)."""
    out: dict[str, dict[str, Any]] = {}
    for kind, src, dst in fl:
        if kind != "tcp":
            continue
        for i in (src, dst):
            a = s0.get(i, {}).get("counters", {})
            b = s1.get(i, {}).get("counters", {})
            d = {k: v - a.get(k, 0) for k, v in b.items() if isinstance(v, int)}
            out[f"n{i}"] = {
                "counters": {k: v for k, v in sorted(d.items()) if v},
                "multipath": s1.get(i, {}).get("multipath", []),
                "cached_paths": len(s1.get(i, {}).get("paths", [])),
            }
    return out


_SS_SEGS = re.compile(r"\bsegs_out:(\d+)")
_SS_DATA_SEGS = re.compile(r"\bdata_segs_out:(\d+)")
_SS_RETRANS = re.compile(r"\bretrans:\d+/(\d+)")


def ss_retrans(text: str) -> tuple[int, int] | None:
    """(retransmitted, sent) segments summed over the sockets of ``ss -tin`` output
    (``retrans:cur/total`` and ``data_segs_out``, the data segments sent, which counts
    the retransmissions too, as the paper's Fig. 2 ratio does; ``segs_out``, which also
    counts pure ACKs, when an older ``ss`` lists no ``data_segs_out``); None if it lists
    no socket."""
    found = False
    retrans = sent = 0
    for line in text.splitlines():
        segs = _SS_SEGS.search(line)
        if segs is None:
            continue
        found = True
        data = _SS_DATA_SEGS.search(line)
        sent += int((data or segs).group(1))
        got = _SS_RETRANS.search(line)
        retrans += int(got.group(1)) if got else 0
    return (retrans, sent) if found else None


def mesh_leg_retrans(netns: str, peer: str, peer_port: int) -> tuple[str, tuple[int, int] | None]:
    """``ss -tin`` output and :func:`ss_retrans` of the TCP connections that cross the
    mesh from a source node's proxy: in its namespace ``netns``, those to the peer
    proxy ``peer`` on its ``peer_port`` (docs/proxy.md: the mesh leg). The application's
    own connection ends at its local proxy and never crosses the mesh, so it is left out."""
    argv = ["ip", "netns", "exec", netns, "ss", "-tin", "dst", peer, "dport", "=", f":{peer_port}"]
    ss = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    return ss, ss_retrans(ss)


def mesh_port(status: dict[str, Any], peer: str) -> tuple[int | None, int]:
    """From a proxy's status (docs/proxy.md, status socket): the peer proxy's port of
    the mesh leg of a session to ``peer`` (None if no session to it has a leg now), and
    how many times those sessions resumed on a new leg."""
    sessions = [x for x in status.get("sessions", []) if x.get("peer") == peer]
    ports = [x["leg"]["remote_port"] for x in sessions if x.get("leg")]
    return (ports[0] if ports else None), sum(int(x.get("resumes", 0)) for x in sessions)


def _py(lab: str, node: int, module: str, *args: str) -> subprocess.Popen[bytes]:
    return labrun.ns_python(lab, f"n{node}", module, *args, stderr=subprocess.DEVNULL)


def _daemon_extra(
    work: Path, protocol: str, values: dict[str, Any]
) -> contextlib.AbstractContextManager[None]:
    """MANETKIT_LAB_DAEMON_CONFIG for this variant while the lab comes up."""
    path = work / f"daemon-{protocol}-{values.get('mode', 'dsr')}.yaml"
    return labrun.env_config(stacks.EXTRA_ENV, path, {protocol: values} if values else {})


def run_one(variant: str, traffic: str, seed: int, args: argparse.Namespace, work: Path) -> dict:
    protocol, values = VARIANTS[variant]
    tcp, cbr = TRAFFIC[traffic]
    fl = flows(seed, tcp, cbr)
    lab = f"smrb{os.getpid() % 1000}"
    overrides = {
        "stack": protocol,
        "proxy": "fixed-rto",
        "seed": str(seed),
        "mobility.speed": str(args.speed),
        "mobility.speed_dist": "uniform",
        "mobility.pause_s": "0",
    }
    tag = f"{traffic}-s{seed}-{variant}"
    started: list[subprocess.Popen[bytes]] = []
    outs: list[Path] = []
    nodes.down(lab)
    try:
        cc = {} if args.cc == "default" else {"congestion_control": args.cc}
        with (
            _daemon_extra(work, protocol, values),
            labrun.env_config(stacks.PROXY_EXTRA_ENV, work / "proxy-extra.yaml", cc),
        ):
            nodes.up(SHIPPED_SCENARIOS / "rwp-50.yaml", name=lab, overrides=overrides, timeout=180)
        for k, (kind, _src, dst) in enumerate(fl):
            if kind == "tcp":
                out = work / f"{tag}-recv{k}.json"
                out.unlink(missing_ok=True)
                outs.append(out)
                port = str(TCP_PORT + k)
                started.append(_py(lab, dst, "manetkit.bench.flap", "recv", "--port", port,
                                 "--out", str(out)))  # fmt: skip
        time.sleep(1.0)
        for k, (kind, src, dst) in enumerate(fl):
            if kind == "tcp":
                started.append(_py(lab, src, "manetkit.bench.flap", "send", "--addr", addr(dst),
                                 "--port", str(TCP_PORT + k), "--out",
                                 str(work / f"{tag}-send{k}.json")))  # fmt: skip
            else:
                started.append(_py(lab, src, "manetkit.bench.smr", "cbr", addr(dst),
                                 str(CBR_PORT + k)))  # fmt: skip
        time.sleep(args.warmup)
        s0 = statuses(lab)
        t0 = time.monotonic()
        time.sleep(max(0.0, t0 + args.duration - time.monotonic()))
        t1 = time.monotonic()
        s1 = statuses(lab)
        c0, c1 = counters(s0), counters(s1)
        retrans = [0, 0]
        leg_resumes = 0
        for k, (kind, src, dst) in enumerate(fl):
            if kind != "tcp":
                continue
            try:
                st = request(proxy_socket(lab, f"n{src}"), {"cmd": "status"}, timeout=5)
                port, resumes = mesh_port(st["status"], addr(dst))
            except (OSError, ValueError, KeyError):
                port, resumes = None, 0
            leg_resumes += resumes
            if port is None:  # no leg now (reconnecting, or the proxy is gone)
                (work / f"{tag}-ss{k}.txt").write_text("no mesh leg in the proxy's status\n")
                continue
            ss, got = mesh_leg_retrans(netns_name(lab, f"n{src}"), addr(dst), port)
            (work / f"{tag}-ss{k}.txt").write_text(ss)  # what the ratio was read from
            if got is not None:
                retrans[0] += got[0]
                retrans[1] += got[1]
    finally:
        procs.stop_all(started, grace=10)
        nodes.down(lab)
    window = t1 - t0
    kbps = [flap.received_kbps(out, t0, t1) for out in outs]
    delta = {k: c1.get(k, 0) - c0.get(k, 0) for k in set(c0) | set(c1)}
    control = sum(delta.get(k, 0) for k in CONTROL)
    delivered = delta.get("data-delivered", 0)
    return {
        "variant": variant,
        "traffic": traffic,
        "seed": seed,
        "flows": [{"kind": k, "src": f"n{s}", "dst": f"n{d}"} for k, s, d in fl],
        "window_s": round(window, 2),
        "tcp_kbps": [round(x, 1) for x in kbps],
        "mean_tcp_kbps": round(sum(kbps) / len(kbps), 1) if kbps else None,
        "retransmitted": retrans[0],
        "segments_sent": retrans[1],
        "retrans_ratio": round(retrans[0] / retrans[1], 4) if retrans[1] else None,
        "mesh_leg_resumes": leg_resumes,
        "control_packets": control,
        "data_delivered": delivered,
        "norm_overhead": round(control / delivered, 3) if delivered else None,
        "path_switches": delta.get("smr-switches", 0),
        "discoveries_avoided": delta.get("smr-discoveries-avoided", 0),
        "requests_sent": delta.get("requests-sent", 0),
        "request_ratelimited": delta.get("request-ratelimited", 0),
        "errors_ratelimited": delta.get("errors-ratelimited", 0),
        # Every daemon counter that moved in the window, summed over the nodes (what
        # the figures above are read from, and the causes behind them).
        "counters": {k: v for k, v in sorted(delta.items()) if v},
        "endpoints": endpoints(fl, s0, s1),
    }


def plot(runs: list[dict], variants: list[str], path: Path, title: str = "") -> Path | None:
    """Per traffic pattern: TCP throughput and control packets per delivered data
    packet of every run, seeds on the x axis, one bar per variant (None without
    matplotlib)."""
    plt = report.pyplot()
    traffics = list(dict.fromkeys(r["traffic"] for r in runs))
    fig, axes = plt.subplots(2, len(traffics), figsize=(4 + 3 * len(traffics), 6), squeeze=False)
    width = 0.8 / max(1, len(variants))
    for col, traffic in enumerate(traffics):
        rs = [r for r in runs if r["traffic"] == traffic]
        seeds = sorted({r["seed"] for r in rs})
        for row, (key, label) in enumerate(
            (("mean_tcp_kbps", "TCP kbit/s"), ("norm_overhead", "control / data delivered"))
        ):
            ax = axes[row][col]
            for j, v in enumerate(variants):
                ys = [
                    next((r[key] for r in rs if r["variant"] == v and r["seed"] == s), None)
                    for s in seeds
                ]
                xs = [i + (j - (len(variants) - 1) / 2) * width for i in range(len(seeds))]
                ax.bar(xs, [y if y is not None else 0 for y in ys], width, label=v)
            ax.set_xticks(range(len(seeds)), [f"seed {s}" for s in seeds])
            ax.set_ylabel(label)
            ax.grid(True, axis="y", alpha=0.3)
            if row == 0:
                ax.set_title(f"{traffic}{': ' + title if title else ''}")
    axes[0][0].legend(fontsize=8)
    return report.save_figure(fig, path)


def run(args: argparse.Namespace) -> int:
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    traffics = [t.strip() for t in args.traffic.split(",") if t.strip()]
    seeds = [int(s) for s in str(args.seeds).split(",") if s.strip()]
    for v in variants:
        if v not in VARIANTS:
            raise UserError(f"--variants: {v!r} is not one of {', '.join(VARIANTS)}")
    for t in traffics:
        if t not in TRAFFIC:
            raise UserError(f"--traffic: {t!r} is not one of {', '.join(TRAFFIC)}")
    work = Path(args.out) / "smr-runs"
    work.mkdir(parents=True, exist_ok=True)
    runs = []
    for traffic in traffics:
        for seed in seeds:
            for v in variants:
                with labrun.locked(args.lock):
                    r = run_one(v, traffic, seed, args, work)
                runs.append(r)
                print(json.dumps(r), flush=True)
    table = Table(title=f"TCP over DSR and SMR, rwp-50, 0-{args.speed:g} m/s, fixed-RTO")
    for col in ("traffic", "variant", "seeds", "TCP kbit/s", "x DSR", "retrans ratio",
                "ctl/data", "switches", "avoided"):  # fmt: skip
        table.add_column(col)
    summary = []
    for traffic in traffics:
        base = report.mean([r["mean_tcp_kbps"] for r in runs if r["traffic"] == traffic
                      and r["variant"] == "dsr"])  # fmt: skip
        for v in variants:
            rs = [r for r in runs if r["traffic"] == traffic and r["variant"] == v]
            kb = report.mean([r["mean_tcp_kbps"] for r in rs])
            row = {
                "traffic": traffic,
                "variant": v,
                "seeds": [r["seed"] for r in rs],
                "mean_tcp_kbps": kb,
                "vs_dsr": kb / base if kb is not None and base else None,
                "retrans_ratio": report.mean([r["retrans_ratio"] for r in rs]),
                "norm_overhead": report.mean([r["norm_overhead"] for r in rs]),
                "path_switches": sum(r["path_switches"] for r in rs),
                "discoveries_avoided": sum(r["discoveries_avoided"] for r in rs),
            }
            summary.append(row)

            table.add_row(
                traffic, v, ",".join(map(str, row["seeds"])), report.cell(kb, ".1f"),
                report.cell(row["vs_dsr"], ".2f"), report.cell(row["retrans_ratio"], ".3f"),
                report.cell(row["norm_overhead"], ".2f"), str(row["path_switches"]),
                str(row["discoveries_avoided"]),
            )  # fmt: skip
    report.show(
        table,
        f"window {args.duration:g} s after {args.warmup:g} s warm-up; means over seeds; "
        "x DSR = mean TCP throughput / DSR's in the same run",
    )
    plot(runs, variants, Path(args.out) / "smr.png", f"rwp-50, 0-{args.speed:g} m/s")
    report.write(
        args.out,
        "smr",
        {"settings": report.settings(args),
         "summary": summary, "runs": runs},
    )  # fmt: skip
    return 0


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variants", default=",".join(VARIANTS), help="dsr,concurrent,...")
    parser.add_argument("--traffic", default="1tcp", help=f"comma-separated: {','.join(TRAFFIC)}")
    parser.add_argument("--seeds", default="1", help="comma-separated seeds (1)")
    parser.add_argument("--speed", type=float, default=30.0, help="max speed, m/s (30)")
    parser.add_argument("--duration", type=float, default=60.0, help="measured seconds (60)")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds before it (10)")
    parser.add_argument(
        "--cc",
        default="reno",
        help="the mesh leg's TCP congestion control (reno: Lim/Xu/Gerla III-C's TCP Reno; "
        "default: the kernel's, often bbr)",
    )
    parser.add_argument("--lock", default=None, help="flock this file around each run")
    parser.set_defaults(func=run)


def cbr(dst: str, port: int, size: int = CBR_BYTES, pps: float = CBR_PPS) -> None:
    """A CBR/UDP source: ``size``-byte datagrams at ``pps`` until killed."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = b"\0" * size
    t = time.monotonic()
    while True:
        with contextlib.suppress(OSError):
            s.sendto(payload, (dst, port))
        t += 1 / pps
        time.sleep(max(0.0, t - time.monotonic()))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "cbr":
        cbr(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit("usage: python -m manetkit.bench.smr cbr DST PORT")
