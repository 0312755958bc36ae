"""One run of an experiment: lab up, warm-up, the traffic, the metrics, lab down.

The lab is the spec's scenario with ``stack``, ``proxy``, ``seed`` and (random waypoint)
``mobility.speed`` set as ``lab up --set`` would, plus the spec's ``set:``. Once it is up:

1. the run's TCP congestion control is set in every node's namespace and read back
   (:mod:`~manetkit.lab.tcpcc`);
2. the warm-up waits until the stack has a route for every pair of the traffic, or the
   cap (:mod:`~manetkit.experiment.convergence`), then until medium time ``warmup_s``:
   the window opens at the same medium time in every stack (the same movement in every
   stack's window at a seed and speed; ``late_s`` > 0 when the lab took longer);
3. the fidelity of the emulation is read at the window's start and end
   (:func:`manetkit.lab.fidelity.collect`) and the window's verdict recorded;
4. the routing state of every node is snapshot at the window's start, middle and end
   (:mod:`~manetkit.experiment.snapshots`), kept beside the run's JSON and summarised
   in it;
5. the traffic runs its window, with its CBR ``background`` flows (if any) beside it from
   the start; the daemons' counters are read at both ends of the window, and the
   medium's ground-truth log before the lab goes down (it lives in the lab's directory).

An ELFN probe variant (``elfn-probe2``) is the lab's ``proxy: elfn`` with its probe
interval in the proxy config the lab is brought up with (:func:`run_proxy_config`). Whatever happens the lab is brought down and every process
the run started is stopped. Files the run keeps (the raw snapshots) are written under
``work/keep/``, which the runner moves to ``runs/<name>/``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from manetkit import paths, procs
from manetkit.bench import labrun
from manetkit.daemonstatus import DaemonStatus, StatusError, fetch_status
from manetkit.experiment import (
    background,
    bulk,
    convergence,
    metrics,
    peercount,
    rateuse,
    snapshots,
    stream,
    web,
    wrk,
)
from manetkit.experiment.eventlog import EventLog
from manetkit.experiment.linkflap import Flapper
from manetkit.experiment.plugins import PLUGINS, Connection, Metric, RunContext
from manetkit.experiment.plugins.base import CLOSING_LEAD_S
from manetkit.experiment.runner import KEEP
from manetkit.experiment.spec import (
    MANETKIT_STACKS,
    PEER_STACKS,
    Bulk,
    Http,
    Run,
    Spec,
    Stream,
    Wrk,
    background_pairs,
    bulk_pairs,
    http_pairs,
    lab_proxy,
    probe_interval,
    proxy_extra,
    throughput_table,
)
from manetkit.lab import fidelity, nodes, tcpcc
from manetkit.lab.medium.groundtruth import read_log
from manetkit.lab.scenario import RandomWaypointMobility, load_scenario
from manetkit.lab.stacks import node_address

UP_TIMEOUT_S = 180.0


def overrides_for(spec: Spec, run: Run) -> dict[str, str]:
    """The ``lab up --set`` of a run: the spec's ``set:`` and the run's axes; a peer
    stack variant (``babeld-mobile``) is its lab stack and its profile, a spec variant
    (``dsr-atra``) its stack and its ``set:``; an ELFN probe variant (``elfn-probe2``) is
    the lab's ``elfn`` (its interval: :func:`run_proxy_config`)."""
    out = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in spec.set.items()}
    out.update(spec.stack_set(run.stack))
    out.update({"stack": spec.lab_stack(run.stack), "proxy": lab_proxy(run.proxy),
                "seed": str(run.seed)})  # fmt: skip
    sc = load_scenario(spec.scenario_path(run.scenario), out)
    if isinstance(sc.mobility, RandomWaypointMobility):
        out["mobility.speed"] = f"{run.speed:g}"
    return out


def run_proxy_config(spec: Spec, run: Run) -> dict[str, Any] | None:
    """The fields the run adds to every node's proxy config (``nodes.up``'s
    ``proxy_config``): the spec's ``proxy_config``, its traffic's, an ELFN probe
    variant's interval, each over the one before; None when the run adds nothing."""
    extra = {**spec.proxy_config, **spec.traffic(run.traffic).proxy_config,
             **proxy_extra(run.proxy)}  # fmt: skip
    return extra or None


