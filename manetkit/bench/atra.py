"""``manetkit bench atra``: TCP over DSR with and without Atra and ELFN, side by side.

Anantharaman et al.'s one-connection experiment (section IV-B, Table II) on Holland &
Vaidya's pattern: 30 nodes in 1500 x 300 m (configs/scenarios/rwp-30.yaml), random
waypoint, zero pause, speeds 0.9v..1.1v for v in ``--speeds`` (1, 10, 20 m/s), 2 Mbit/s
802.11 with RTS/CTS, one bulk TCP flow between a seeded random pair. Each (speed, seed)
runs every variant on a fresh lab with the same mobility and flow:

* ``dsr``: the default stack (no proxy: the hosts' TCP end to end);
* ``dsr+elfn``: every node runs ``manetkit proxy`` in ``elfn`` mode (Holland & Vaidya);
* ``dsr+atra``: ``atra: {rfp, pre, srp}`` on in every daemon (docs/atra.md);
* ``dsr+atra+elfn``: both;
* ``dsr+rfp``, ``dsr+pre``, ``dsr+srp``: one mechanism each (which one costs or gains).

Measured over ``--duration`` s from medium time ``--window-start`` (the medium's
mobility clock, as ``bench smr``: same seed, same movement in every variant's window),
``--warmup`` s after the flow started: the TCP receiver's goodput
(kbit/s); the daemons' Atra counters summed (predictions, hits and false alarms as the
engines score them, breaks not predicted, predicted / proactive errors sent, pinned
flows); the TCP retransmission ratio of the connection that crosses the mesh (the
application's own without a proxy, the source proxy's mesh leg with one: ``ss -tin`` at
the end of the window, as ``bench smr``); routing control packets per delivered data
packet (``bench smr``'s ``CONTROL`` counters); and every ``predicted-failure`` event of
every daemon scored against the medium's ground truth (its graph log): a prediction is
a hit when that link really left the graph within twice the look-ahead, precision =
hits / predictions.

Each run is also scored against what the medium allowed: Holland & Vaidya's expected
throughput (eq. 3.1, ``manetkit.bench.expected``) of the flow's pair over the window,
from the run's ground-truth graph (T_i: ``--chain-table``, default the lab's ``bench
chain``). Per variant and speed: mean expected, measured / expected, and the ceiling
expected / DSR, the most any variant could gain over default DSR on those runs. The
local link breaks no prediction covered are split by the graph at the break: link still
in range (802.11 retries failed: no power trend foresees it) or gone (a miss).

The full matrix (the issue's: three seeds, 120 s runs)::

    manetkit bench atra --speeds 1,10,20 --seeds 1,2,3 --duration 110 --warmup 10

and with AODV (Atra's RFP on RFC 3561's RERR/RREQ; docs/atra.md)::

    manetkit bench atra --variants aodv,aodv+elfn,aodv+atra,aodv+atra+elfn --seeds 1,2,3 --duration 110

``--lock PATH`` takes an flock on PATH around each run (one lab at a time on a shared
machine, without holding the lock for the whole matrix). Everything runs in real time:
30 daemons, radios and the medium share this machine's cores.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from manetkit import jsonlines, paths, procs
from manetkit.bench import expected, flap, labrun, report, smr
from manetkit.bench.smr import CONTROL, addr, flows
from manetkit.errors import UserError
from manetkit.jsonlines import request
from manetkit.lab import nodes, stacks
from manetkit.lab.medium.groundtruth import read_log
from manetkit.lab.scenario import SHIPPED_SCENARIOS
from manetkit.paths import daemon_socket, netns_name, proxy_socket

NODES = 30
TCP_PORT = 5600
ALL = ("rfp", "pre", "srp")
# name -> (stack, Atra mechanisms on, proxy); dsr+rfp/pre/srp take Atra apart
VARIANTS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "dsr": ("dsr", (), "none"),
    "dsr+elfn": ("dsr", (), "elfn"),
    "dsr+atra": ("dsr", ALL, "none"),
    "dsr+atra+elfn": ("dsr", ALL, "elfn"),
    "dsr+rfp": ("dsr", ("rfp",), "none"),
    "dsr+pre": ("dsr", ("pre",), "none"),
    "dsr+srp": ("dsr", ("srp",), "none"),
    "aodv": ("aodv", (), "none"),
    "aodv+elfn": ("aodv", (), "elfn"),
    "aodv+atra": ("aodv", ALL, "none"),
    "aodv+atra+elfn": ("aodv", ALL, "elfn"),
}
DEFAULT_VARIANTS = "dsr,dsr+elfn,dsr+atra,dsr+atra+elfn"
# Medium seconds at which the window opens (--window-start): 30 nodes were up at medium
# 16.5-19.1 s on this 2-core machine (``lab_up_s`` in the run JSON, 2 runs; bench smr's
# 50 by 38-57 s), so with the 10 s warm-up the traffic starts at 35 s.
WINDOW_START_S = 45.0
COUNTERS = (
    "predictions",
    "hits",
    "false_alarms",
    "breaks_not_predicted",
    "predicted_errors_sent",
    "proactive_errors_sent",
    "predicted_switches",
    "rreq_suppressed",
    "pinned_acks",
)


def _node(address: str) -> str:
    return "n" + address.rsplit(".", 1)[1]


class Predictions:
    """``predicted-failure`` events of every daemon: (wall time, node, neighbour node) in
    ``seen``; and in ``breaks`` the local link breaks the daemons reported (a
    ``route-down`` of their own link, ``broken_link`` = (this node, neighbour), not
    predicted: a transmission failed or link sensing lost the neighbour), as (wall time,
    node, neighbour node, reason), one per route that broke."""

    def __init__(self, lab: str) -> None:
        self.seen: list[tuple[float, str, str]] = []
        self.breaks: list[tuple[float, str, str, str]] = []
        self._subs: list[jsonlines.Subscription] = []
        for i in range(1, NODES + 1):
            try:
                sub = jsonlines.subscribe(daemon_socket(lab, f"n{i}")).connect()
            except OSError:
                continue
            self._subs.append(sub)
            threading.Thread(target=self._read, args=(sub, f"n{i}"), daemon=True).start()

    def _read(self, sub: jsonlines.Subscription, node: str) -> None:
        with contextlib.suppress(OSError, ValueError, KeyError):
            for ev in sub:
                if ev.get("event") == "predicted-failure":
                    self.seen.append((float(ev["time"]), node, _node(ev["neighbour"])))
                elif ev.get("event") == "route-down" and not ev.get("predicted"):
                    link = ev.get("broken_link") or ()
                    if len(link) == 2 and _node(link[0]) == node:
                        brk = (float(ev["time"]), node, _node(link[1]), str(ev["reason"]))
                        self.breaks.append(brk)

    def close(self) -> None:
        for sub in self._subs:
            sub.close()


def score(
    preds: list[tuple[float, str, str]], graph: list[dict[str, Any]], horizon_s: float
) -> dict[str, Any]:
    """Ground-truth precision: a prediction is a hit when its link left the medium's graph
    within ``horizon_s`` (twice the look-ahead) after it; a link predicted from both ends
    counts once per end. A false alarm whose link left the graph later in the log is
    counted in ``false_alarms_lost_later`` with that delay in ``late_losses_s`` (a few
    seconds: predicted too early; much longer: the neighbours turned), else in
    ``false_alarms_never_lost`` (the link lasted to the end of the log)."""
    hits = 0
    leads: list[float] = []
    late: list[float] = []
    snaps = [(g["wall"], {frozenset(e) for e in g["edges"]}) for g in graph]
    for t, a, b in preds:
        edge = frozenset((a, b))
        gone = next((w for w, es in snaps if t < w and edge not in es), None)
        if gone is not None and gone <= t + horizon_s:
            hits += 1
            leads.append(gone - t)
        elif gone is not None:
            late.append(round(gone - t, 2))
    n = len(preds)
    return {
        "predictions": n,
        "hits": hits,
        "false_alarms": n - hits,
        "precision": round(hits / n, 3) if n else None,
        "mean_lead_s": round(sum(leads) / len(leads), 2) if leads else None,
        "false_alarms_lost_later": len(late),
        "false_alarms_never_lost": n - hits - len(late),
        "late_losses_s": sorted(late),
    }


def classify_breaks(
    breaks: list[tuple[float, str, str, str]],
    preds: list[tuple[float, str, str]],
    graph: list[dict[str, Any]],
    horizon_s: float,
    merge_s: float = 1.0,
) -> dict[str, Any]:
    """The local link breaks no prediction covered, against the medium's ground truth.

    A break (:class:`Predictions`' ``breaks``) is one per node and neighbour: reports of
    the same link by the same node within ``merge_s`` of the previous one are merged
    (one route-down per route through it). A break is *predicted* when that node
    predicted that neighbour's failure within ``horizon_s`` before it; the others are
    what RFP missed, split by the graph at the break: ``in_graph`` when the link was
    still in the medium's graph (the receiver was in range: 802.11 retries failed under
    contention, which no power trend can foresee), else ``gone`` (the neighbour had left
    range: a miss of the predictor). By reason (``tx-failed``, ``link-down``, ...) too.

    Unlike the engines' ``breaks_not_predicted``, a break here need not have been of a
    link a route used in the last ``pre_window_s``: any link a route went over."""
    snaps = [(g["wall"], {frozenset(e) for e in g["edges"]}) for g in graph]
    merged: list[tuple[float, str, str, str]] = []
    last: dict[tuple[str, str], float] = {}
    for t, node, nb, reason in sorted(breaks):
        prev = last.get((node, nb))
        last[(node, nb)] = t
        if prev is None or t - prev > merge_s:
            merged.append((t, node, nb, reason))
    out: dict[str, Any] = {"breaks": len(merged), "predicted": 0, "in_graph": 0, "gone": 0,
                           "unknown": 0, "by_reason": {}}  # fmt: skip
    for t, node, nb, reason in merged:
        if any(a == node and b == nb and t - horizon_s <= tp <= t for tp, a, b in preds):
            out["predicted"] += 1
            continue
        before = [es for w, es in snaps if w <= t]
        kind = (
            "unknown"
            if not before
            else "in_graph"
            if frozenset((node, nb)) in before[-1]
            else "gone"
        )
        out[kind] += 1
        by = out["by_reason"].setdefault(reason, {"in_graph": 0, "gone": 0, "unknown": 0})
        by[kind] += 1
    return out


def engine_statuses(lab: str) -> dict[int, dict[str, Any]]:
    """Every daemon's engine status by node number (a daemon that does not answer is
    left out)."""
    out: dict[int, dict[str, Any]] = {}
    for i in range(1, NODES + 1):
        try:
            st = request(daemon_socket(lab, f"n{i}"), {"cmd": "status"}, timeout=5)["status"]
            out[i] = st["engine"]
        except (OSError, ValueError, KeyError):
            continue
    return out


def atra_counters(engines: dict[int, dict[str, Any]]) -> dict[str, int]:
    """The engines' Atra counters (:data:`COUNTERS`), summed over the nodes."""
    total = dict.fromkeys(COUNTERS, 0)
    for eng in engines.values():
        at = eng.get("atra") or {}
        for k in COUNTERS:
            total[k] += int(at.get(k, 0))
    return total


