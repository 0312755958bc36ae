"""``manetkit bench flap``: bulk TCP over a 3-hop chain whose middle link flaps.

Issue 4, "Must show": chain-4 (n1 -- n2 -- n3 -- n4, 2 Mbit/s, DSR daemons), one bulk
TCP transfer n1 -> n4; the middle link n2-n3 goes down for ``--down`` s (3) every
``--period`` s (15), the first time ``--first`` s (5) into the measured window. For
each mode (plain = no proxy at all; fixed-rto, elfn, bus = ``lab up --proxy MODE``):

* goodput: bytes the receiving application got during the window / its length;
* recovery: for each restoration, the time from ``link up`` to the next byte the
  receiving application gets (Holland & Vaidya measure the same stall from the sender:
  how long TCP stays silent after the route is back, section 5);
* integrity: the received bytes are a prefix of the sent stream (SHA-256), and the
  sender saw no error.

``--breaks 3,10,30`` runs one window per break length instead (``--count`` breaks each,
the default 12 s of link-up between and after them): long breaks are where plain TCP's
RTO back-off hurts (Holland & Vaidya section 5). ``--capture`` keeps tcpdump captures of
n1's and n4's mesh interface beside the logs (docs/proxy.md reads one).

The sender and receiver are this module (``python -m manetkit.bench.flap send|recv``),
run inside the nodes: the stream is deterministic, so the received prefix is checked
without waiting for the proxies to drain their buffers. A fresh lab per mode, always
brought down.

bus depends on the daemon emitting ``erdn``/``ersn``; without them its sessions behave as
elfn on ``route-down`` only after ``bus_wait``: they then probe like elfn.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from manetkit import jsonlines, paths, procs
from manetkit.bench import labrun, report
from manetkit.console import console
from manetkit.errors import UserError
from manetkit.lab import nodes, stacks
from manetkit.lab.scenario import SHIPPED_SCENARIOS

MODES = ("plain", "fixed-rto", "elfn", "bus")
SHIPPED = SHIPPED_SCENARIOS
BLOCK = 65536
PORT = 5299
SRC, DST = "n1", "n4"
DST_ADDR = "10.42.0.4"


# --- the deterministic stream ---------------------------------------------------------------


def stream_block(k: int) -> bytes:
    """Block ``k`` of the stream: distinct per block, so an offset error changes the hash."""
    return random.Random(k).randbytes(BLOCK)


def stream_sha256(n: int) -> str:
    """SHA-256 of the stream's first ``n`` bytes."""
    h = hashlib.sha256()
    k = 0
    while n > 0:
        b = stream_block(k)[:n]
        h.update(b)
        n -= len(b)
        k += 1
    return h.hexdigest()


class Stop(Exception):
    """SIGTERM from the driver: the window is over (the stream ends here and in
    ``bench smr``'s reconnecting ones)."""


def stop_on_term(*_: object) -> None:
    raise Stop


def send(addr: str, port: int, out: Path, mark: int | None = None) -> None:
    """Connect and write the stream until SIGTERM; record bytes written and any error.
    ``mark``: SO_MARK (the proxy's own mark makes the connection bypass interception)."""
    signal.signal(signal.SIGTERM, stop_on_term)
    res: dict = {"sent": 0, "error": None}
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if mark:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, mark)
        s.settimeout(120)
        s.connect((addr, port))
        s.settimeout(None)
        k = 0
        block = memoryview(stream_block(0))
        while True:
            res["sent"] += (n := s.send(block))
            block = block[n:]
            if not block:
                k += 1
                block = memoryview(stream_block(k))
    except Stop:
        pass
    except OSError as exc:
        res["error"] = repr(exc)
    out.write_text(json.dumps(res))
    os._exit(0)  # at once: what is still queued does not count, the window is over


def recv(port: int, out: Path) -> None:
    """Accept one connection and read until SIGTERM, recording (time, total bytes) per
    read (CLOCK_MONOTONIC, shared by every namespace); ``OUT.first`` marks the first byte."""
    signal.signal(signal.SIGTERM, stop_on_term)
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("0.0.0.0", port))
    lsock.listen(1)
    res: dict = {"bytes": 0, "samples": [], "error": None, "eof": False}
    h = hashlib.sha256()
    try:
        conn, _ = lsock.accept()
        buf = bytearray(1 << 16)
        while n := conn.recv_into(buf):
            h.update(memoryview(buf)[:n])
            if not res["bytes"]:
                out.with_suffix(".first").touch()
            res["bytes"] += n
            res["samples"].append((round(time.monotonic(), 4), res["bytes"]))
        res["eof"] = True
    except Stop:
        pass
    except OSError as exc:
        res["error"] = repr(exc)
    res["sha256"] = h.hexdigest()
    out.write_text(json.dumps(res))
    os._exit(0)


