"""Constant-bit-rate UDP flows: the background load of Dyer & Boppana (section III: 10 CBR
connections of 512-byte packets, 100 kbit/s in all) and of Lim, Xu & Gerla's 1 TCP + 4
CBR runs (``configs/experiments/smr.yaml``).

Both ends run inside a lab node as ``python -m manetkit.bench.cbr send|recv`` until
SIGTERM, then write what they counted as JSON (``--out``), so a run can report the
offered load and how much of it the mesh delivered. A send that fails (no route yet:
ENETUNREACH) is counted as an error, not retried: CBR does not wait.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import socket
import sys
import time
from pathlib import Path

from manetkit.bench.stream import Stop, stop_on_term

PACKET_BYTES = 512
PPS = 4.0


def send(
    dst: str, port: int, size: int = PACKET_BYTES, pps: float = PPS, out: Path | None = None
) -> None:
    """``size``-byte datagrams to ``dst``:``port`` at ``pps`` on a fixed schedule (a late
    tick does not send a burst to catch up) until SIGTERM."""
    signal.signal(signal.SIGTERM, stop_on_term)
    res: dict[str, float] = {"sent": 0, "errors": 0, "bytes": size, "pps": pps}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = b"\0" * size
    t = start = time.monotonic()
    try:
        while True:
            try:
                s.sendto(payload, (dst, port))
                res["sent"] += 1
            except OSError:
                res["errors"] += 1
            t = max(t + 1 / pps, time.monotonic())
            time.sleep(t - time.monotonic())
    except (Stop, KeyboardInterrupt):
        pass
    finally:
        res["elapsed_s"] = round(time.monotonic() - start, 3)  # first send to the stop
        if out is not None:
            out.write_text(json.dumps(res))


def recv(port: int, out: Path, bind: str = "0.0.0.0") -> None:
    """Count the datagrams arriving on ``port`` until SIGTERM."""
    signal.signal(signal.SIGTERM, stop_on_term)
    res = {"received": 0, "bytes": 0}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((bind, port))
    try:
        while True:
            res["bytes"] += len(s.recv(65535))
            res["received"] += 1
    except (Stop, KeyboardInterrupt):
        pass
    finally:
        out.write_text(json.dumps(res))


def read(path: Path, key: str) -> int | None:
    """One counter of an end's JSON; None if the end wrote none (it never ran)."""
    with contextlib.suppress(OSError, ValueError):
        return int(json.loads(path.read_text())[key])
    return None


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="manetkit.bench.cbr")
    sub = p.add_subparsers(dest="role", required=True)
    sd = sub.add_parser("send")
    sd.add_argument("dst")
    sd.add_argument("port", type=int)
    sd.add_argument("--bytes", type=int, default=PACKET_BYTES)
    sd.add_argument("--pps", type=float, default=PPS)
    sd.add_argument("--out", type=Path)
    rv = sub.add_parser("recv")
    rv.add_argument("port", type=int)
    rv.add_argument("--bind", default="0.0.0.0")
    rv.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    if a.role == "send":
        send(a.dst, a.port, a.bytes, a.pps, a.out)
    else:
        recv(a.port, a.out, a.bind)


if __name__ == "__main__":
    main(sys.argv[1:])
