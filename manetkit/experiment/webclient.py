"""One HTTP session client (Dyer & Boppana, section III), run inside a lab node:

    python -m manetkit.experiment.webclient --url http://10.42.0.3:8080 --duration 60 \\
        --think 0,15 --timeout 30 --pages 20 --seed 1 --out pages.json

Alternates transactions and think times until ``--duration`` s have passed: a transaction
fetches a random page, then each object it embeds (``src="..."``), one after another, a
new HTTP/1.0 connection each. Its *service time* is from the page's request to the last
object's last byte. A page fails on any error (refused, reset, a short body, a status
other than 200) or when it is not done ``--timeout`` s after it began; a page still
running when the window ends is ``cut`` (neither completed nor failed). The pages are
written as JSON to ``--out`` at the end, or on SIGTERM.

With ``--retry-no-route`` a connect that fails for lack of a route (ENETUNREACH, or
EHOSTUNREACH once ARP gave up) is tried again, ``RETRY_FIRST_S`` doubling up to
``RETRY_MAX_S`` apart, until the page's timeout or the window's end: babeld's nodes have
a /32 on radio0 and no covering route, so before babeld's first route a connect fails in
a millisecond, while the manetkit stacks' mesh0 route holds the SYN during discovery. The
time without a route still counts against the stack (it is in the service time, or the
page times out); each page records its ``connect_retries``. The bulk traffic restarts
such a sender the same way (:mod:`manetkit.experiment.bulk`). The option is off by
default so that a runner started before it existed keeps its behaviour for the rest of
its matrix; :func:`manetkit.experiment.web.start_client` passes it.
"""

from __future__ import annotations

import argparse
import errno
import http.client
import json
import random
import re
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

_SRC = re.compile(rb'src="([^"]+)"')
NO_ROUTE = frozenset({errno.ENETUNREACH, errno.EHOSTUNREACH})
RETRY_FIRST_S = 0.1
RETRY_MAX_S = 1.0  # as the bulk traffic's RETRY_S


class _Cut(Exception):
    """The window ended during the page."""


@dataclass
class NoRouteRetry:
    """Try a connect that failed for lack of a route again; ``count``: tries made again."""

    count: int = 0


def connect(
    conn: http.client.HTTPConnection, until: float, retry: NoRouteRetry | None = None
) -> None:
    """Open ``conn``, its timeout what is left before ``until``. With ``retry``, a connect
    that failed with no route is tried again (``RETRY_FIRST_S`` doubling up to
    ``RETRY_MAX_S`` apart) until ``until``; then the last error is raised."""
    wait = RETRY_FIRST_S
    while True:
        conn.timeout = max(0.001, until - time.monotonic())
        try:
            conn.connect()
            return
        except OSError as exc:
            if retry is None or exc.errno not in NO_ROUTE:
                raise
            left = until - time.monotonic()
            time.sleep(max(0.0, min(wait, left)))
            if left <= wait:
                raise
            retry.count += 1
            wait = min(2 * wait, RETRY_MAX_S)


def fetch(
    host: str,
    port: int,
    path: str,
    until: float,
    window_end: float,
    retry: NoRouteRetry | None = None,
) -> bytes:
    """GET ``path``; the body. Raises on error, timeout (``until``) or the window's end;
    with ``retry``, a connect with no route is tried again until then (:func:`connect`).

    The deadline is for the whole transfer: a socket timeout alone bounds each receive,
    so a body trickling in over a failing route would finish long after the page's
    timeout (or the window's end) and count as a completed page."""
    deadline = min(until, window_end)

    def left() -> float:
        r = deadline - time.monotonic()
        if r <= 0:
            raise _Cut() if window_end <= until else TimeoutError("page timeout")
        return r

    conn = http.client.HTTPConnection(host, port, timeout=left())
    try:
        connect(conn, deadline, retry)
        sock = conn.sock  # the response reads from it after conn closes (Connection: close)
        assert sock is not None
        sock.settimeout(left())
        conn.request("GET", path, headers={"Connection": "close"})
        sock.settimeout(left())
        resp = conn.getresponse()
        chunks = []
        while not resp.isclosed():  # closed (the socket with it) once the body is in
            sock.settimeout(left())
            chunk = resp.read1(65536)  # one receive: read() would wait for all 64 KiB
            if not chunk:
                break
            chunks.append(chunk)
        body = b"".join(chunks)
        if resp.status != 200:
            raise OSError(f"HTTP {resp.status} for {path}")
        length = resp.getheader("Content-Length")
        if length is not None and int(length) != len(body):
            raise OSError(f"short body for {path}: {len(body)} of {length} bytes")
        return body
    finally:
        conn.close()