# --- analysis (pure) -------------------------------------------------------------------------


def goodput_kbps(samples: list[tuple[float, int]], t0: float, t1: float) -> float:
    """Application bytes received in [t0, t1], as kbit/s."""
    before = max((b for t, b in samples if t < t0), default=0)
    upto = max((b for t, b in samples if t <= t1), default=0)
    return (upto - before) * 8 / 1000 / (t1 - t0)


def received_kbps(result: Path, t0: float, t1: float) -> float:
    """:func:`goodput_kbps` of a ``recv --out`` file (0 if the receiver wrote none)."""
    res = json.loads(result.read_text()) if result.exists() else {}
    return goodput_kbps([(float(t), int(b)) for t, b in res.get("samples", [])], t0, t1)


def recoveries(samples: list[tuple[float, int]], ups: list[float], t1: float) -> list[float | None]:
    """For each restoration time, seconds until the next received byte (None: none before
    the window's end ``t1``)."""
    out: list[float | None] = []
    for u in ups:
        nxt = next((t for t, _ in samples if t > u), None)
        out.append(round(nxt - u, 3) if nxt is not None and nxt <= t1 else None)
    return out


def route_returns(events: list[dict], ups_wall: list[float], node: str = SRC) -> list[float | None]:
    """For each link-up (unix time), seconds until ``node``'s daemon reported a route to
    the receiver again (its first route-up after the link-up; None if none came before
    the next link-up): the moment the route is back, where ELFN can resume."""
    times = sorted(
        float(e["time"]) for e in events
        if e.get("node") == node and e.get("event") == "route-up" and e.get("dst") == DST_ADDR
    )  # fmt: skip
    out: list[float | None] = []
    for i, u in enumerate(ups_wall):
        nxt = ups_wall[i + 1] if i + 1 < len(ups_wall) else float("inf")
        t = next((x for x in times if u <= x < nxt), None)
        out.append(round(t - u, 3) if t is not None else None)
    return out


def after_route(recovery: list[float | None], route: list[float | None]) -> list[float | None]:
    """Recovery counted from the route's return instead of the link's."""
    return [
        round(r - q, 3) if r is not None and q is not None else None
        for r, q in zip(recovery, route, strict=True)
    ]


# --- the daemons' event streams ---------------------------------------------------------------


class EventRecorder:
    """Subscribes to every node's daemon event socket (a path, reachable from the root
    namespace) and appends ``{"node": .., **event}`` lines to a file: the evidence of
    which route-down/route-up/erdn/ersn each node emitted, and when."""

    def __init__(self, lab: str, node_names: list[str], out: Path) -> None:
        self.out = out.open("w")
        self.lock = threading.Lock()
        self.subs: list[jsonlines.Subscription] = []
        for n in node_names:
            try:
                sub = jsonlines.subscribe(stacks.daemon_socket(lab, n)).connect()
            except OSError:
                continue
            self.subs.append(sub)
            threading.Thread(target=self._read, args=(n, sub), daemon=True).start()

    def _read(self, node: str, sub: jsonlines.Subscription) -> None:
        with contextlib.suppress(OSError):
            for ev in sub:
                with self.lock:
                    self.out.write(json.dumps({"node": node, **ev}) + "\n")

    def close(self) -> None:
        for sub in self.subs:
            sub.close()
        with self.lock:
            self.out.close()


# --- one mode --------------------------------------------------------------------------------


def _ns_python(lab: str, node: str, *args: str) -> subprocess.Popen[bytes]:
    return labrun.ns_python(lab, node, "manetkit.bench.flap", *args)


def _medium_link(lab: str, state: str) -> None:
    reply = nodes.medium_request(lab, {"cmd": "link", "a": "n2", "b": "n3", "state": state})
    if not reply.get("ok"):
        raise UserError(f"medium refused link {state}: {reply}")


@dataclass(frozen=True)
class Schedule:
    """One window: the link is down ``down`` s every ``period`` s, first at ``first``."""

    down: float
    period: float
    first: float
    duration: float
    warmup: float


