"""A deterministic TCP byte stream between two lab nodes, and its goodput from the
receiver's samples.

The sender writes the stream block after block (:func:`stream_block`: each block distinct,
so an offset error changes the hash); the receiver records (CLOCK_MONOTONIC time, total
bytes) per read and the SHA-256 of what it got, so a run checks that the application's
byte stream arrived whole (a prefix of what was sent, :func:`stream_sha256`) and reads
its goodput over any window (:func:`goodput_kbps`) and the first byte after any moment
(:func:`recoveries`). Both ends run inside a node as ``python -m manetkit.bench.stream
send|recv``:

* ``send`` (one connection, the default) writes until SIGTERM and records any error;
  ``send --reconnect`` dials again ``--retry`` s after a reset or a failed connect, so a
  flow whose connection a proxy reset still counts for the rest of the window (the
  experiment's ``stream`` traffic with ``reconnect: true``; Lim/Xu/Gerla's flows);
* ``recv`` accepts one connection and hashes it; ``recv --many`` accepts every
  connection to the port and reads them all (a reconnecting sender's new connection may
  arrive while its old one still hangs here), without a hash.

Both write their result as JSON on SIGTERM (``--out``). ``manetkit bench proxy`` and the
experiment runner use them.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import json
import os
import random
import selectors
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

BLOCK = 65536
RETRY_S = 1.0  # a reconnecting sender's pause before it dials again
CONNECT_TIMEOUT_S = 30.0


# --- the stream -------------------------------------------------------------------------


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
    """SIGTERM from the driver: the window is over."""


def stop_on_term(*_: object) -> None:
    raise Stop


def _error_name(exc: OSError) -> str:
    """``ECONNRESET``, ``ENETUNREACH``...; the exception's class when it has no errno
    (a connect timeout)."""
    return errno.errorcode.get(exc.errno or -1, type(exc).__name__)


# --- the ends (run inside lab nodes) ------------------------------------------------------


def send(addr: str, port: int, out: Path, mark: int | None = None) -> None:
    """Connect and write the stream until SIGTERM; record bytes written and any error.
    ``mark``: SO_MARK (the proxy's own mark makes the connection bypass interception)."""
    signal.signal(signal.SIGTERM, stop_on_term)
    res: dict = {"sent": 0, "error": None, "attempts": 1}
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


def send_reconnecting(
    addr: str,
    port: int,
    out: Path,
    retry_s: float = RETRY_S,
    connect_timeout: float = CONNECT_TIMEOUT_S,
) -> None:
    """A bulk TCP sender that keeps sending for the whole window: connect, write until
    the connection fails, then ``retry_s`` later connect again, until SIGTERM.

    A flow whose connection the fixed-RTO proxy reset after ``partition_timeout``
    (docs/proxy.md) or whose connect failed (ENETUNREACH, refused, timed out) is dialled
    again, so the rest of the window still counts what the network can carry rather than
    a 0 from the first reset; the time until the flow is back counts against the stack.
    ``OUT`` (JSON, written on SIGTERM): bytes written, connect ``attempts`` (``attempts -
    1`` are the reconnects), ``connects`` that succeeded, and each error by errno name;
    each error is also a line on stderr. Each connection restarts the stream, so the
    receiver cannot hash it (``recv --many``)."""
    signal.signal(signal.SIGTERM, stop_on_term)
    res: dict[str, Any] = {"sent": 0, "attempts": 0, "connects": 0, "errors": {},
                           "last_error": None}  # fmt: skip
    block = memoryview(stream_block(0))
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
    except Stop:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out.write_text(json.dumps(res))
    os._exit(0)


def recv(port: int, out: Path) -> None:
    """Accept one connection and read until SIGTERM, recording (time, total bytes) per
    read (CLOCK_MONOTONIC, shared by every namespace); ``OUT.first`` marks the first byte."""
    signal.signal(signal.SIGTERM, stop_on_term)
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("0.0.0.0", port))
    lsock.listen(1)
    res: dict = {"bytes": 0, "samples": [], "error": None, "eof": False, "connections": 0}
    h = hashlib.sha256()
    try:
        conn, _ = lsock.accept()
        res["connections"] = 1
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


def recv_many(port: int, out: Path) -> None:
    """Accept every connection to ``port`` and read them all until SIGTERM, recording
    (CLOCK_MONOTONIC time, total bytes over all connections) per read. ``OUT`` (JSON,
    written on SIGTERM) adds the connections accepted, how many ended in EOF, and each
    receive error by errno name."""
    signal.signal(signal.SIGTERM, stop_on_term)
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
                    if not res["bytes"]:
                        out.with_suffix(".first").touch()
                    res["bytes"] += n
                    res["samples"].append((round(time.monotonic(), 4), res["bytes"]))
                    continue
                res["eofs"] += n == 0
                sel.unregister(sock)
                sock.close()
    except Stop:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out.write_text(json.dumps(res))
    os._exit(0)


# --- analysis (pure) -------------------------------------------------------------------------


def goodput_kbps(samples: list[tuple[float, int]], t0: float, t1: float) -> float:
    """Application bytes received in [t0, t1], as kbit/s."""
    before = max((b for t, b in samples if t < t0), default=0)
    upto = max((b for t, b in samples if t <= t1), default=0)
    return (upto - before) * 8 / 1000 / (t1 - t0)


def read_result(path: Path) -> dict[str, Any]:
    """A ``recv``/``send`` ``--out`` file ({} if the end wrote none: killed, never run)."""
    try:
        got = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def samples_of(result: dict[str, Any]) -> list[tuple[float, int]]:
    return [(float(t), int(b)) for t, b in result.get("samples", [])]


def received_kbps(result: Path, t0: float, t1: float) -> float:
    """:func:`goodput_kbps` of a ``recv --out`` file (0 if the receiver wrote none)."""
    return goodput_kbps(samples_of(read_result(result)), t0, t1)


def recoveries(samples: list[tuple[float, int]], ups: list[float], t1: float) -> list[float | None]:
    """For each restoration time, seconds until the next received byte (None: none before
    the window's end ``t1``)."""
    out: list[float | None] = []
    for u in ups:
        nxt = next((t for t, _ in samples if t > u), None)
        out.append(round(nxt - u, 3) if nxt is not None and nxt <= t1 else None)
    return out


def _main(argv: list[str]) -> None:
    """``python -m manetkit.bench.stream send ... | recv ...``: a stream's two ends."""
    p = argparse.ArgumentParser(prog="manetkit.bench.stream")
    sub = p.add_subparsers(dest="role", required=True)
    sd = sub.add_parser("send")
    sd.add_argument("--addr", required=True)
    sd.add_argument("--port", type=int, required=True)
    sd.add_argument("--out", type=Path, required=True)
    sd.add_argument("--mark", type=int, default=None, help="SO_MARK of the socket")
    sd.add_argument("--reconnect", action="store_true", help="dial again after a failure")
    sd.add_argument("--retry", type=float, default=RETRY_S, help="s between dials (1)")
    rv = sub.add_parser("recv")
    rv.add_argument("--port", type=int, required=True)
    rv.add_argument("--out", type=Path, required=True)
    rv.add_argument("--many", action="store_true", help="every connection, no hash")
    a = p.parse_args(argv)
    if a.role == "send" and a.reconnect:
        send_reconnecting(a.addr, a.port, a.out, retry_s=a.retry)
    elif a.role == "send":
        send(a.addr, a.port, a.out, a.mark)
    elif a.many:
        recv_many(a.port, a.out)
    else:
        recv(a.port, a.out)


if __name__ == "__main__":
    _main(sys.argv[1:])