def _statuses(lab: str, n: int) -> list[DaemonStatus]:
    out = []
    for i in range(1, n + 1):
        with contextlib.suppress(StatusError):
            out.append(fetch_status(paths.daemon_socket(lab, f"n{i}"), 5))
    return out


def _control(lab: str, n: int, stack: str) -> dict[str, int] | None:
    """The control counters now: the manetkit daemons' own, or (peer stacks) the nftables
    counters :mod:`~manetkit.experiment.peercount` installed."""
    if stack in MANETKIT_STACKS:
        return metrics.control_totals(_statuses(lab, n))
    if stack in PEER_STACKS:
        return peercount.totals(lab, n)
    return None


def _overhead(stack: str, c0: dict[str, int] | None, c1: dict[str, int] | None) -> Any:
    if c0 is None or c1 is None:
        return None
    if stack in PEER_STACKS:
        return peercount.overhead(c0, c1)
    return metrics.control_overhead(c0, c1)


def code_version() -> dict[str, Any] | None:
    """The checkout a run used: HEAD and the files under ``manetkit/`` that differ from it
    (the lab's processes import the package when the run starts); None outside git."""
    repo = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "manetkit"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None  # fmt: skip
    return {"commit": head.stdout.strip(),
            "dirty": [ln[3:] for ln in dirty.stdout.splitlines() if ln.strip()]}  # fmt: skip


def traffic_pairs(spec: Spec, run: Run, n: int) -> list[tuple[str, str]]:
    """The (source, destination) pairs of a run's traffic: bulk and stream senders and
    receivers, HTTP clients and servers, the wrk client and server (what the warm-up waits
    for)."""
    t = spec.traffic(run.traffic)
    if isinstance(t, Bulk | Stream):
        return bulk_pairs(t, run.seed, n)  # type: ignore[arg-type]
    if isinstance(t, Http):
        return http_pairs(t, run.seed, n)
    return [(t.client, t.server)]