def schedules(args: argparse.Namespace) -> list[Schedule]:
    """The default window, or with ``--breaks B1,B2,..`` one window per break length:
    ``--count`` breaks of B s each, with the same link-up time between them as the
    default (``--period`` - ``--down``) and after the last one."""
    if not args.breaks:
        return [Schedule(args.down, args.period, args.first, args.duration, args.warmup)]
    try:
        lengths = [float(b) for b in args.breaks.split(",") if b.strip()]
    except ValueError:
        raise UserError(f"--breaks: {args.breaks!r} is not a list of seconds (3,10,30)") from None
    if not lengths or min(lengths) <= 0:
        raise UserError("--breaks: give positive break lengths in seconds, e.g. 3,10,30")
    if args.count < 1:
        raise UserError("--count: at least one break per length")
    up = args.period - args.down
    if up <= 0:
        raise UserError("--period must be longer than --down (the link-up time between breaks)")
    return [
        Schedule(b, b + up, args.first, args.first + args.count * (b + up), args.warmup)
        for b in lengths
    ]


class Capture:
    """tcpdump on a node's mesh interface (``--capture``): the packets behind a recovery
    time, read with tshark afterwards (docs/proxy.md shows how)."""

    def __init__(self, lab: str, node: str, out: Path) -> None:
        argv = ["ip", "netns", "exec", paths.netns_name(lab, node), "tcpdump", "-i", "mesh0",
                "-n", "-s", "128", "-U", "-w", str(out), "tcp"]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        procs.stop_all([self.proc], grace=5, sig=signal.SIGINT)  # tcpdump flushes on SIGINT


def run_mode(
    mode: str, args: argparse.Namespace, work: Path, idx: int, sch: Schedule,
    probe: float | None = None,
) -> dict:  # fmt: skip
    lab = f"flap{os.getpid() % 1000}{idx}"
    tag = mode if probe is None else f"{mode}@{probe:g}s"
    tag = tag if not args.breaks else f"{tag}-{sch.down:g}s"
    overrides = {"stack": "dsr", "proxy": "none" if mode == "plain" else mode}
    overrides["radio.rate_mbps"] = str(args.rate)
    for kv in args.set or []:
        k, _, v = kv.partition("=")
        overrides[k] = v
    nodes.down(lab)
    recorder: EventRecorder | None = None
    captures: list[Capture] = []
    try:
        with _proxy_extra(work, sch, probe):
            nodes.up(SHIPPED / "chain-4.yaml", name=lab, overrides=overrides)
        recorder = EventRecorder(lab, ["n1", "n2", "n3", "n4"], work / f"{tag}-events.jsonl")
        if args.capture:
            captures = [Capture(lab, n, work / f"{tag}-{n}.pcap") for n in (SRC, DST)]
        rx, tx = work / f"{tag}-recv.json", work / f"{tag}-send.json"
        for f in (rx, tx, rx.with_suffix(".first")):
            f.unlink(missing_ok=True)
        r = _ns_python(lab, DST, "recv", "--port", str(PORT), "--out", str(rx))
        time.sleep(0.5)
        s = _ns_python(lab, SRC, "send", "--addr", DST_ADDR, "--port", str(PORT), "--out", str(tx))
        # the window starts once the transfer flows (route discovery and the first SYN's
        # fate are not what is measured), after a warm-up
        deadline = time.monotonic() + 60
        while not rx.with_suffix(".first").exists():
            if time.monotonic() > deadline or r.poll() is not None or s.poll() is not None:
                raise UserError(f"{mode}: the transfer n1 -> n4 did not start within 60 s")
            time.sleep(0.1)
        t0 = time.monotonic() + sch.warmup
        t1 = t0 + sch.duration
        downs, ups, ups_wall = [], [], []
        t = t0 + sch.first
        while t + sch.down <= t1:
            time.sleep(max(0.0, t - time.monotonic()))
            _medium_link(lab, "down")
            downs.append(time.monotonic())
            time.sleep(max(0.0, t + sch.down - time.monotonic()))
            _medium_link(lab, "auto")
            ups.append(time.monotonic())
            ups_wall.append(time.time())
            t += sch.period
        time.sleep(max(0.0, t1 - time.monotonic()))
        procs.stop_all((r, s), grace=10)
        rres = json.loads(rx.read_text()) if rx.exists() else {"bytes": 0, "samples": []}
        sres = json.loads(tx.read_text()) if tx.exists() else {"sent": 0, "error": "no result"}
    finally:
        for c in captures:
            c.stop()
        if recorder is not None:
            recorder.close()
        # the daemons' and proxies' logs outlive the lab: why a recovery took so long
        logs = work / f"{tag}-logs"
        shutil.rmtree(logs, ignore_errors=True)
        if paths.logs_dir(lab).is_dir():
            shutil.copytree(paths.logs_dir(lab), logs, dirs_exist_ok=True)
        nodes.down(lab)
    samples = [(float(a), int(b)) for a, b in rres.get("samples", [])]
    rec = recoveries(samples, ups, t1)
    got = [x for x in rec if x is not None]
    evfile = work / f"{tag}-events.jsonl"
    evs = [json.loads(x) for x in evfile.read_text().splitlines()] if evfile.exists() else []
    route = route_returns(evs, ups_wall)
    rec_route = after_route(rec, route)
    got_route = [x for x in rec_route if x is not None]
    intact = rres.get("bytes", 0) > 0 and rres.get("sha256") == stream_sha256(rres["bytes"])
    return {
        "mode": mode,
        "probe_interval_s": probe,
        "down_s": sch.down,
        "period_s": sch.period,
        "duration_s": sch.duration,
        "goodput_kbps": round(goodput_kbps(samples, t0, t1), 1),
        "bytes_received": rres.get("bytes", 0),
        "bytes_sent": sres.get("sent", 0),
        "intact": intact,
        "sender_error": sres.get("error"),
        "receiver_error": rres.get("error"),
        "breaks": len(downs),
        "recovery_s": rec,
        "link_up_unix": [round(x, 3) for x in ups_wall],  # to read the copied logs by
        "recovery_mean_s": round(sum(got) / len(got), 3) if got else None,
        "recovery_max_s": max(got) if got else None,
        # from n1's route-up after each link-up: the route's return
        "route_back_s": route,
        "recovery_after_route_s": rec_route,
        "recovery_after_route_mean_s": (
            round(sum(got_route) / len(got_route), 3) if got_route else None
        ),
    }


