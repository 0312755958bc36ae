"""The ``stream`` traffic: a deterministic TCP byte stream per pair (``manetkit.bench.stream``).

Each receiver (``python -m manetkit.bench.stream recv`` in its node, port
:data:`BASE_PORT` + k) records every read with its CLOCK_MONOTONIC time, shared by every
namespace; each sender starts ``lead_s`` before the window (so slow start and the first
discovery can fall before it) and writes until the window closes. Goodput is what the
receiver got between the window's two monotonic instants; ``intact`` says the bytes are a
prefix of the stream (its SHA-256; not with ``reconnect``, whose every connection restarts
the stream); the sender's error, or with ``reconnect`` its reconnects and errors by name.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from manetkit import paths, procs
from manetkit.bench import stream
from manetkit.bench.labrun import ns_python
from manetkit.lab import netns
from manetkit.lab.stacks import node_address

BASE_PORT = 5400
LISTEN_TIMEOUT_S = 10.0


@dataclass
class StreamFlow:
    src: str
    dst: str
    port: int
    recv_out: Path
    send_out: Path
    receiver: subprocess.Popen[bytes]
    sender: subprocess.Popen[bytes] | None = None


def _listening(lab: str, f: StreamFlow) -> bool:
    proc = netns.run(paths.netns_name(lab, f.dst), ["ss", "-Htln", f"sport = :{f.port}"],
                     check=False)  # fmt: skip
    return bool(proc.stdout.strip())


def start(lab: str, pairs: list[tuple[str, str]], work: Path, reconnect: bool) -> list[StreamFlow]:
    """A receiver per flow, listening, then its sender."""
    flows = []
    for k, (src, dst) in enumerate(pairs):
        port = BASE_PORT + k
        rx, tx = work / f"stream-{k}-recv.json", work / f"stream-{k}-send.json"
        for f in (rx, tx, rx.with_suffix(".first")):
            f.unlink(missing_ok=True)
        argv = ["recv", "--port", str(port), "--out", str(rx)] + (["--many"] if reconnect else [])
        r = ns_python(lab, dst, "manetkit.bench.stream", *argv, stderr=subprocess.DEVNULL)
        flows.append(StreamFlow(src, dst, port, rx, tx, r))
    for f in flows:
        procs.wait_for(lambda f=f: _listening(lab, f), LISTEN_TIMEOUT_S, f"stream receiver {f.dst}")
    for f in flows:
        argv = ["send", "--addr", str(node_address(f.dst)), "--port", str(f.port),
                "--out", str(f.send_out)] + (["--reconnect"] if reconnect else [])  # fmt: skip
        f.sender = ns_python(lab, f.src, "manetkit.bench.stream", *argv,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    return flows


def window(duration: float) -> tuple[float, float, float, float]:
    """Open the window now and wait it out: (wall start, wall end, monotonic start,
    monotonic end)."""
    m0, w0 = time.monotonic(), time.time()
    time.sleep(duration)
    return w0, w0 + (time.monotonic() - m0), m0, time.monotonic()


def stop(flows: list[StreamFlow]) -> None:
    """Senders first (their byte counts), then the receivers (they write on SIGTERM)."""
    procs.stop_all([f.sender for f in flows if f.sender is not None], grace=10)
    procs.stop_all([f.receiver for f in flows], grace=10)


def results(
    flows: list[StreamFlow], m0: float, m1: float, reconnect: bool
) -> tuple[list[dict[str, Any]], list[list[tuple[float, int]]]]:
    """Per flow: its goodput over [m0, m1] and what its ends said; and the receivers'
    samples (for the plug-ins)."""
    out, all_samples = [], []
    for f in flows:
        rx, tx = stream.read_result(f.recv_out), stream.read_result(f.send_out)
        samples = stream.samples_of(rx)
        all_samples.append(samples)
        got = int(rx.get("bytes", 0))
        doc: dict[str, Any] = {
            "src": f.src,
            "dst": f.dst,
            "bytes": got,
            "goodput_kbps": round(stream.goodput_kbps(samples, m0, m1), 1),
            "bytes_sent": int(tx.get("sent", 0)),
            "connections": int(rx.get("connections", 0)),
        }
        if reconnect:
            doc["reconnects"] = max(0, int(tx.get("attempts", 1)) - 1)
            doc["sender_errors"] = tx.get("errors") or ({"no sender report": 1} if not tx else {})
        else:
            doc["intact"] = got > 0 and rx.get("sha256") == stream.stream_sha256(got)
            doc["sender_error"] = tx.get("error") if tx else "no sender report"
            doc["receiver_error"] = rx.get("error") if rx else "no receiver report"
        out.append(doc)
    return out, all_samples