class Snapshots:
    """The window's three routing snapshots, each taken in its own thread (the start one
    beside the traffic's start, the middle one on a timer) and joined at the end."""

    def __init__(self, lab: str, node_names: list[str], stack: str) -> None:
        self.lab, self.nodes, self.stack = lab, node_names, stack
        self.taken: dict[str, dict[str, Any]] = {}
        self.threads: list[threading.Thread] = []

    def _take(self, moment: str) -> None:
        with contextlib.suppress(Exception):  # a snapshot never fails a run
            self.taken[moment] = snapshots.take(self.lab, self.nodes, self.stack)

    def at(self, moment: str, delay: float = 0.0) -> None:
        t: threading.Thread
        if delay > 0:
            t = threading.Timer(delay, self._take, (moment,))
        else:
            t = threading.Thread(target=self._take, args=(moment,))
        t.daemon = True
        t.start()
        self.threads.append(t)

    def join(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def cancel(self) -> None:
        for t in self.threads:
            if isinstance(t, threading.Timer):
                t.cancel()


def connections(t: Any, pairs: list[tuple[str, str]]) -> list[Connection]:
    """The traffic's TCP connections as the plug-ins look for them: each from its source
    to its destination's port."""
    if isinstance(t, Bulk):
        return [Connection(a, b, bulk.BASE_PORT + k) for k, (a, b) in enumerate(pairs)]
    if isinstance(t, Stream):
        return [Connection(a, b, stream.BASE_PORT + k) for k, (a, b) in enumerate(pairs)]
    return [Connection(a, b, t.port) for a, b in pairs]


class Closing:
    """The plug-ins' ``closing`` hook, :data:`CLOSING_LEAD_S` before the window ends."""

    def __init__(self, plugins: list[Metric], ctx: RunContext, duration: float) -> None:
        self.timer = threading.Timer(
            max(0.0, duration - CLOSING_LEAD_S), lambda: [m.closing(ctx) for m in plugins]
        )
        self.timer.daemon = True
        if plugins:
            self.timer.start()

    def join(self) -> None:
        if self.timer.is_alive():
            self.timer.join(30)

    def cancel(self) -> None:
        self.timer.cancel()


def _converge(
    lab: str, stack: str, pairs: list[tuple[str, str]], cap_s: float
) -> dict[str, Any] | None:
    if stack == "none":
        return None
    has_route, ask = convergence.probes(lab, stack)
    got = convergence.wait_converged(
        pairs, has_route, lambda: labrun.medium_time(lab), cap_s, ask=ask
    )
    return got.to_json()


def _save_logs(lab: str, work: Path) -> None:
    """The lab's logs (every daemon's, proxy's and radio's, the medium's, the ground
    truth) into the run's work directory before the lab goes: a rare event in one run
    (a reset nobody could reproduce) can then be read with ``--keep-work``."""
    with contextlib.suppress(OSError):
        shutil.copytree(paths.logs_dir(lab), work / "logs", dirs_exist_ok=True)


def run_one(spec: Spec, run: Run, work: Path) -> dict[str, Any]:
    """Make ``run``; its JSON document (``status: ok``). Raises on a failed lab."""
    traffic = spec.traffic(run.traffic)
    scen_path = spec.scenario_path(run.scenario)
    overrides = overrides_for(spec, run)
    n = load_scenario(scen_path, overrides).nodes
    node_names = [f"n{i}" for i in range(1, n + 1)]
    duration = spec.traffic_duration(traffic)
    stack = spec.lab_stack(run.stack)
    lab = f"mkx{os.getpid() % 100000}"
    work.mkdir(parents=True, exist_ok=True)
    started: list[subprocess.Popen[Any]] = []
    flows: list[bulk.Flow] = []
    streams: list[stream.StreamFlow] = []
    cbr: list[background.CbrFlow] = []
    doc: dict[str, Any] = {
        "status": "ok",
        "run": run.name,
        "params": run.params(),
        "traffic": traffic.model_dump(),
        "scenario_file": str(scen_path),
        "overrides": overrides,
        "nodes": n,
        "warmup_s": spec.warmup_s,
        "probe_interval_s": probe_interval(run.proxy),
        "code": code_version(),
    }
    pairs = traffic_pairs(spec, run, n)
    snaps = Snapshots("", node_names, stack)
    readings: list[fidelity.Reading] = []
    plugins = [PLUGINS[name]() for name in spec.metrics]
    ctx = RunContext(lab, node_names, stack, lab_proxy(run.proxy), work,
                     connections(traffic, pairs))  # fmt: skip
    closing: Closing | None = None
    flapper: Flapper | None = None
    lead = traffic.lead_s if isinstance(traffic, Stream) else 0.0
    nodes.down(lab)
    try:
        t_up = time.monotonic()
        proxy_cfg = run_proxy_config(spec, run)
        nodes.up(
            scen_path, name=lab, overrides=overrides, timeout=UP_TIMEOUT_S, proxy_config=proxy_cfg
        )
        doc["proxy_config"] = proxy_cfg
        doc["lab_up_s"] = round(time.monotonic() - t_up, 2)
        doc["lab_up_medium_s"] = round(labrun.medium_time(lab), 2)
        if stack in PEER_STACKS:
            peercount.install(lab, n)
        doc["tcp"] = tcpcc.set_lab(lab, node_names, run.cc)
        doc["convergence"] = _converge(lab, stack, pairs, min(spec.cap_s, spec.warmup_s - lead))
        # The window opens warmup_s of *medium* time after the medium started, so at one
        # seed and speed every stack's window sees the same movement, however long its
        # lab took to come up; a stream traffic starts lead_s before it.
        doc["late_s"] = round(labrun.wait_medium(lab, spec.warmup_s - lead), 2)
        if any(m.needs_events for m in plugins):
            ctx.events = EventLog(lab, node_names, work / "events.jsonl")
        if isinstance(traffic, Stream):
            streams = stream.start(lab, pairs, work, traffic.reconnect)
            labrun.wait_medium(lab, spec.warmup_s)
        readings.append(fidelity.collect(lab))
        rates0 = rateuse.read(lab)
        snaps.lab = lab
        snaps.at("start")
        snaps.at("middle", duration / 2)
        for m in plugins:
            m.before(ctx)
        closing = Closing(plugins, ctx, duration)
        if traffic.link_flap is not None:
            flapper = Flapper(lab, traffic.link_flap, time.monotonic(), duration)
        if traffic.background is not None:
            bg_pairs = background_pairs(traffic, run.seed, n)
            cbr = background.start(lab, traffic.background, bg_pairs, work)
        c0 = _control(lab, n, stack)
        if isinstance(traffic, Bulk):
            flows = bulk.start_servers(lab, pairs, work)
            w0, w1 = bulk.run(lab, flows, duration, work)
        elif isinstance(traffic, Http):
            w0, w1 = _http(lab, spec, run, traffic, pairs, duration, work, started)
        elif isinstance(traffic, Stream):
            w0, w1, *mono = stream.window(duration)
            ctx.window_mono = (mono[0], mono[1])
        else:
            w0, w1, doc["wrk"] = _wrk(lab, run, traffic, duration, work, started)
        ctx.window = (w0, w1)
        c1 = _control(lab, n, stack)
        readings.append(fidelity.collect(lab))
        rates1 = rateuse.read(lab)
        snaps.at("end")
        closing.join()
        stream.stop(streams)
        if flapper is not None:
            flapper.stop()
        for m in plugins:
            m.after(ctx)
        snaps.join()
        events = read_log(paths.ground_truth_log(lab))
    finally:
        snaps.cancel()
        if closing is not None:
            closing.cancel()
        if flapper is not None:
            flapper.stop()
        if ctx.events is not None:
            ctx.events.close()
        stream.stop(streams)
        bulk.stop(flows)
        background.stop(cbr)
        procs.stop_all(started, grace=5)
        _save_logs(lab, work)
        nodes.down(lab)
    if flapper is not None:
        doc["link_flap"] = flapper.record()
        ctx.link_downs, ctx.link_ups, ctx.link_ups_wall = (
            flapper.downs,
            flapper.ups,
            flapper.ups_wall,
        )
    t0 = float(events[0]["wall"]) - float(events[0]["t"])
    doc["window"] = {"start": round(w0, 3), "end": round(w1, 3), "duration_s": duration,
                     "medium_t": round(w0 - t0, 2)}  # fmt: skip
    th = fidelity.Thresholds(spec.fidelity.lag_p99_ms, spec.fidelity.unmodelled_drops)
    doc["fidelity"] = fidelity.window(readings[0], readings[1], th).to_json()
    doc["snapshots"] = _snapshot_doc(snaps.taken, pairs, events, work / KEEP, t0)
    table = throughput_table(spec)
    gt = {f"{a}-{b}": metrics.pair_metrics(events, a, b, w0, w1, table) for a, b in pairs}
    doc["ground_truth"] = {"graph_changes": len(events), "pairs": gt}
    doc["rates"] = rateuse.window(rates0, rates1)
    doc["control"] = _overhead(stack, c0, c1)
    doc["route_discovery"] = (
        metrics.discovery_latency(c0, c1)
        if stack in MANETKIT_STACKS and c0 is not None and c1 is not None
        else None  # proactive peers: routes are there before they are asked for
    )
    if isinstance(traffic, Bulk):
        doc["bulk"] = _bulk_doc(bulk.results(flows, duration), gt)
    elif isinstance(traffic, Stream) and ctx.window_mono is not None:
        got, ctx.samples = stream.results(streams, *ctx.window_mono, traffic.reconnect)
        ctx.stream_flows = got
        doc["bulk"] = {**_bulk_doc(got, gt), "kind": "stream"}
    elif isinstance(traffic, Http):
        doc["http"] = _http_doc(pairs, work)
    if traffic.background is not None:
        doc["background"] = background.results(traffic.background, cbr)
    for m in plugins:
        doc[m.name] = m.result(ctx, events)
    doc["finished"] = round(time.time(), 3)
    return doc


def _snapshot_doc(
    taken: dict[str, dict[str, Any]],
    pairs: list[tuple[str, str]],
    graph: list[dict[str, Any]],
    keep: Path,
    t0_wall: float,
) -> dict[str, Any]:
    """Each moment's summary (:func:`snapshots.summarise` with the ground truth), its
    medium time, and the raw file kept beside the run's JSON."""
    out: dict[str, Any] = {}
    for moment in snapshots.MOMENTS:
        snap = taken.get(moment)
        if snap is None:
            out[moment] = None
            continue
        name = f"snapshot-{moment}.json.gz"
        snapshots.save(snap, keep / name)
        s = snapshots.add_ground_truth(snapshots.summarise(snap, pairs), graph)
        s["medium_t"] = round(float(snap["time"]) - t0_wall, 2)
        s["file"] = name
        out[moment] = s
    return out


def _bulk_doc(flows: list[dict[str, Any]], gt: dict[str, dict[str, Any]]) -> dict[str, Any]:
    for f in flows:
        g = gt[f"{f['src']}-{f['dst']}"]
        f.update(
            expected_kbps=g["expected_kbps"],
            measured_over_expected=metrics.ratio(f["goodput_kbps"], g["expected_kbps"]),
            partition_s=g["partition_s"],
            mean_hops=g["mean_hops"],
        )
    total = round(sum(f["goodput_kbps"] for f in flows), 1)
    exp = [f["expected_kbps"] for f in flows]
    expected = round(sum(exp), 1) if all(e is not None for e in exp) else None
    return {
        "flows": flows,
        "goodput_kbps": total,
        "expected_kbps": expected,
        "measured_over_expected": metrics.ratio(total, expected),
    }


def _http(
    lab: str,
    spec: Spec,
    run: Run,
    t: Http,
    pairs: list[tuple[str, str]],
    duration: float,
    work: Path,
    started: list[subprocess.Popen[Any]],
) -> tuple[float, float]:
    site = work / "site"
    web.build_site(site, t.pages, run.seed)
    for server in dict.fromkeys(s for _, s in pairs):
        started.append(web.start_server(lab, server, t.port, site))
        web.wait_listening(lab, server, t.port)
    w0 = time.time()
    clients = [
        web.start_client(
            lab,
            c,
            s,
            t.port,
            duration=duration,
            think=t.think_s,
            timeout=t.page_timeout_s,
            pages=t.pages,
            seed=run.seed,
            out=work / f"web-{c}.json",
        )  # fmt: skip
        for c, s in pairs
    ]
    started.extend(clients)
    deadline = time.monotonic() + duration + 10
    for c in clients:
        with contextlib.suppress(subprocess.TimeoutExpired):
            c.wait(max(0.1, deadline - time.monotonic()))
    return w0, w0 + duration


def _http_doc(pairs: list[tuple[str, str]], work: Path) -> dict[str, Any]:
    per = [web.pair_result(c, s, work / f"web-{c}.json") for c, s in pairs]
    times = [p["service_s"] for r in per for p in r["pages"] if p["ok"]]
    return {
        "pairs": per,
        "pages_completed": sum(r["pages_completed"] for r in per),
        "pages_failed": sum(r["pages_failed"] for r in per),
        "service_s": web.summary(times),
    }


def _wrk(
    lab: str,
    run: Run,
    t: Wrk,
    duration: float,
    work: Path,
    started: list[subprocess.Popen[Any]],
) -> tuple[float, float, dict[str, Any]]:
    site = work / "site"
    web.build_site(site, 1, run.seed)
    started.append(web.start_server(lab, t.server, t.port, site))
    web.wait_listening(lab, t.server, t.port)
    url = f"http://{node_address(t.server)}:{t.port}/page0.html"
    w0 = time.time()
    res = wrk.run(paths.netns_name(lab, t.client), url, t.connections, t.threads, duration)
    return w0, w0 + duration, res