def proxy_extra(sch: Schedule, probe: float | None) -> dict[str, Any]:
    """What the proxies' configs get for one run: breaks near the proxies' 30 s partition
    timeout would reset the app (plain TCP has no such limit), so ``down + 30`` s; with
    ``--probe-intervals``, ELFN's fixed probe period (Holland & Vaidya section 5, Fig. 12)."""
    doc: dict[str, Any] = {}
    if sch.down + 30 > 30:
        doc["partition_timeout"] = sch.down + 30
    if probe is not None:
        doc |= {"probe": "fixed", "probe_interval": probe}
    return doc


@contextlib.contextmanager
def _proxy_extra(work: Path, sch: Schedule, probe: float | None) -> Iterator[None]:
    """The run's proxy config additions, unless the user set a config of their own."""
    doc = proxy_extra(sch, probe)
    if os.environ.get(stacks.PROXY_EXTRA_ENV) or not doc:
        if probe is not None and os.environ.get(stacks.PROXY_EXTRA_ENV):
            raise UserError(f"--probe-intervals: unset {stacks.PROXY_EXTRA_ENV} (it would win)")
        yield
        return
    with labrun.env_config(stacks.PROXY_EXTRA_ENV, work / "proxy-extra.yaml", doc):
        yield


def probe_intervals(text: str | None) -> list[float]:
    """``--probe-intervals 0.5,1,2`` -> [0.5, 1.0, 2.0] (the proxy config's 0.1..60 s)."""
    if not text:
        return []
    try:
        got = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--probe-intervals: {text!r} is not a list of seconds") from None
    if not got or not all(0.1 <= x <= 60 for x in got):
        raise UserError("--probe-intervals: give seconds between 0.1 and 60, e.g. 0.5,2,10,30")
    return got


