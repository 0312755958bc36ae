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
a source rediscovered once both paths broke; dsr-rediscover is DSR with
``rediscover_on_break``, docs/dsr.md; dsr-first is DSR with ``target_replies: first``;
backup1-wait300 is backup1 with ``reply_wait_ms: 300``) on a fresh lab with the same mobility and
flows. The window of ``--duration`` s opens at medium time ``--window-start`` (the
medium's mobility clock, not the wall clock after the lab came up: same seed, same
movement in every variant's window; ``window_medium``, ``window_late_s`` in the run
JSON), ``--warmup`` s after the traffic started, and measures:

* throughput: bytes each TCP receiver's application got in the window / its length
  (kbit/s; the mean over the TCP flows). The senders (:func:`send_stream`) dial again
  1 s after a reset or a failed connect (the fixed-RTO proxy resets a connection after
  ``partition_timeout``), so a flow that lost its connection once still counts for the
  rest of the window (``tcp_reconnects`` per flow, ``reconnects`` per run);
* expected throughput (Holland & Vaidya eq. 3.1, ``manetkit.bench.expected``): per
  TCP flow, from the medium's ground-truth graph over the window (kept beside the runs,
  ``*-ground-truth.jsonl``) and T_i (``--chain-table``), measured / expected, and per
  variant the ceiling: mean expected / DSR's mean throughput, the most any variant could
  gain over DSR on those runs (T_i is one flow alone: with 5tcp an upper bound);
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
import errno
import json
import os
import random
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from manetkit import procs
from manetkit.bench import expected, flap, labrun, report
from manetkit.daemon.engines.base import CONTROL_COUNTERS
from manetkit.errors import UserError
from manetkit.jsonlines import request
from manetkit.lab import nodes, stacks
from manetkit.lab.medium.groundtruth import read_log
from manetkit.lab.scenario import SHIPPED_SCENARIOS
from manetkit.paths import daemon_socket, ground_truth_log, netns_name, proxy_socket

VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "dsr": ("dsr", {}),
    "concurrent": ("smr", {"mode": "concurrent"}),
    "backup1": ("smr", {"mode": "backup1"}),
    "backup2": ("smr", {"mode": "backup2"}),
    # SMR before a source rediscovered once both paths broke (it kept to DSR's cache).
    "backup1-cache": ("smr", {"mode": "backup1", "after_all_broken": "cache"}),
    # DSR asking again at once when its own packet loses its route (docs/dsr.md; off by
    # default): the stale-cache stall of bench atra's rwp-30 seed 2 (docs/atra.md).
    "dsr-rediscover": ("dsr", {"rediscover_on_break": True}),
    # DSR whose target answers only the first copy of a request: one route per
    # discovery, the single-path baseline the backup idea is about (docs/smr.md).
    "dsr-first": ("dsr", {"target_replies": "first"}),
    # backup1 choosing its backup after a longer wait: at 100 ms about half the copies
    # of a request reach the destination after it (docs/smr.md, "The destination's wait").
    "backup1-wait300": ("smr", {"mode": "backup1", "reply_wait_ms": 300}),
}
TRAFFIC: dict[str, tuple[int, int]] = {"1tcp": (1, 0), "1tcp4cbr": (1, 4), "5tcp": (5, 0)}
NODES = 50
TCP_PORT = 5400
CBR_PORT = 5500
CBR_BYTES, CBR_PPS = 512, 4.0
# The TCP sender's pause after a failed connect or a broken connection before it dials
# again (manetkit.experiment.bulk restarts iperf3 as often, RETRY_S = 1 s).
RETRY_S = 1.0
CONNECT_TIMEOUT_S = 30.0
# Medium seconds at which the window opens (--window-start): 50 nodes' namespaces,
# daemons and proxies were up at medium 38-48 s on this 2-core machine (lab_up_s), at
# most ~57 s in earlier runs (docs/results/bench-smr-1tcp4cbr/rediscover opened its
# windows at 60-68 s, 11 s and a status poll after), so with the 10 s warm-up the
# traffic starts at 70 s.
WINDOW_START_S = 80.0
# Control packets in the daemons' counters (every engine's names, disjoint).
CONTROL = CONTROL_COUNTERS


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