def flow_retrans(lab: str, src: int, dst: int, proxy: str) -> tuple[str, tuple[int, int] | None]:
    """``ss -tin`` and (retransmitted, sent) data segments of the TCP connection that
    crosses the mesh from ``src``, read at the end of the window: without a proxy the
    application's own connection (to ``dst`` on :data:`TCP_PORT`); with one, the source
    proxy's mesh leg (to the peer proxy's ``peer_port``, as ``bench smr`` reads it)."""
    if proxy == "none":
        return smr.mesh_leg_retrans(netns_name(lab, f"n{src}"), addr(dst), TCP_PORT)
    try:
        st = request(proxy_socket(lab, f"n{src}"), {"cmd": "status"}, timeout=5)
        port, _ = smr.mesh_port(st["status"], addr(dst))
    except (OSError, ValueError, KeyError):
        port = None
    if port is None:
        return "no mesh leg in the proxy's status\n", None
    return smr.mesh_leg_retrans(netns_name(lab, f"n{src}"), addr(dst), port)


def _daemon_extra(work: Path, atra: tuple[str, ...]) -> contextlib.AbstractContextManager[None]:
    path = work / f"daemon-atra-{'-'.join(atra) or 'off'}.yaml"
    return labrun.env_config(
        stacks.EXTRA_ENV, path, {"atra": dict.fromkeys(atra, True)} if atra else {}
    )


