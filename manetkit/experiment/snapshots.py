"""What every node's routing held at the window's start, middle and end.

Each snapshot reads, in every node of the lab: its kernel routes (``ip -j route show
table all``), its neighbour table with statistics (``ip -j -s neigh show``), and the
routing daemon's own view: babeld's ``dump`` (its local socket), batmand's originator
table (its socket, debug level 1: what ``batmand -c -b -d 1`` prints), a manetkit
daemon's ``status``. The raw snapshot is kept beside the run's JSON
(``runs/<name>/snapshot-<moment>.json.gz``; large, git-ignored under ``docs/results``),
and :func:`summarise` reduces it, for each traffic pair, to what a reader asks first: did
the source have a route to the destination, along which next hops, and was the next hop
reachable (the kernel's neighbour state, or the daemon's neighbour table) and, from the
medium's ground truth afterwards, in radio range (:func:`in_range`).

Reading a 30-node lab takes 60 short ``ip`` processes (8 at a time) and one socket
request per daemon; the middle snapshot is inside the window, where the fidelity record
counts its CPU with everything else.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from manetkit import paths
from manetkit.daemonstatus import (
    AodvStatus,
    DaemonStatus,
    SourceRouteStatus,
    StatusError,
    fetch_status,
)
from manetkit.lab import peers
from manetkit.lab.stacks import node_address

MOMENTS = ("start", "middle", "end")
PARALLEL = 8  # ip processes at once
TIMEOUT_S = 10.0
# Kernel neighbour states that mean "the link layer answered recently enough" (ip-neighbour(8))
REACHABLE_STATES = {"REACHABLE", "STALE", "DELAY", "PROBE", "PERMANENT", "NOARP"}

Pair = tuple[str, str]


def _run_all(argvs: list[list[str]]) -> list[str]:
    """stdout of each argv (run :data:`PARALLEL` at a time; "" on failure)."""
    out = [""] * len(argvs)
    for lo in range(0, len(argvs), PARALLEL):
        batch = [
            (k, subprocess.Popen(argvs[k], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True))
            for k in range(lo, min(lo + PARALLEL, len(argvs)))
        ]  # fmt: skip
        for k, p in batch:
            try:
                out[k], _ = p.communicate(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
    return out


def batmand_originators(lab: str, node: str, timeout: float = 3.0) -> str:
    """batmand's originator table (its unix socket, debug level 1: one ``BOD`` ..
    ``EOD`` block, as ``batmand -c -b -d 1`` prints it)."""
    path = peers.batmand_run_dir(lab, node) / "batmand.socket"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        peers.connect_unix(s, path)
        s.sendall(b"d:\x01".ljust(30, b"\0"))  # the client's request: 30 bytes
        buf = b""
        deadline = time.monotonic() + timeout
        with contextlib.suppress(TimeoutError):
            while time.monotonic() < deadline and b"EOD\n" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
    text = buf.decode(errors="replace")
    start = text.find("BOD")
    end = text.find("EOD", start)
    return text[start : end + 3] if start >= 0 and end >= 0 else text


def _daemon_view(lab: str, node: str, stack: str) -> Any:
    try:
        if stack == "babeld":
            return peers.babeld_request(peers.babeld_socket(lab, node), "dump", timeout=2)
        if stack == "batmand":
            return batmand_originators(lab, node)
        if stack in ("dsr", "aodv", "smr"):
            return fetch_status(paths.daemon_socket(lab, node), 5).to_wire()
    except (OSError, ValueError, StatusError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    return None


def take(lab: str, nodes: Iterable[str], stack: str) -> dict[str, Any]:
    """A raw snapshot of every node (wall ``time``, then per node ``route``, ``neigh``
    as ``ip -j`` printed them, parsed, and ``daemon``: the daemon's own view)."""
    names = list(nodes)
    t = time.time()
    argvs = []
    for n in names:
        ns = paths.netns_name(lab, n)
        argvs += [["ip", "-j", "-n", ns, "route", "show", "table", "all"],
                  ["ip", "-j", "-s", "-n", ns, "neigh", "show"]]  # fmt: skip
    texts = _run_all(argvs)
    out: dict[str, Any] = {"time": round(t, 3), "stack": stack, "nodes": {}}
    for k, n in enumerate(names):
        out["nodes"][n] = {
            "route": _json_list(texts[2 * k]),
            "neigh": _json_list(texts[2 * k + 1]),
            "daemon": _daemon_view(lab, n, stack),
        }
    return out


def _json_list(text: str) -> list[Any]:
    try:
        got = json.loads(text or "[]")
    except ValueError:
        return []
    return got if isinstance(got, list) else []


def save(snapshot: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        json.dump(snapshot, f, separators=(",", ":"))
    return path


def load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as f:
        return json.load(f)


# --- the summary (pure) ----------------------------------------------------------------------


def _node_of(addr: str | None) -> str | None:
    if not addr:
        return None
    tail = addr.split("/")[0].split(".")
    if len(tail) != 4 or tail[:2] != ["10", "42"]:
        return None
    i = int(tail[2]) * 256 + int(tail[3])
    return f"n{i}" if i > 0 else None


def kernel_next_hop(routes: list[dict[str, Any]], dst: str) -> str | None:
    """The next hop (node name) of a kernel host route to ``dst`` (a node name): its
    gateway, or ``dst`` itself for an on-link route; None without one."""
    addr = str(node_address(dst))
    for rt in routes:
        if rt.get("table") == "local" or rt.get("type", "unicast") != "unicast":
            continue
        if rt.get("dst") in (addr, f"{addr}/32"):
            return _node_of(rt.get("gateway")) or dst
    return None


def daemon_status(raw: Any) -> DaemonStatus | None:
    """A snapshot's ``daemon`` as a manetkit daemon's status; None for an error record."""
    try:
        return DaemonStatus.from_wire(raw) if isinstance(raw, dict) else None
    except StatusError:
        return None


def daemon_route(status: DaemonStatus | None, dst: str) -> list[str] | str | None:
    """A manetkit daemon's route to ``dst``: the whole path (DSR/SMR source routes; SMR's
    primary first, then DSR's cache) as a list of node names, or the next hop (AODV),
    or None."""
    engine = status.engine if status is not None else None
    addr = str(node_address(dst))
    if isinstance(engine, SourceRouteStatus):
        path = engine.path_to(addr)
        return [_node_of(a) or a for a in path] if path else None
    if isinstance(engine, AodvStatus):
        return _node_of(engine.next_hop(addr))
    return None


def walk(next_hop: Callable[[str], str | None], src: str, dst: str, limit: int) -> list[str]:
    """The hop-by-hop path from ``src`` following ``next_hop(node)`` towards ``dst``; it
    stops at ``dst``, at a node with no route, or at a loop."""
    path = [src]
    while path[-1] != dst and len(path) <= limit:
        nxt = next_hop(path[-1])
        if nxt is None or nxt in path:
            break
        path.append(nxt)
    return path


def neigh_state(neigh: list[dict[str, Any]], node: str) -> str | None:
    """The kernel neighbour state(s) of ``node``'s address (``REACHABLE``, ``FAILED``..)."""
    addr = str(node_address(node))
    for e in neigh:
        if e.get("dst") == addr:
            state = e.get("state") or []
            return "/".join(state) if isinstance(state, list) else str(state)
    return None


def daemon_neighbour_up(status: DaemonStatus | None, node: str) -> bool | None:
    if status is None:
        return None
    nb = status.neighbour(str(node_address(node)))
    return nb is not None and nb.up


def summarise(snapshot: dict[str, Any], pairs: Iterable[Pair]) -> dict[str, Any]:
    """Per pair: ``route`` (the source had one), ``path`` (hop by hop as the nodes'
    tables lead; a DSR/SMR source route as the source holds it), ``complete`` (it
    reaches the destination), ``next_hop`` and whether it was reachable: the kernel's
    neighbour state (``next_hop_neigh``) and, for a manetkit stack, the daemon's own
    neighbour table (``next_hop_up``)."""
    nodes = snapshot.get("nodes") or {}
    stack = snapshot.get("stack")
    manetkit = stack in ("dsr", "aodv", "smr")
    statuses = {n: daemon_status((i or {}).get("daemon")) for n, i in nodes.items()}

    def hop(node: str, dst: str) -> str | None:
        info = nodes.get(node) or {}
        if manetkit:
            r = daemon_route(statuses.get(node), dst)
            return r[1] if isinstance(r, list) and len(r) > 1 else r if isinstance(r, str) else None
        return kernel_next_hop(info.get("route") or [], dst)

    out: dict[str, Any] = {}
    for src, dst in dict.fromkeys(pairs):
        info = nodes.get(src) or {}
        src_route = daemon_route(statuses.get(src), dst) if manetkit else None
        if isinstance(src_route, list):
            path = src_route
        else:
            path = walk(lambda n, d=dst: hop(n, d), src, dst, max(len(nodes), 2))
        nh = path[1] if len(path) > 1 else None
        out[f"{src}-{dst}"] = {
            "route": nh is not None,
            "path": path,
            "complete": path[-1] == dst,
            "next_hop": nh,
            "next_hop_neigh": neigh_state(info.get("neigh") or [], nh) if nh else None,
            "next_hop_up": daemon_neighbour_up(statuses.get(src), nh) if nh and manetkit
            else None,
        }  # fmt: skip
    return {"time": snapshot.get("time"), "pairs": out}


def in_range(graph: list[dict[str, Any]], wall: float, a: str, b: str) -> bool | None:
    """Whether ``a`` and ``b`` were linked in the medium's ground-truth graph at ``wall``
    (the last change at or before it); None before the log's first line."""
    before = [g for g in graph if float(g["wall"]) <= wall]
    if not before:
        return None
    return any({a, b} == set(e) for e in before[-1]["edges"])


def add_ground_truth(summary: dict[str, Any], graph: list[dict[str, Any]]) -> dict[str, Any]:
    """``next_hop_in_range`` for each pair of a :func:`summarise` result (the first hop of
    its path in the medium's graph at the snapshot's time) and ``path_in_range`` (every
    hop of a complete path was)."""
    t = summary.get("time")
    for s in summary.get("pairs", {}).values():
        path = s.get("path") or []
        if t is None or len(path) < 2:
            s["next_hop_in_range"] = None
            s["path_in_range"] = None
            continue
        hops = [in_range(graph, t, a, b) for a, b in zip(path, path[1:], strict=False)]
        s["next_hop_in_range"] = hops[0]
        s["path_in_range"] = (
            all(h is True for h in hops) if s.get("complete") and None not in hops else None
        )
    return summary