def flows_expected(
    fl: list[tuple[str, int, int]],
    kbps: list[float],
    graph: list[dict[str, Any]],
    w0: float,
    w1: float,
    table: dict[int, float],
) -> dict[str, Any]:
    """A run's TCP flows (``fl``, their measured ``kbps`` in order) scored against
    Holland & Vaidya's expected throughput (eq. 3.1, bench/expected.py) of each pair
    over the window ``[w0, w1]`` (Unix time) of the medium's ground-truth ``graph``.
    T_i (``table``) is one flow alone on a static chain, so with several flows (5tcp) or
    CBR beside it, each flow's expected is an upper bound it shares the channel under."""
    exp = [
        expected.expected_for_pair(graph, f"n{src}", f"n{dst}", w0, w1, table)
        for kind, src, dst in fl
        if kind == "tcp"
    ]
    per = [e["expected_kbps"] for e in exp]
    mean_kb = sum(kbps) / len(kbps) if kbps else None
    mean = sum(per) / len(per) if per and all(e is not None for e in per) else None
    return {
        "tcp_expected_kbps": per,
        "mean_expected_kbps": round(mean, 1) if mean is not None else None,
        "tcp_measured_over_expected": [
            expected.ratio(k, e) for k, e in zip(kbps, per, strict=True)
        ],
        "measured_over_expected": expected.ratio(mean_kb, mean),
        "expected": exp,
    }