def _py(lab: str, node: int, *args: str) -> subprocess.Popen[bytes]:
    return labrun.ns_python(lab, f"n{node}", *args, stderr=subprocess.DEVNULL)


def run_one(variant: str, speed: float, seed: int, args: argparse.Namespace, work: Path) -> dict:
    stack, atra, proxy = VARIANTS[variant]
    ((_, src, dst),) = flows(seed, 1, 0, n=NODES)
    lab = f"atrb{os.getpid() % 1000}"
    overrides = {
        "stack": stack,
        "proxy": proxy,
        "seed": str(seed),
        "mobility.speed": str(speed),
        "mobility.pause_s": "0",
    }
    tag = f"v{speed:g}-s{seed}-{variant}"
    out = work / f"{tag}-recv.json"
    out.unlink(missing_ok=True)
    started: list[subprocess.Popen[bytes]] = []
    preds: Predictions | None = None
    graph: list[dict[str, Any]] = []
    nodes.down(lab)
    try:
        with _daemon_extra(work, atra):
            nodes.up(SHIPPED_SCENARIOS / "rwp-30.yaml", name=lab, overrides=overrides, timeout=180)
        win = labrun.MediumWindow(lab, tag, args)  # same seed, same movement (bench smr)
        preds = Predictions(lab)
        started.append(_py(lab, dst, "manetkit.bench.flap", "recv", "--port", str(TCP_PORT),
                         "--out", str(out)))  # fmt: skip
        receivers = time.monotonic()
        win.traffic()
        time.sleep(max(0.0, receivers + 1.0 - time.monotonic()))  # receiver listening
        started.append(_py(lab, src, "manetkit.bench.flap", "send", "--addr", addr(dst),
                         "--port", str(TCP_PORT), "--out", str(work / f"{tag}-send.json")))  # fmt: skip
        t0, w0 = win.open()
        s0 = engine_statuses(lab)
        t1, w1 = win.close()
        s1 = engine_statuses(lab)
        ss, retrans = flow_retrans(lab, src, dst, proxy)
        (work / f"{tag}-ss.txt").write_text(ss)  # what the ratio was read from
        time.sleep(2 * args.lookahead)  # let the last predictions' links resolve
        with contextlib.suppress(OSError, ValueError):
            graph = read_log(paths.ground_truth_log(lab))
        (work / f"{tag}-ground-truth.jsonl").write_text(
            "".join(json.dumps(g, separators=(",", ":")) + "\n" for g in graph)
        )  # what the expected throughput and the precision were scored on
    finally:
        if preds is not None:
            preds.close()
        procs.stop_all(started, grace=10)
        nodes.down(lab)
    kbps = flap.received_kbps(out, t0, t1)
    c0, c1 = atra_counters(s0), atra_counters(s1)
    d0, d1 = smr.counters(s0), smr.counters(s1)
    delta = {k: d1.get(k, 0) - d0.get(k, 0) for k in set(d0) | set(d1)}
    control = sum(delta.get(k, 0) for k in CONTROL)
    delivered = delta.get("data-delivered", 0)
    window_preds = [p for p in (preds.seen if preds else []) if w0 <= p[0] <= w1]
    window_breaks = [b for b in (preds.breaks if preds else []) if w0 <= b[0] <= w1]
    exp = expected.expected_for_pair(graph, f"n{src}", f"n{dst}", w0, w1, args.chain_table)
    return {
        "variant": variant,
        "speed": speed,
        "seed": seed,
        "flow": {"src": f"n{src}", "dst": f"n{dst}"},
        "window_s": round(t1 - t0, 2),
        "window_wall": [round(w0, 3), round(w1, 3)],
        **win.record(),  # the window in medium time, and how late it opened
        "tcp_kbps": round(kbps, 1),
        # Holland & Vaidya eq. 3.1 on this run's ground truth (bench/expected.py)
        "expected_kbps": exp["expected_kbps"],
        "measured_over_expected": expected.ratio(kbps, exp["expected_kbps"]),
        "expected": exp,
        "engine": {k: c1.get(k, 0) - c0.get(k, 0) for k in COUNTERS},
        # TCP retransmissions / data segments sent on the connection crossing the mesh
        # (flow_retrans), and routing control packets per delivered data packet (bench
        # smr's CONTROL counters, summed over the nodes, in the window)
        "retransmitted": retrans[0] if retrans else None,
        "segments_sent": retrans[1] if retrans else None,
        "retrans_ratio": round(retrans[0] / retrans[1], 4) if retrans and retrans[1] else None,
        "control_packets": control,
        "data_delivered": delivered,
        "norm_overhead": round(control / delivered, 3) if delivered else None,
        "counters": {k: v for k, v in sorted(delta.items()) if v},
        "ground_truth": score(window_preds, graph, 2 * args.lookahead),
        # local link breaks no prediction covered: link still in the graph or gone
        "breaks": classify_breaks(
            window_breaks, preds.seen if preds else [], graph, 2 * args.lookahead
        ),
    }


