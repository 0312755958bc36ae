"""HTTP sessions after Dyer & Boppana (section III): web servers in M nodes, browsers in N.

Each server node runs Python's own ``http.server`` (a real HTTP/1.0 server, a new TCP
connection per object as the browsers of the paper's traffic generator) over a site
made by :func:`build_site`: ``pages`` HTML pages, each embedding a random number of
objects of random sizes, drawn from a seed, so every stack at that seed serves the same
site. Each client node runs :mod:`manetkit.experiment.webclient`: fetch a page, then its
objects one after another; think uniform in ``think_s`` (0-15 s, the paper's truncation);
repeat until the window ends. A connect that fails for lack of a route is tried again
within the page's timeout (``connect_retries`` per pair), as a bulk sender is restarted.

The sizes: page HTML lognormal around 6 KB, 0..10 objects (geometric, mean 3) of
lognormal size around 8 KB, each capped at 100 KB. The paper does not give its
generator's distributions; these are small enough that a page fits a 2 Mbit/s multi-hop
path in a few seconds, so service time measures routing, not bandwidth.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from manetkit import paths, procs
from manetkit.lab import netns
from manetkit.lab.stacks import node_address

MAX_OBJECTS = 10
CAP = 100_000


def _size(rng: random.Random, median: float) -> int:
    return max(200, min(CAP, int(rng.lognormvariate(0, 1.0) * median)))


def build_site(root: Path, pages: int, seed: int) -> dict[str, Any]:
    """Write ``page0.html .. page{pages-1}.html`` and their objects under ``root``."""
    rng = random.Random(f"site-{seed}")
    root.mkdir(parents=True, exist_ok=True)
    total_objects = 0
    for p in range(pages):
        n = 0
        while n < MAX_OBJECTS and rng.random() < 0.75:  # geometric, mean 3
            n += 1
        links = []
        for j in range(n):
            name = f"obj{p}_{j}.bin"
            (root / name).write_bytes(rng.randbytes(_size(rng, 8000)))
            links.append(f'<img src="/{name}">')
        head = f"<html><body><h1>page {p}</h1>\n" + "\n".join(links) + "\n<p>"
        filler = "x" * max(0, _size(rng, 6000) - len(head) - 20)
        (root / f"page{p}.html").write_text(head + filler + "</p></body></html>\n")
        total_objects += n
    return {"pages": pages, "objects": total_objects, "seed": seed}


def start_server(lab: str, node: str, port: int, root: Path) -> subprocess.Popen[bytes]:
    """``python3 -m http.server`` on ``node``'s mesh address."""
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", str(node_address(node))]
    argv += ["--directory", str(root)]
    return netns.popen(
        paths.netns_name(lab, node), argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def wait_listening(lab: str, node: str, port: int) -> None:
    def up() -> bool:
        proc = netns.run(
            paths.netns_name(lab, node), ["ss", "-Htln", f"sport = :{port}"], check=False
        )
        return bool(proc.stdout.strip())

    procs.wait_for(up, 10, f"HTTP server on {node}:{port}")


def start_client(
    lab: str,
    client: str,
    server: str,
    port: int,
    *,
    duration: float,
    think: tuple[float, float],
    timeout: float,
    pages: int,
    seed: int,
    out: Path,
) -> subprocess.Popen[bytes]:
    argv = [
        "ip", "netns", "exec", paths.netns_name(lab, client), sys.executable, "-m",
        "manetkit.experiment.webclient", "--url", f"http://{node_address(server)}:{port}",
        "--duration", f"{duration:g}", "--think", f"{think[0]:g},{think[1]:g}",
        "--timeout", f"{timeout:g}", "--pages", str(pages), "--seed", str(seed),
        "--client-id", client, "--out", str(out), "--retry-no-route",
    ]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def pair_result(client: str, server: str, out: Path) -> dict[str, Any]:
    """One client's pages summarised: completed, failed, service times (s), connects
    tried again for lack of a route (0 in pages of a client without the retry)."""
    try:
        pages = json.loads(out.read_text())["pages"]
    except (OSError, ValueError, KeyError):
        pages = []
    done = [p["service_s"] for p in pages if p["ok"]]
    failed = [p for p in pages if not p["ok"] and not p.get("cut")]
    return {
        "client": client,
        "server": server,
        "pages_completed": len(done),
        "pages_failed": len(failed),
        "pages_cut": sum(1 for p in pages if p.get("cut")),
        "service_s": summary(done),
        "bytes": sum(p["bytes"] for p in pages if p["ok"]),
        "connect_retries": sum(p.get("connect_retries", 0) for p in pages),
        "errors": sorted({p["error"] for p in failed if p.get("error")})[:5],
        "pages": pages,
    }


def summary(xs: list[float]) -> dict[str, float | None]:
    """Mean, median and 90th percentile (nearest rank) of service times."""
    if not xs:
        return {"mean": None, "median": None, "p90": None}
    s = sorted(xs)
    return {
        "mean": round(sum(s) / len(s), 3),
        "median": round(
            s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2, 3
        ),
        "p90": round(s[min(len(s) - 1, max(0, -(-9 * len(s) // 10) - 1))], 3),
    }
