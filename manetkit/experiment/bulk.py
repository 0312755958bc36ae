"""Bulk TCP with iperf3: one transfer per (sender, receiver) pair, all at once.

Each receiver runs ``iperf3 -s -1 -J`` on its mesh address; each sender
``iperf3 -c ... -t DURATION -J``. Goodput is what the *receiver* counted (its JSON's
``end.sum_received.bytes``) over the whole window: a flow that could not connect or that
stalled in a partition scores what it delivered, as TCP connection lifetimes do in Holland
& Vaidya's runs. At the window's end every iperf3 still running (a client stuck in its
final exchange across a partition) is stopped; iperf3 writes its JSON on SIGTERM, with
the bytes received so far.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from manetkit import paths, procs
from manetkit.lab import netns
from manetkit.lab.stacks import node_address

BASE_PORT = 5201
# After the window: time for the clients' final exchange. Goodput is what the servers
# counted, so waiting longer for a client stuck in a partition only costs lab time.
GRACE_S = 5.0
RETRY_S = 1.0  # between a sender whose connect failed and the next one


@dataclass
class Flow:
    src: str
    dst: str
    port: int
    server: subprocess.Popen[bytes]
    server_out: Path
    client: subprocess.Popen[bytes] | None = None
    client_out: Path | None = None
    attempts: int = 0  # clients started (> 1: connect failed and was tried again)


def _popen(lab: str, node: str, argv: list[str], out: Path) -> subprocess.Popen[bytes]:
    with open(out, "wb") as f:
        return netns.popen(paths.netns_name(lab, node), argv, stdout=f, stderr=subprocess.STDOUT)


def start_servers(lab: str, pairs: list[tuple[str, str]], work: Path) -> list[Flow]:
    """One ``iperf3 -s -1`` per flow, on its receiver's mesh address."""
    flows = []
    for k, (src, dst) in enumerate(pairs):
        port = BASE_PORT + k
        out = work / f"iperf-{k}-server.json"
        argv = ["iperf3", "-s", "-1", "-J", "-p", str(port), "--bind", str(node_address(dst))]
        flows.append(Flow(src, dst, port, _popen(lab, dst, argv, out), out))
    return flows


def _listening(lab: str, flow: Flow) -> bool:
    proc = netns.run(
        paths.netns_name(lab, flow.dst), ["ss", "-Htln", f"sport = :{flow.port}"], check=False
    )
    return bool(proc.stdout.strip())


def connect_failed(path: Path) -> bool:
    """Whether an iperf3 client's JSON says it never connected (no route yet:
    ENETUNREACH / EHOSTUNREACH / a timeout), so a new client may try again."""
    try:
        error = str(json.loads(path.read_text()).get("error") or "")
    except (OSError, ValueError, AttributeError):
        return False
    return "unable to connect" in error


def _start_client(lab: str, flow: Flow, seconds: float, out: Path) -> None:
    flow.client_out = out
    argv = ["iperf3", "-c", str(node_address(flow.dst)), "-p", str(flow.port)]
    argv += ["-t", f"{seconds:.1f}", "-J", "--connect-timeout", f"{int(seconds * 1000)}"]
    flow.client = _popen(lab, flow.src, argv, out)
    flow.attempts += 1


def run(lab: str, flows: list[Flow], duration: float, work: Path) -> tuple[float, float]:
    """Start every sender, wait out the window; (wall start, wall end) of the window.

    A sender whose connect failed at once is started again (``RETRY_S`` apart, for what is
    left of the window) until the window ends. The peer stacks need this: babeld's nodes
    have a /32 on radio0 and no covering route, so before babeld has a route connect()
    fails with ENETUNREACH (batmand: EHOSTUNREACH once ARP gives up) and iperf3 never
    retries, while the manetkit stacks' mesh0 route holds the SYN during discovery. The
    time without a route still counts against the stack: goodput is the server's bytes
    over the whole window; ``attempts`` in the run's JSON says how many clients it took."""
    for flow in flows:
        procs.wait_for(lambda f=flow: _listening(lab, f), 10, f"iperf3 server on {flow.dst}")
    w0 = time.time()
    w1 = w0 + duration
    for k, flow in enumerate(flows):
        _start_client(lab, flow, duration, work / f"iperf-{k}-client.json")
    while time.time() < w1 - RETRY_S:
        time.sleep(RETRY_S)
        for k, flow in enumerate(flows):
            left = w1 - time.time()
            c, out = flow.client, flow.client_out
            if c is None or out is None or c.poll() is None or left < RETRY_S:
                continue
            if connect_failed(out):  # iperf3 -J exits 0 even then
                _start_client(lab, flow, left, work / f"iperf-{k}-client-{flow.attempts}.json")
    time.sleep(max(0.0, w1 - time.time()))
    deadline = time.monotonic() + GRACE_S
    for flow in flows:
        assert flow.client is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            flow.client.wait(max(0.1, deadline - time.monotonic()))
    return w0, w1


def stop(flows: list[Flow]) -> None:
    """Stop every iperf3 of the run (servers write their JSON on SIGTERM)."""
    running = [f.server for f in flows] + [f.client for f in flows if f.client is not None]
    procs.stop_all(running, grace=5)


def received_bytes(path: Path) -> int:
    """Bytes the iperf3 server received (0 when it never had a client)."""
    try:
        doc = json.loads(path.read_text())
        return int(doc["end"]["sum_received"]["bytes"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def results(flows: list[Flow], duration: float) -> list[dict[str, Any]]:
    out = []
    for flow in flows:
        got = received_bytes(flow.server_out)
        error = None
        try:
            error = json.loads(flow.server_out.read_text()).get("error")
        except (OSError, ValueError):
            error = "no iperf3 report"
        out.append(
            {
                "src": flow.src,
                "dst": flow.dst,
                "bytes": got,
                "goodput_kbps": round(got * 8 / duration / 1000, 1),
                "iperf3_error": error,
                "client_attempts": flow.attempts,
            }
        )
    return out
