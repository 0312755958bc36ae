"""Raw HTTP load over the mesh with ``wrk`` (Debian package ``wrk``).

``wrk`` is closed loop: each of ``connections`` keeps one request outstanding, so the
request rate is what the mesh carries, not an offered load (an open-loop tool such as
wrk2 would be needed for that). The client node runs ``wrk --latency`` against
``page0.html`` of the site :mod:`manetkit.experiment.web` serves; its text report is
parsed here.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

from manetkit.errors import UserError

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
