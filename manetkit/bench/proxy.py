"""``manetkit bench proxy``: what the split-TCP proxy costs when nothing breaks.

* ``lab``: for each ``--hops`` count, chain-(hops+1) at 2 Mbit/s (DSR daemons, ``lab up
  --proxy elfn``): bulk TCP n1 -> the last node through the proxy pair, and plain kernel
  TCP over the same lab in the same run, in turn (``--rounds``): the plain sender sets
  the proxy's own SO_MARK, which the interception rules let through (docs/proxy.md,
  "Interception"), so every variant shares the daemons, the medium and the moment.
  ``--variants`` names proxy configurations measured side by side (the two end proxies
  are restarted with each). Each window also counts the packets each end's mesh0 sent:
  forward (data) and back (acknowledgements) per MB delivered, and what route events did
  in it (the end proxies' freezes and replaced legs, every daemon's link breaks). The
  ``proxy-fixed-rto`` and ``proxy-elfn`` variants run the same relay in that mode. Goal:
  the proxy's median goodput within 2% of plain's, judged on the 95 % bootstrap interval
  of the ratio of medians (manetkit.stats): met when its lower end clears 0.98, missed
  when its upper end is below, undecided otherwise (rounds spread too widely to tell).
  Each round records its window's fidelity (manetkit.lab.fidelity: the medium's lag,
  unmodelled drops, CPU per process class); only valid rounds enter the verdict.
* ``fast``: two namespaces on one veth (no medium, no daemon: the mesh leg is a plain
  veth route): iperf3 directly, then through a proxy pair. Goal: >= 500 Mbit/s through
  the proxy pair.

``--parts lab,fast`` picks which; JSON in ``OUT/proxy.json``. TCP's congestion control
is set in every namespace (``--congestion-control``, CUBIC by default: what laptops and
``manetkit experiment`` run, not the host's default) and recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from rich.table import Table

from manetkit import paths, procs, stats
from manetkit.bench import labrun, proxy_channel, report, stream
from manetkit.console import console
from manetkit.daemonstatus import StatusError, fetch_status
from manetkit.errors import UserError
from manetkit.jsonlines import request
from manetkit.lab import fidelity, netns, nodes, tcpcc, tcpstat
from manetkit.lab.inventory import find_processes
from manetkit.lab.scenario import SHIPPED_SCENARIOS
from manetkit.lab.stacks import proxy_status
from manetkit.paths import netns_name

GOAL_LAB_PCT = 2.0
GOAL_FAST_MBPS = 500.0
OWN_MARK = 0x4D4B  # ProxyConfig.own_mark's default: the redirect rules skip it
PORT = 5299
PEER_PORT = 4242  # ProxyConfig.peer_port's default: the mesh leg's acceptor side
SRC = "n1"


# --- (a) the lab chain ---------------------------------------------------------------------------


def _mesh0_packets(lab: str, node: str) -> dict[str, int]:
    """Packets through ``node``'s mesh0 so far (IP packets, what the daemon carries)."""
    out = {}
    for key in ("tx_packets", "rx_packets"):
        r = _sh("cat", f"/sys/class/net/mesh0/statistics/{key}", ns=netns_name(lab, node))
        out[key] = int(r.stdout)
    return out


# What a window's route events did: the end proxies' ELFN/BuS counters and every daemon's
# link breaks, route errors and vetoed failures (docs/proxy.md, "Status socket";
# docs/linkquality.md, the veto).
PROXY_EVENTS = ("route_events", "freezes", "thaws", "legs_replaced")
DAEMON_EVENTS = ("link-breaks", "errors-sent", "veto-resent")