def sender_result(path: Path) -> dict[str, Any]:
    """A :func:`send_stream` ``--out`` file as the run reports it: ``reconnects``
    (connect attempts after the first) and ``errors`` by errno name; a sender that wrote
    nothing (killed, or never started) counts none."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"reconnects": 0, "errors": {"no sender report": 1}}
    return {"reconnects": max(0, int(doc.get("attempts", 1)) - 1), "errors": doc.get("errors", {})}


def _py(lab: str, node: int, module: str, *args: str) -> subprocess.Popen[bytes]:
    return labrun.ns_python(lab, f"n{node}", module, *args, stderr=subprocess.DEVNULL)


def _daemon_extra(work: Path, variant: str) -> contextlib.AbstractContextManager[None]:
    """MANETKIT_LAB_DAEMON_CONFIG for this variant while the lab comes up (the file is
    named by the variant: two variants of one protocol or mode differ in it)."""
    protocol, values = VARIANTS[variant]
    path = work / f"daemon-{variant}.yaml"
    return labrun.env_config(stacks.EXTRA_ENV, path, {protocol: values} if values else {})


def run_one(variant: str, traffic: str, seed: int, args: argparse.Namespace, work: Path) -> dict:
    protocol = VARIANTS[variant][0]
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
    sends: list[Path] = []
    truth = work / f"{tag}-ground-truth.jsonl"
    truth.unlink(missing_ok=True)
    nodes.down(lab)
    try:
        cc = {} if args.cc == "default" else {"congestion_control": args.cc}
        with (
            _daemon_extra(work, variant),
            labrun.env_config(stacks.PROXY_EXTRA_ENV, work / "proxy-extra.yaml", cc),
        ):
            nodes.up(SHIPPED_SCENARIOS / "rwp-50.yaml", name=lab, overrides=overrides, timeout=180)
        win = labrun.MediumWindow(lab, tag, args)
        for k, (kind, _src, dst) in enumerate(fl):
            if kind == "tcp":
                out = work / f"{tag}-recv{k}.json"
                out.unlink(missing_ok=True)
                outs.append(out)
                port = str(TCP_PORT + k)
                started.append(_py(lab, dst, "manetkit.bench.smr", "recv", "--port", port,
                                 "--out", str(out)))  # fmt: skip
        receivers = time.monotonic()
        # Anchored to the medium's clock (its mobility): the same seed is the same
        # movement in every variant's window, however long the lab took to come up.
        win.traffic()
        time.sleep(max(0.0, receivers + 1.0 - time.monotonic()))  # receivers listening
        for k, (kind, src, dst) in enumerate(fl):
            if kind == "tcp":
                send = work / f"{tag}-send{k}.json"
                send.unlink(missing_ok=True)
                sends.append(send)
                started.append(_py(lab, src, "manetkit.bench.smr", "send", "--addr", addr(dst),
                                 "--port", str(TCP_PORT + k), "--out", str(send)))  # fmt: skip
            else:
                started.append(_py(lab, src, "manetkit.bench.cbr", "send", addr(dst),
                                 str(CBR_PORT + k), "--bytes", str(CBR_BYTES),
                                 "--pps", str(CBR_PPS)))  # fmt: skip
        t0, w0 = win.open()
        s0 = statuses(lab)
        t1, w1 = win.close()
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
        with contextlib.suppress(OSError):  # the medium's graph log goes with the lab
            shutil.copyfile(ground_truth_log(lab), truth)
        nodes.down(lab)
    window = t1 - t0
    kbps = [flap.received_kbps(out, t0, t1) for out in outs]
    senders = [sender_result(x) for x in sends]
    graph: list[dict[str, Any]] = []
    with contextlib.suppress(OSError, ValueError):
        graph = read_log(truth)
    mean_kbps = round(sum(kbps) / len(kbps), 1) if kbps else None
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
        "mean_tcp_kbps": mean_kbps,
        **flows_expected(fl, kbps, graph, w0, w1, args.chain_table),
        "window_wall": [round(w0, 3), round(w1, 3)],
        # the window in medium time (the mobility's clock), and how late it opened
        **win.record(),
        # Each TCP sender dials again after a reset or a failed connect (send_stream):
        # connects after the first attempt, per flow, and what ended each connection.
        "tcp_reconnects": [x["reconnects"] for x in senders],
        "reconnects": sum(x["reconnects"] for x in senders),
        "tcp_sender_errors": [x["errors"] for x in senders],
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
                if row == 0:  # each run's expected throughput (eq. 3.1)
                    es = [next((r.get("mean_expected_kbps") for r in rs
                                if r["variant"] == v and r["seed"] == s), None)
                          for s in seeds]  # fmt: skip
                    ax.plot(xs, [e if e is not None else float("nan") for e in es], "k_",
                            markersize=10, label="expected (eq. 3.1)" if j == 0 else None)  # fmt: skip
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
    labrun.check_window(args)
    work = Path(args.out) / "smr-runs"
    work.mkdir(parents=True, exist_ok=True)
    runs = []
    for traffic in traffics:
        for seed in seeds:
            for v in variants:
                with labrun.term_as_interrupt(), labrun.locked(args.lock):
                    r = run_one(v, traffic, seed, args, work)
                runs.append(r)
                print(json.dumps(r), flush=True)
    table = Table(title=f"TCP over DSR and SMR, rwp-50, 0-{args.speed:g} m/s, fixed-RTO")
    for col in ("traffic", "variant", "seeds", "TCP kbit/s", "x DSR", "expected", "meas/exp",
                "ceiling x DSR", "retrans ratio", "ctl/data", "switches", "avoided",
                "reconnects"):  # fmt: skip
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
                "reconnects": sum(r.get("reconnects", 0) for r in rs),
                **expected.summary(rs, base, "mean_tcp_kbps", "mean_expected_kbps"),
            }
            summary.append(row)

            table.add_row(
                traffic, v, ",".join(map(str, row["seeds"])), report.cell(kb, ".1f"),
                report.cell(row["vs_dsr"], ".2f"), report.cell(row["mean_expected_kbps"], ".1f"),
                report.cell(row["measured_over_expected"], ".2f"),
                report.cell(row["ceiling_vs_dsr"], ".2f"), report.cell(row["retrans_ratio"], ".3f"),
                report.cell(row["norm_overhead"], ".2f"), str(row["path_switches"]),
                str(row["discoveries_avoided"]), str(row["reconnects"]),
            )  # fmt: skip
    report.show(
        table,
        f"window {args.duration:g} s from medium t = {args.window_start:g} s after "
        f"{args.warmup:g} s warm-up; means over seeds; "
        "x DSR = mean TCP throughput / DSR's in the same run; expected = Holland & Vaidya "
        "eq. 3.1 per TCP flow from the medium's graph (mean); meas/exp = mean over mean; "
        "ceiling x DSR = mean expected / DSR's mean kbit/s (the most a variant could gain)",
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
    labrun.add_window_argument(parser, WINDOW_START_S, "rwp-50 is up by 38-57 s here")
    parser.add_argument(
        "--cc",
        default="reno",
        help="the mesh leg's TCP congestion control (reno: Lim/Xu/Gerla III-C's TCP Reno; "
        "default: the kernel's, often bbr)",
    )
    parser.add_argument("--lock", default=None, help="flock this file around each run")
    expected.add_argument(parser)
    parser.set_defaults(func=run)


def _error_name(exc: OSError) -> str:
    """``ECONNRESET``, ``ENETUNREACH``...; the exception's class when it has no errno
    (a connect timeout)."""
    return errno.errorcode.get(exc.errno or -1, type(exc).__name__)


def send_stream(
    addr: str,
    port: int,
    out: Path,
    retry_s: float = RETRY_S,
    connect_timeout: float = CONNECT_TIMEOUT_S,
) -> None:
    """A bulk TCP sender that keeps sending for the whole window: connect, write until
    the connection fails, then ``retry_s`` later connect again, until SIGTERM.

    A flow whose connection the fixed-RTO proxy reset after ``partition_timeout``
    (docs/proxy.md; in the 5tcp run three of fifteen flows per variant) or whose connect
    failed (ENETUNREACH, refused, timed out) is dialled again, as
    ``manetkit.experiment.bulk`` starts iperf3 again, so the rest of the window still
    counts what the network can carry rather than a 0 from the first reset. The time
    until the flow is back counts against the variant, since throughput is what the
    receiver got over the window. ``OUT`` (JSON, written on SIGTERM): bytes written,
    connect ``attempts`` (``attempts - 1`` are the reconnects), ``connects`` that
    succeeded, and each error by errno name; each error is also a line on stderr."""
    signal.signal(signal.SIGTERM, flap.stop_on_term)
    res: dict[str, Any] = {
        "sent": 0,
        "attempts": 0,
        "connects": 0,
        "errors": {},
        "last_error": None,
    }
    block = memoryview(flap.stream_block(0))
    try:
        while True:
            res["attempts"] += 1
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.settimeout(connect_timeout)
                s.connect((addr, port))
                s.settimeout(None)
                res["connects"] += 1
                while True:
                    res["sent"] += s.send(block)
            except OSError as exc:
                name = _error_name(exc)
                res["errors"][name] = res["errors"].get(name, 0) + 1
                res["last_error"] = repr(exc)
                print(f"send: {name} (connects {res['connects']}), again in {retry_s:g} s",
                      file=sys.stderr, flush=True)  # fmt: skip
            finally:
                s.close()
            time.sleep(retry_s)
    except flap.Stop:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out.write_text(json.dumps(res))
    os._exit(0)  # at once: what is still queued does not count, the window is over


def recv_streams(port: int, out: Path) -> None:
    """Accept every connection to ``port`` and read them all until SIGTERM, recording
    (CLOCK_MONOTONIC time, total bytes over all connections) per read: the samples
    ``flap.received_kbps`` reads. A sender's new connection may arrive while its old one
    still hangs here (the peer proxy has not yet given up on it), so all are read at
    once. ``OUT`` (JSON, written on SIGTERM) adds the connections accepted, how many
    ended in EOF, and each receive error by errno name."""
    signal.signal(signal.SIGTERM, flap.stop_on_term)
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("0.0.0.0", port))
    lsock.listen(8)
    lsock.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ)
    res: dict[str, Any] = {"bytes": 0, "samples": [], "connections": 0, "eofs": 0, "errors": {}}
    buf = bytearray(1 << 16)
    try:
        while True:
            for key, _ in sel.select():
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is lsock:
                    with contextlib.suppress(BlockingIOError):
                        conn, _ = lsock.accept()
                        conn.setblocking(False)
                        sel.register(conn, selectors.EVENT_READ)
                        res["connections"] += 1
                    continue
                try:
                    n = sock.recv_into(buf)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    name = _error_name(exc)
                    res["errors"][name] = res["errors"].get(name, 0) + 1
                    n = -1
                if n > 0:
                    res["bytes"] += n
                    res["samples"].append((round(time.monotonic(), 4), res["bytes"]))
                    continue
                res["eofs"] += n == 0
                sel.unregister(sock)
                sock.close()
    except flap.Stop:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out.write_text(json.dumps(res))
    os._exit(0)


def _main(argv: list[str]) -> None:
    """``python -m manetkit.bench.smr send ... | recv ...``: the TCP flows' ends, run
    inside the lab's nodes (the CBR flows' are ``manetkit.bench.cbr``'s)."""
    p = argparse.ArgumentParser(prog="manetkit.bench.smr")
    sub = p.add_subparsers(dest="role", required=True)
    sd = sub.add_parser("send")
    sd.add_argument("--addr", required=True)
    sd.add_argument("--port", type=int, required=True)
    sd.add_argument("--out", type=Path, required=True)
    sd.add_argument("--retry", type=float, default=RETRY_S, help="s between dials (1)")
    rv = sub.add_parser("recv")
    rv.add_argument("--port", type=int, required=True)
    rv.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    if a.role == "send":
        send_stream(a.addr, a.port, a.out, retry_s=a.retry)
    else:
        recv_streams(a.port, a.out)


if __name__ == "__main__":
    _main(sys.argv[1:])