def plot(
    summary: list[dict], speeds: list[float], path: Path, runs: list[dict] | None = None
) -> Path | None:
    """Mean goodput per variant against speed; with ``runs``, a second panel with every
    run's goodput per (speed, seed), variants side by side (how much the seeds differ)."""
    plt = report.pyplot()
    variants = list(dict.fromkeys(r["variant"] for r in summary))
    fig, axes = plt.subplots(1, 2 if runs else 1, figsize=(11 if runs else 6, 4), squeeze=False)
    ax = axes[0][0]
    for v in variants:
        ys = [next((r["mean_tcp_kbps"] for r in summary if r["variant"] == v
                    and r["speed"] == s), None) for s in speeds]  # fmt: skip
        if any(y is not None for y in ys):
            ax.plot(speeds, [y if y is not None else float("nan") for y in ys], "o-", label=v)
    exp = [report.mean([r.get("mean_expected_kbps") for r in summary if r["speed"] == s])
           for s in speeds]  # fmt: skip
    if any(y is not None for y in exp):
        ax.plot(speeds, [y if y is not None else float("nan") for y in exp], "kx--",
                label="expected (eq. 3.1)")  # fmt: skip
    ax.set_xlabel("mean speed (m/s)")
    ax.set_ylabel("TCP goodput (kbit/s)")
    ax.set_title("rwp-30, 1 TCP flow: DSR, ELFN, Atra (means)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    if runs:
        ax = axes[0][1]
        groups = list(dict.fromkeys((r["speed"], r["seed"]) for r in runs))
        width = 0.8 / max(len(variants), 1)
        for k, v in enumerate(variants):
            ys = [next((r["tcp_kbps"] for r in runs if r["variant"] == v
                        and (r["speed"], r["seed"]) == g), 0.0) for g in groups]  # fmt: skip
            ax.bar([i + k * width for i in range(len(groups))], ys, width, label=v)
            es = [next((r.get("expected_kbps") for r in runs if r["variant"] == v
                        and (r["speed"], r["seed"]) == g), None) for g in groups]  # fmt: skip
            ax.plot([i + k * width for i in range(len(groups))],
                    [e if e is not None else float("nan") for e in es], "k_", markersize=12,
                    label="expected (eq. 3.1)" if k == 0 else None)  # fmt: skip
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(groups))])
        ax.set_xticklabels([f"{sp:g} m/s\nseed {sd}" for sp, sd in groups])
        ax.set_ylabel("TCP goodput (kbit/s)")
        ax.set_title("every run (-: its expected throughput)")
        ax.legend(fontsize=7)
        ax.grid(True, axis="y", alpha=0.3)
    return report.save_figure(fig, path, dpi=120)