def _events(lab: str, ends: tuple[str, ...], chain: list[str]) -> dict[str, int]:
    """The counters of PROXY_EVENTS (end proxies) and DAEMON_EVENTS (every daemon) now;
    a component that does not answer counts 0."""
    out = dict.fromkeys(PROXY_EVENTS + DAEMON_EVENTS, 0)
    for node in ends:
        counters = (proxy_status(lab, node) or {}).get("counters", {})
        for k in PROXY_EVENTS:
            out[k] += int(counters.get(k, 0))
    for node in chain:
        try:
            engine = fetch_status(paths.daemon_socket(lab, node), 2).engine
        except StatusError:
            continue
        for k in DAEMON_EVENTS:
            out[k] += int(engine.counters.get(k, 0))
    return out


def _sender_tcp(lab: str, addr: str, port: int) -> dict | None:
    """The source's established TCP connection to ``addr``:``port`` that carries the
    stream (the one with most bytes acknowledged; ``port``: the stream's, or the proxies'
    mesh leg's), as ``ss -ti`` reports it since it opened: bytes per data segment, the
    share of bytes sent again, cwnd and RTT."""
    text = tcpstat.connection_ss(netns_name(lab, SRC), addr, port, established=True)
    carried = [f for f in tcpstat.ss_sockets(text) if "bytes_acked" in f and "data_segs_out" in f]
    if not carried:
        return None
    f = max(carried, key=lambda f: int(f["bytes_acked"]))
    acked = int(f["bytes_acked"])
    sent = int(f.get("bytes_sent", acked))
    return {
        "bytes_acked": acked,
        "bytes_per_data_segment": round(sent / (int(f["data_segs_out"]) or 1)),
        "retrans_pct": round(100 * int(f.get("bytes_retrans", 0)) / max(sent, 1), 2),
        "cwnd": int(f.get("cwnd", 0)),
        "rtt_ms": tcpstat.first_number(f.get("rtt", "0")),
        "mss": int(f.get("mss", 0)),
    }


