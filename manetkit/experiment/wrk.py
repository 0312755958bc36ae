"""Raw HTTP load over the mesh with ``wrk`` (Debian package ``wrk``).

``wrk`` is closed loop: each of ``connections`` keeps one request outstanding, so the
request rate is what the mesh carries, not an offered load (an open-loop tool such as
wrk2 would be needed for that). The client node runs ``wrk --latency`` against
``page0.html`` of the site :mod:`manetkit.experiment.web` serves; its text report is
parsed here.

wrk makes one blocking connect before it starts and exits at once ("unable to connect to
HOST:PORT Network is unreachable", exit 1, no report) when that fails: a peer stack such
as babeld before its first route (no covering route: ENETUNREACH; batmand: EHOSTUNREACH
once ARP gave up). :func:`run` starts it again, ``RETRY_S`` apart, for what is left of
the window, as the bulk traffic restarts such a sender (:mod:`manetkit.experiment.bulk`);
``attempts`` counts the wrk runs, and after a retry ``requests_per_s`` is over the whole
window (wrk's own rate over its shorter run is kept as ``wrk_requests_per_s``), so the
time without a route still counts against the stack.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from typing import Any

from manetkit.errors import UserError
from manetkit.lab import netns

RETRY_S = 1.0  # between a wrk that could not connect and the next, as bulk's RETRY_S

_UNIT_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def require() -> None:
    """Refuse a wrk traffic before anything runs when the tool is missing."""
    if shutil.which("wrk") is None:
        raise UserError("traffics: kind wrk needs the wrk tool (apt-get install wrk)")


def argv(url: str, connections: int, threads: int, duration: float) -> list[str]:
    return ["wrk", "--latency", "-t", str(min(threads, connections)), "-c", str(connections),
            "-d", f"{max(1, round(duration))}s", "--timeout", "10s", url]  # fmt: skip


def _seconds(text: str) -> float | None:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    return float(m.group(1)) * _UNIT_S[m.group(2)] if m else None


def parse(out: str) -> dict[str, Any]:
    """Requests, errors, requests/s and latency (mean, p50, p90, p99, in s) of a report."""
    res: dict[str, Any] = {"requests": 0, "errors": 0, "requests_per_s": None, "latency_s": {}}
    if m := re.search(r"(\d+) requests in", out):
        res["requests"] = int(m.group(1))
    if m := re.search(r"Requests/sec:\s+([\d.]+)", out):
        res["requests_per_s"] = float(m.group(1))
    if m := re.search(r"Latency\s+(\S+)", out):
        res["latency_s"]["mean"] = _seconds(m.group(1))
    for pct in ("50", "90", "99"):
        if m := re.search(rf"^\s+{pct}(?:\.0+)?%\s+(\S+)", out, re.M):
            res["latency_s"][f"p{pct}"] = _seconds(m.group(1))
    if m := re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out):
        res["errors"] += sum(int(g) for g in m.groups())
    if m := re.search(r"Non-2xx or 3xx responses: (\d+)", out):
        res["errors"] += int(m.group(1))
    return res


def connect_failed(proc: subprocess.CompletedProcess[str]) -> bool:
    """Whether wrk exited at its first connect (no route yet), so a new one may try."""
    return proc.returncode != 0 and "unable to connect" in (proc.stderr or "")


def run(ns: str, url: str, connections: int, threads: int, duration: float) -> dict[str, Any]:
    """wrk in namespace ``ns`` for ``duration`` s: its parsed report, ``exit`` and
    ``attempts``; one that could not connect is started again for what is left of the
    window while at least a 1 s run fits after ``RETRY_S``."""
    end = time.monotonic() + duration
    attempts = 0
    while True:
        left = end - time.monotonic()
        proc = netns.run(ns, argv(url, connections, threads, left), check=False, timeout=left + 30)
        attempts += 1
        if not connect_failed(proc) or end - time.monotonic() < RETRY_S + 1:
            break
        time.sleep(RETRY_S)
    res = {**parse(proc.stdout), "exit": proc.returncode, "attempts": attempts}
    if attempts > 1:
        res["wrk_requests_per_s"] = res["requests_per_s"]
        res["requests_per_s"] = round(res["requests"] / duration, 2)
    return res