def run(args: argparse.Namespace) -> int:
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise UserError(f"--modes: unknown {', '.join(bad) or '(empty)'} (use {', '.join(MODES)})")
    if not args.breaks and args.duration < args.first + args.down:
        raise UserError("--duration: too short for one break (needs --first + --down)")
    plan = schedules(args)
    probes = probe_intervals(args.probe_intervals)
    if probes and "elfn" not in modes:
        raise UserError("--probe-intervals: only mode elfn probes (add elfn to --modes)")
    # (mode, probe interval) per run: elfn once per interval when a sweep is asked for
    runs = [(m, p) for m in modes for p in (probes if m == "elfn" and probes else [None])]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = out / "flap-runs"
    work.mkdir(exist_ok=True)
    results = []
    for j, sch in enumerate(plan):
        for i, (mode, probe) in enumerate(runs):
            name = mode if probe is None else f"{mode} (probe every {probe:g} s)"
            console.print(f"[bold]{name}[/]: {sch.duration:g} s, link n2-n3 down {sch.down:g} s "
                          f"every {sch.period:g} s ...")  # fmt: skip
            results.append(run_mode(mode, args, work, j * len(runs) + i, sch, probe))
    doc = {
        "bench": "flap",
        "chain": "chain-4 (3 hops), DSR",
        "rate_mbps": args.rate,
        "duration_s": args.duration,
        "down_s": args.down,
        "period_s": args.period,
        "first_break_s": args.first,
        "breaks_s": [sch.down for sch in plan] if args.breaks else None,
        "breaks_per_length": args.count if args.breaks else None,
        "probe_intervals_s": probes or None,
        "results": results,
    }
    title = (f"bench flap: 3 hops, {args.rate:g} Mbit/s, " + (
        f"breaks of {args.breaks} s ({args.count} each, {args.period - args.down:g} s up)"
        if args.breaks else
        f"{args.down:g} s down every {args.period:g} s, {args.duration:g} s"))  # fmt: skip
    t = Table(
        "break s", "mode", "goodput kbit/s", "intact", "app error", "breaks",
        "recovery s (each)", "after route-up s", title=title,
    )  # fmt: skip
    for r in results:
        each = " ".join("-" if x is None else f"{x:.2f}" for x in r["recovery_s"])
        mean = "-" if r["recovery_mean_s"] is None else f"{r['recovery_mean_s']:.2f}"
        t.add_row(
            f"{r['down_s']:g}",
            r["mode"] + (f" @{r['probe_interval_s']:g}s" if r.get("probe_interval_s") else ""),
            f"{r['goodput_kbps']:.0f}",
            "yes" if r["intact"] else "[red]NO[/]",
            r["sender_error"] or r["receiver_error"] or "none",
            str(r["breaks"]),
            f"mean {mean} ({each})",
            _mean_each(r["recovery_after_route_s"]),
        )
    report.show(t)
    report.write(out, "flap", doc)
    return 0 if all(r["intact"] for r in results) else 1


def _mean_each(xs: list[float | None]) -> str:
    got = [x for x in xs if x is not None]
    each = " ".join("-" if x is None else f"{x:.2f}" for x in xs)
    return f"mean {sum(got) / len(got):.2f} ({each})" if got else f"- ({each})"


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=float, default=60.0, help="measured seconds (60)")
    parser.add_argument(
        "--modes", default=",".join(MODES), help=f"comma-separated ({','.join(MODES)})"
    )
    parser.add_argument("--rate", type=float, default=2.0, help="radio Mbit/s (2)")
    parser.add_argument("--down", type=float, default=3.0, help="seconds each break lasts (3)")
    parser.add_argument("--period", type=float, default=15.0, help="seconds between breaks (15)")
    parser.add_argument("--first", type=float, default=5.0, help="first break, s into window (5)")
    parser.add_argument(
        "--warmup", type=float, default=4.0, help="seconds from first byte to the window (4)"
    )
    parser.add_argument(
        "--breaks", default=None, metavar="S1,S2,..",
        help="one window per break length, e.g. 3,10,30 (--count breaks each, "
        "--period - --down s up between)",
    )  # fmt: skip
    parser.add_argument("--count", type=int, default=2, help="--breaks: breaks per length (2)")
    parser.add_argument(
        "--probe-intervals", default=None, metavar="P1,P2,..",
        help="run elfn once per fixed probe interval, e.g. 0.5,1,2,5,10,30 "
        "(Holland & Vaidya Fig. 12)",
    )  # fmt: skip
    parser.add_argument(
        "--capture", action="store_true",
        help="tcpdump n1's and n4's mesh0 into flap-runs/MODE-nI.pcap",
    )  # fmt: skip
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="scenario override")
    parser.set_defaults(func=run)


def _main() -> None:
    """``python -m manetkit.bench.flap send|recv``: the two ends, run inside lab nodes."""
    p = argparse.ArgumentParser(prog="manetkit.bench.flap")
    p.add_argument("role", choices=["send", "recv"])
    p.add_argument("--addr", default=DST_ADDR)
    p.add_argument("--port", type=int, default=PORT)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--mark", type=int, default=None, help="send: SO_MARK of the socket")
    a = p.parse_args()
    if a.role == "send":
        send(a.addr, a.port, a.out, a.mark)
    else:
        recv(a.port, a.out)


if __name__ == "__main__":
    _main()