def _transfer(
    lab: str,
    work: Path,
    tag: str,
    mark: int | None,
    warmup: float,
    secs: float,
    dst: str,
    chain: list[str],
) -> dict:
    """One bulk transfer n1 -> ``dst`` (the stream's sender and receiver,
    manetkit.bench.stream); goodput of its window and the packets each end's mesh0 carried
    in it (data forward, acknowledgements back)."""
    rx, tx = work / f"{tag}-recv.json", work / f"{tag}-send.json"
    for f in (rx, tx, rx.with_suffix(".first")):
        f.unlink(missing_ok=True)
    addr = f"10.42.0.{dst.removeprefix('n')}"
    r = labrun.ns_python(lab, dst, "manetkit.bench.stream", "recv", "--port", str(PORT),
                         "--out", str(rx))  # fmt: skip
    time.sleep(0.3)
    extra = ["--mark", str(mark)] if mark else []
    s = labrun.ns_python(
        lab, SRC, "manetkit.bench.stream", "send", "--addr", addr, "--port", str(PORT),
        "--out", str(tx), *extra,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not rx.with_suffix(".first").exists():
            if time.monotonic() > deadline or r.poll() is not None or s.poll() is not None:
                raise UserError(f"bench proxy: transfer {tag} did not start within 60 s")
            time.sleep(0.1)
        t0 = time.monotonic() + warmup
        time.sleep(warmup)
        before = {n: _mesh0_packets(lab, n) for n in (SRC, dst)}
        ev0 = _events(lab, (SRC, dst), chain)
        cpu0 = _proxy_cpu(lab, (SRC, dst))
        fid0 = fidelity.collect(lab)
        time.sleep(secs)
        fid1 = fidelity.collect(lab)
        cpu1 = _proxy_cpu(lab, (SRC, dst))
        after = {n: _mesh0_packets(lab, n) for n in (SRC, dst)}
        ev1 = _events(lab, (SRC, dst), chain)
        sender = _sender_tcp(lab, addr, PORT if mark else PEER_PORT)
    finally:
        procs.stop_all((r, s), grace=10)
    res = json.loads(rx.read_text())
    samples = [(float(a), int(b)) for a, b in res["samples"]]
    intact = res["bytes"] > 0 and res["sha256"] == stream.stream_sha256(res["bytes"])
    kbps = stream.goodput_kbps(samples, t0, t0 + secs)
    fwd = after[SRC]["tx_packets"] - before[SRC]["tx_packets"]
    back = after[dst]["tx_packets"] - before[dst]["tx_packets"]
    mbytes = kbps * secs / 8 / 1000 or None
    return {
        "kbps": round(kbps, 1),
        "intact": intact,
        "proxy_cpu_s_per_mb": round((cpu1 - cpu0) / mbytes, 4) if mbytes else None,
        "packets_forward": fwd,
        "packets_back": back,
        "packets_back_per_mb": round(back / mbytes, 1) if mbytes else None,
        "packets_forward_per_mb": round(fwd / mbytes, 1) if mbytes else None,
        "events": {k: ev1[k] - ev0[k] for k in ev0},
        "sender_tcp": sender,
        # did the emulation hold in this window (manetkit.lab.fidelity)? An invalid round
        # is kept in the JSON but left out of the verdict.
        "fidelity": fidelity.window(fid0, fid1).to_json(),
    }


def _proxy_cpu(lab: str, names: tuple[str, ...]) -> float:
    """CPU seconds (user + system) the proxies of ``names`` have used so far."""
    total = 0.0
    for node in names:
        for pid in netns.pids_in([netns_name(lab, node)]):
            if "manetkit.proxy" not in " ".join(netns.cmdline(pid)):
                continue
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _restart_proxies(lab: str, names: tuple[str, ...], overrides: dict) -> None:
    """Restart the proxies of ``names`` with ``overrides`` merged into their config (a
    variant measured in the same lab as the others: same medium, daemons and moment)."""
    state = nodes.read_state(lab)
    assert state is not None, f"lab {lab} has no state"
    for info in state.processes:
        node = info.name.removeprefix("proxy-")
        if not info.name.startswith("proxy-") or node not in names:
            continue
        cfg_path = paths.node_dir(lab, node) / "proxy.yaml"
        base_path = cfg_path.with_suffix(".base.yaml")
        if not base_path.exists():
            base_path.write_text(cfg_path.read_text())
        cfg = yaml.safe_load(base_path.read_text()) | overrides
        for pid in find_processes(lab) & netns.pids_in([netns_name(lab, node)]):
            if "manetkit.proxy" in " ".join(netns.cmdline(pid)):
                procs.terminate({pid}, grace=5)
        cfg_path.write_text(yaml.safe_dump(cfg))
        with open(info.log, "ab") as out:
            subprocess.Popen(
                info.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        sock = paths.node_dir(lab, node) / "proxy.sock"
        procs.wait_for(lambda sock=sock: _answers(sock), 20, f"proxy-{node} restarted")


def _answers(sock: Path) -> bool:
    with contextlib.suppress(OSError, ValueError):
        return bool(request(sock, {"cmd": "status"}, timeout=1).get("ok"))
    return False


def bench_lab(args: argparse.Namespace, work: Path, hops: int) -> dict:
    """``--rounds`` rounds on chain-(hops+1); each round runs every variant once, in turn."""
    lab = f"bpx{os.getpid() % 10000}h{hops}"
    dst = f"n{hops + 1}"
    overrides = {"stack": "dsr", "proxy": "elfn", "radio.rate_mbps": str(args.rate)}
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    results: dict[str, list[dict]] = {v: [] for v in variants}
    nodes.down(lab)
    try:
        nodes.up(SHIPPED_SCENARIOS / f"chain-{hops + 1}.yaml", name=lab, overrides=overrides)
        chain = [f"n{k}" for k in range(1, hops + 2)]
        tcp = tcpcc.set_lab(lab, chain, args.congestion_control)
        current: str | None = None
        for i in range(args.rounds):
            for v in variants:
                if v != "plain" and v != current:
                    _restart_proxies(lab, (SRC, dst), variant_config(v, work))
                    current = v
                mark = OWN_MARK if v == "plain" else None
                results[v].append(
                    _transfer(lab, work, f"{v}{i}", mark, args.warmup, args.seconds, dst, chain)
                )
    finally:
        nodes.down(lab)
    out: dict = {"hops": hops, "rate_mbps": args.rate, "seconds_each": args.seconds, "tcp": tcp}
    base = _mean(results.get("plain", []), "kbps")
    plain = valid_kbps(results.get("plain", []))
    for v, runs in results.items():
        mean = _mean(runs, "kbps")
        kbps = [x["kbps"] for x in runs]
        valid = valid_kbps(runs)
        out[v] = {
            "kbps": kbps,
            "valid": [x["fidelity"]["valid"] for x in runs],
            "rounds_valid": len(valid),
            "mean_kbps": round(mean, 1) if mean is not None else None,
            "vs_plain_pct": round(100 * (mean - base) / base, 1) if mean and base else None,
            # plain is the reference: judged against itself it would only say "meets"
            **(
                verdict(valid, plain) if v != "plain" else {"ratio_to_plain": None, "verdict": None}
            ),
            "packets_back_per_mb": _mean(runs, "packets_back_per_mb"),
            "packets_forward_per_mb": _mean(runs, "packets_forward_per_mb"),
            "proxy_cpu_s_per_mb": _mean(runs, "proxy_cpu_s_per_mb", 4),
            "events": [x["events"] for x in runs],
            "sender_tcp": [x["sender_tcp"] for x in runs],
            "fidelity": [x["fidelity"] for x in runs],
            "intact": all(x["intact"] for x in runs),
        }
    out["intact"] = all(x["intact"] for runs in results.values() for x in runs)
    out["goal_pct"] = GOAL_LAB_PCT
    return out


def valid_kbps(runs: list[dict]) -> list[float]:
    """The goodput of the rounds whose window kept real time (the verdict's only input)."""
    return [x["kbps"] for x in runs if x["fidelity"]["valid"]]


def verdict(kbps: list[float], plain: list[float]) -> dict:
    """The variant's median over plain's with its 95 % bootstrap interval (manetkit.stats,
    each side's rounds resampled on their own), and the goal's verdict: ``meets`` when
    the interval's lower end clears ``1 - GOAL_LAB_PCT``, ``misses`` when its upper end
    is below it, ``undecided`` when the rounds cannot tell (run more)."""
    if not kbps or not plain:
        return {"ratio_to_plain": None, "verdict": None}
    r = stats.ratio_ci(kbps, plain)
    goal = 1 - GOAL_LAB_PCT / 100
    word = "meets" if r.low >= goal else "misses" if r.high < goal else "undecided"
    return {"ratio_to_plain": r.to_json(), "verdict": word}


def ratio_text(ci: dict) -> str:
    """``estimate [low, high]`` of an interval's JSON; an end that is not finite (plain's
    median 0: a stalled chain) is written as the JSON has it (``inf``)."""

    def f(x: float | str) -> str:
        return f"{x:.3f}" if isinstance(x, int | float) else str(x)

    return f"{f(ci['estimate'])} [{f(ci['low'])}, {f(ci['high'])}]"


def _worst_lag(fids: list[dict]) -> str:
    lags = [f["lag_p99_ms"] for f in fids if f.get("lag_p99_ms") is not None]
    return f"{max(lags):.2f}" if lags else "-"


def _mean(runs: list[dict], key: str, digits: int = 1) -> float | None:
    vals = [x[key] for x in runs if x.get(key) is not None]
    return round(sum(vals) / len(vals), digits) if vals else None


def variant_config(name: str, work: Path) -> dict:
    """Proxy config overrides of a ``--variants`` name (``proxy``: the lab's config)."""
    m = re.fullmatch(r"proxy-ack(\d+)ms", name)
    if m:  # the session ACK delay at NN ms (docs/proxy.md, "Overhead with no breaks")
        return {"ack_delay": int(m.group(1)) / 1000}
    if name not in VARIANTS:
        raise UserError(
            f"--variants: unknown {name!r}; known: plain, {', '.join(VARIANTS)}, proxy-ackNNms"
        )
    over = dict(VARIANTS[name])
    if name == "proxy-psk":
        key = work / "mesh.key"
        if not key.exists():
            key.write_text(os.urandom(32).hex())
            key.chmod(0o600)
        over["auth"] = {"keys": [{"id": 1, "key_file": str(key)}]}
    return over


VARIANTS: dict[str, dict] = {
    "proxy": {},  # the lab's config (elfn) with per-session (ephemeral X25519) keys
    "proxy-psk": {},  # ... and a mesh key (auth.keys; the key file is made per run)
    # the same relay in another mode: which of the cost is the mode's reaction to route
    # events (bus is left out: its daemons run only under `lab up --proxy bus`)
    "proxy-elfn": {"mode": "elfn"},
    "proxy-fixed-rto": {"mode": "fixed-rto"},
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
        tcp = tcpcc.set_namespaces([client, server], args.congestion_control)
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
        "tcp": tcp,
        "seconds": args.fast_seconds,
        "direct_mbps": round(direct, 1),
        "proxy_pair_mbps": round(through, 1),
        "sessions_through_proxy": accepted,
        "goal_mbps": GOAL_FAST_MBPS,
    }


# --- the command ---------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if not parts or any(p not in ("lab", "fast", "channel") for p in parts):
        raise UserError(f"--parts: lab, fast and/or channel, comma-separated (got {args.parts!r})")
    try:
        hops = [int(h) for h in args.hops.split(",") if h.strip()]
    except ValueError:
        raise UserError(
            f"--hops: comma-separated hop counts, e.g. 1,3 (got {args.hops!r})"
        ) from None
    if not hops or any(not 1 <= h <= 8 for h in hops):
        raise UserError(f"--hops: each between 1 and 8 (chain-2 .. chain-9), got {args.hops!r}")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in variants:
        if v != "plain":
            variant_config(v, Path("."))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc: dict = {"bench": "proxy", "congestion_control": args.congestion_control}
    ok = True
    tcpcc.require([args.congestion_control])
    with (
        tempfile.TemporaryDirectory(prefix="mk-bench-proxy-") as tmp,
        labrun.term_as_interrupt(),
        tcpcc.allowing([args.congestion_control]),
    ):
        work = Path(tmp)
        if "channel" in parts:
            console.print(f"channel: {args.channel_mb} MB through two sessions in process ...")
            doc["channel"] = proxy_channel.bench_channel(args.channel_mb)
        if "fast" in parts:
            console.print("fast: iperf3 over one veth, direct then through the proxy pair ...")
            doc["fast"] = f = bench_fast(args, work)
            ok &= f["sessions_through_proxy"] >= 1
        if "lab" in parts:
            doc["lab"] = []
            for h in hops:
                console.print(
                    f"lab: chain-{h + 1} ({h} hop{'s' if h > 1 else ''}) at {args.rate:g} Mbit/s, "
                    f"{', '.join(variants)} x{args.rounds} ..."
                )
                d = bench_lab(args, work, h)
                doc["lab"].append(d)
                ok &= d["intact"]
    t = Table("part", "variant", "goodput (mean)", "each run", "vs plain / direct",
              "median / plain [95% CI]", "acks back per MB", "proxy CPU ms per MB",
              "link breaks / freezes / legs replaced", "valid rounds (lag p99 max ms)", "goal",
              "verdict",
              title="bench proxy: overhead with no breaks")  # fmt: skip
    for d in doc.get("lab", []):
        for v in variants:
            r = d[v]
            pct = r["vs_plain_pct"]
            ci = r["ratio_to_plain"]
            word = {"meets": "meets", "misses": "[red]misses[/]"}.get(
                r["verdict"], "[yellow]undecided: more rounds[/]"
            )
            if r["rounds_valid"] == 0:
                word = "[red]no valid round[/]"
            t.add_row(
                f"lab chain, {d['hops']} hop{'s' if d['hops'] > 1 else ''}, "
                f"{d['rate_mbps']:g} Mbit/s (kbit/s)",
                v,
                f"{r['mean_kbps']:.0f}" if r["mean_kbps"] is not None else "-",
                ", ".join(f"{x:.0f}" for x in r["kbps"]),
                "-" if v == "plain" or pct is None else f"{pct:+.1f}%",
                "-" if v == "plain" or ci is None else ratio_text(ci),
                f"{r['packets_back_per_mb']:.0f}" if r["packets_back_per_mb"] else "-",
                f"{1000 * r['proxy_cpu_s_per_mb']:.1f}"
                if r["proxy_cpu_s_per_mb"] is not None
                else "-",
                " / ".join(
                    str(sum(e[k] for e in r["events"]))
                    for k in ("link-breaks", "freezes", "legs_replaced")
                ),
                f"{r['rounds_valid']}/{len(r['kbps'])} ({_worst_lag(r['fidelity'])})",
                "-" if v == "plain" else f"median within {GOAL_LAB_PCT:g}%, CI's low end",
                "-" if v == "plain" else word,
            )
    if "fast" in doc:
        d = doc["fast"]
        met = d["proxy_pair_mbps"] >= GOAL_FAST_MBPS
        t.add_row(
            "fast veth (Mbit/s)",
            d["mode"],
            f"{d['proxy_pair_mbps']:.0f}",
            "-",
            f"{100 * (d['proxy_pair_mbps'] / d['direct_mbps'] - 1):+.1f}% "
            f"(direct {d['direct_mbps']:.0f})",
            "-",
            "-",
            "-",
            "-",
            "-",
            f">= {GOAL_FAST_MBPS:g} Mbit/s",
            "meets" if met else "[red]misses[/]",
        )
    if "lab" in doc or "fast" in doc:
        report.show(t)
    if "channel" in doc:
        c = Table("channel", "CPU s per MB (both ends)", "us per 16 KiB frame", "wire bytes per MB",
                  "MB per CPU s", title="bench proxy: the peer channel's tags, in process")  # fmt: skip
        for r in doc["channel"]:
            c.add_row(r["variant"], f"{r['cpu_s_per_mb']:.5f}", f"{r['us_per_16k_frame']:.1f}",
                      f"{r['wire_bytes_per_mb']:,}", f"{r['app_mb_per_cpu_s']:.0f}")  # fmt: skip
        report.show(c)
    report.write(out, "proxy", doc)
    return 0 if ok else 1


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--parts", default="lab,fast", help="lab, fast and/or channel (default lab,fast)"
    )
    parser.add_argument(
        "--channel-mb", type=int, default=64, help="channel: MB through the sessions (64)"
    )
    parser.add_argument("--rate", type=float, default=2.0, help="lab radio Mbit/s (2)")
    parser.add_argument(
        "--congestion-control",
        default="cubic",
        help="TCP congestion control in every namespace, one the kernel has (cubic)",
    )
    parser.add_argument(
        "--hops", default="3", help="lab: chain lengths in hops, one lab each (3; e.g. 1,3)"
    )
    parser.add_argument(
        "--variants",
        default="plain,proxy",
        help="lab: what each round runs, in turn (plain,proxy); plain is kernel TCP "
        "past the proxy; the others restart the two end proxies with their config",
    )
    parser.add_argument("--rounds", type=int, default=2, help="lab: plain/proxy pairs (2)")
    parser.add_argument("--seconds", type=float, default=15.0, help="lab: window per run (15)")
    parser.add_argument("--warmup", type=float, default=3.0, help="lab: s before each window (3)")
    parser.add_argument("--fast-seconds", type=float, default=5.0, help="fast: iperf3 -t (5)")
    parser.add_argument(
        "--fast-mode", default="fixed-rto", choices=["fixed-rto", "elfn", "bus"], help="fast"
    )
    parser.set_defaults(func=run)