def run(args: argparse.Namespace) -> int:
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    speeds = [float(s) for s in str(args.speeds).split(",") if s.strip()]
    seeds = [int(s) for s in str(args.seeds).split(",") if s.strip()]
    for v in variants:
        if v not in VARIANTS:
            raise UserError(f"--variants: {v!r} is not one of {', '.join(VARIANTS)}")
    labrun.check_window(args)
    work = Path(args.out) / "atra-runs"
    work.mkdir(parents=True, exist_ok=True)
    runs = []
    for speed in speeds:
        for seed in seeds:
            for v in variants:
                with labrun.term_as_interrupt(), labrun.locked(args.lock):
                    r = run_one(v, speed, seed, args, work)
                runs.append(r)
                print(json.dumps(r), flush=True)
    table = Table(title="TCP over DSR with Atra / ELFN, rwp-30 (1500x300 m), 1 flow")
    for col in ("speed", "variant", "seeds", "TCP kbit/s", "x DSR", "expected",
                "meas/exp", "ceiling x DSR", "predictions",
                "precision (truth)", "engine hits/false", "missed", "PRE errors",
                "retrans ratio", "ctl/data", "unpredicted breaks in range/gone",
                "of which tx-failed"):  # fmt: skip
        table.add_column(col)
    summary = []
    for speed in speeds:
        base = report.mean([r["tcp_kbps"] for r in runs if r["speed"] == speed
                      and r["variant"] == "dsr"])  # fmt: skip
        for v in variants:
            rs = [r for r in runs if r["speed"] == speed and r["variant"] == v]
            kb = report.mean([r["tcp_kbps"] for r in rs])
            gt_p = sum(r["ground_truth"]["predictions"] for r in rs)
            gt_h = sum(r["ground_truth"]["hits"] for r in rs)
            eng = {k: sum(r["engine"][k] for r in rs) for k in COUNTERS}
            row = {
                "speed": speed,
                "variant": v,
                "seeds": [r["seed"] for r in rs],
                "mean_tcp_kbps": kb,
                "vs_dsr": kb / base if kb is not None and base else None,
                **expected.summary(rs, base),
                "predictions": gt_p,
                "ground_truth_hits": gt_h,
                "precision": gt_h / gt_p if gt_p else None,
                "engine": eng,
                "retrans_ratio": report.mean([r.get("retrans_ratio") for r in rs]),
                "norm_overhead": report.mean([r.get("norm_overhead") for r in rs]),
                "unpredicted_breaks": {
                    k: sum((r.get("breaks") or {}).get(k, 0) for r in rs)
                    for k in ("breaks", "predicted", "in_graph", "gone", "unknown")
                },
                # those a failed transmission reported (a packet was going over the link)
                "unpredicted_tx_failed": {
                    k: sum(
                        ((r.get("breaks") or {}).get("by_reason") or {})
                        .get("tx-failed", {})
                        .get(k, 0)
                        for r in rs
                    )
                    for k in ("in_graph", "gone")
                },
            }
            summary.append(row)

            table.add_row(
                f"{speed:g}", v, ",".join(map(str, row["seeds"])), report.cell(kb, ".1f"),
                report.cell(row["vs_dsr"], ".2f"), report.cell(row["mean_expected_kbps"], ".1f"),
                report.cell(row["measured_over_expected"], ".2f"),
                report.cell(row["ceiling_vs_dsr"], ".2f"), str(gt_p), report.cell(row["precision"], ".2f"),
                f"{eng['hits']}/{eng['false_alarms']}", str(eng["breaks_not_predicted"]),
                str(eng["proactive_errors_sent"]), report.cell(row["retrans_ratio"], ".3f"),
                report.cell(row["norm_overhead"], ".2f"),
                f"{row['unpredicted_breaks']['in_graph']}/{row['unpredicted_breaks']['gone']}",
                f"{row['unpredicted_tx_failed']['in_graph']}/{row['unpredicted_tx_failed']['gone']}",
            )  # fmt: skip
    report.show(
        table,
        f"window {args.duration:g} s from medium t = {args.window_start:g} s after "
        f"{args.warmup:g} s warm-up; means over seeds; "
        "x DSR = goodput / default DSR's in the same run; expected: Holland & Vaidya eq. 3.1 "
        "on the run's ground truth (T_i: --chain-table); meas/exp = mean kbit/s / mean "
        "expected; ceiling x DSR = mean expected / DSR's mean kbit/s (the most a variant "
        "could gain over DSR); precision (truth): predictions whose link left the medium's "
        "graph within 2x the look-ahead; unpredicted breaks: local link breaks (route-down "
        "events) with no prediction, the link still in the medium's graph / gone at the "
        "report; tx-failed: reported by a failed transmission (the others by link sensing, "
        "seconds after the neighbour fell silent)",
    )
    fig = plot(summary, speeds, Path(args.out) / "atra.png", runs)
    if fig is not None:
        report.console.print(f"written {fig}")
    report.write(
        args.out,
        "atra",
        {"settings": report.settings(args),
         "summary": summary, "runs": runs},
    )  # fmt: skip
    return 0


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--variants", default=DEFAULT_VARIANTS, help=f"comma-separated: {','.join(VARIANTS)}"
    )
    parser.add_argument("--speeds", default="1,10,20", help="mean speeds, m/s (1,10,20)")
    parser.add_argument("--seeds", default="1", help="comma-separated seeds (1)")
    parser.add_argument("--duration", type=float, default=50.0, help="measured seconds (50)")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds before it (10)")
    labrun.add_window_argument(parser, WINDOW_START_S, "rwp-30 is up by 17-19 s here")
    parser.add_argument(
        "--lookahead", type=float, default=2.0, help="Atra look-ahead, for scoring (2)"
    )
    parser.add_argument("--lock", default=None, help="flock this file around each run")
    expected.add_argument(parser)
    parser.set_defaults(func=run)