def page(
    host: str,
    port: int,
    k: int,
    timeout: float,
    window_end: float,
    retry_no_route: bool = False,
) -> dict[str, Any]:
    """One transaction: the page and its objects (``connect_retries``: connects tried
    again for lack of a route, with ``retry_no_route``)."""
    t0 = time.monotonic()
    rec: dict[str, Any] = {"start": round(time.time(), 3), "page": k, "objects": 0, "bytes": 0}
    until = t0 + timeout
    retry = NoRouteRetry() if retry_no_route else None
    try:
        body = fetch(host, port, f"/page{k}.html", until, window_end, retry)
        rec["bytes"] += len(body)
        objects = [m.decode() for m in _SRC.findall(body)]
        rec["objects"] = len(objects)
        for obj in objects:
            rec["bytes"] += len(fetch(host, port, obj, until, window_end, retry))
    except _Cut:
        rec.update(ok=False, cut=True)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        cut = time.monotonic() >= window_end
        rec.update(ok=False, cut=cut, error=f"{type(exc).__name__}: {exc}"[:120])
    else:
        rec.update(ok=True, service_s=round(time.monotonic() - t0, 4))
    rec["connect_retries"] = retry.count if retry is not None else 0
    return rec


def session(args: argparse.Namespace, pages: list[dict[str, Any]]) -> None:
    url = urlsplit(args.url)
    host, port = url.hostname or "", url.port or 80
    lo, hi = (float(x) for x in args.think.split(","))
    rng = random.Random(f"client-{args.seed}-{args.url}-{args.client_id}")
    end = time.monotonic() + args.duration
    time.sleep(min(rng.uniform(0, 1), args.duration))  # clients do not start in step
    while time.monotonic() < end:
        k = rng.randrange(args.pages)
        pages.append(page(host, port, k, args.timeout, end, args.retry_no_route))
        time.sleep(max(0.0, min(rng.uniform(lo, hi), end - time.monotonic())))


def write(out: Path, url: str, pages: list[dict[str, Any]]) -> None:
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"url": url, "pages": pages}) + "\n")
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m manetkit.experiment.webclient")
    p.add_argument("--url", required=True, help="http://SERVER:PORT")
    p.add_argument("--duration", type=float, required=True)
    p.add_argument("--think", default="0,15", help="uniform think time lo,hi (s)")
    p.add_argument("--timeout", type=float, default=30.0, help="page timeout (s)")
    p.add_argument("--pages", type=int, default=20, help="pages on the site")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--client-id", default="", help="more randomness (several clients)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--retry-no-route",
        action="store_true",
        help="try a connect that failed for lack of a route again within the page timeout",
    )
    args = p.parse_args(argv)
    pages: list[dict[str, Any]] = []

    def on_term(signum: int, frame: object) -> None:
        write(args.out, args.url, pages)
        sys.exit(0)

    # Restored on return: tests call main() in their own process. (A child forked
    # without exec gets the default SIGTERM back: manetkit.lab.netns.)
    old = signal.signal(signal.SIGTERM, on_term)
    try:
        session(args, pages)
        write(args.out, args.url, pages)
    finally:
        signal.signal(signal.SIGTERM, old)
    return 0


if __name__ == "__main__":
    sys.exit(main())
