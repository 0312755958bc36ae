"""Helpers for tests that drive labs: the real CLI, lab names, commands in a node, daemon status."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from manetkit import jsonlines, paths
from manetkit.jsonlines import request
from manetkit.procs import wait_for

__all__ = [
    "REPO", "SCENARIOS", "EventLog", "manetkit", "nsexec", "nspopen", "ping_ok", "status",
    "unique_lab", "wait_for", "wait_ping", "write_scenario",
]  # fmt: skip

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "configs" / "scenarios"
_counter = itertools.count()


def unique_lab(prefix: str = "lt") -> str:
    """A lab name no parallel test (or engineer) uses: prefix + pid + counter, <= 12 chars."""
    return f"{prefix}{os.getpid() % 100000}{next(_counter)}"[:12]


def manetkit(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the real console script (as a user would), capturing its output."""
    proc = subprocess.run(
        [sys.executable, "-m", "manetkit.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"manetkit {' '.join(args)} exited {proc.returncode}\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc


def nsexec(lab: str, node: str, *cmd: str, check: bool = True, timeout: float = 60):
    return subprocess.run(
        ["ip", "netns", "exec", paths.netns_name(lab, node), *cmd],
        capture_output=True,
        text=True,
        check=check,
        timeout=timeout,
    )


def nspopen(lab: str, node: str, *cmd: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["ip", "netns", "exec", paths.netns_name(lab, node), *cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def status(lab: str, node: str) -> dict:
    return request(paths.daemon_socket(lab, node), {"cmd": "status"})["status"]


def ping_ok(lab: str, src: str, dst_addr: str, count: int = 1, wait: float = 3) -> bool:
    r = nsexec(lab, src, "ping", "-c", str(count), "-W", str(wait), dst_addr, check=False)
    return r.returncode == 0


def wait_ping(lab: str, src: str, dst_addr: str, timeout: float) -> float:
    """Ping until one reply; returns the seconds it took (route discovery included)."""
    t0 = time.monotonic()
    while not ping_ok(lab, src, dst_addr, wait=2):
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{src} never reached {dst_addr} in {timeout} s")
    return time.monotonic() - t0


def write_scenario(
    path, nodes: int, positions: dict[str, tuple[float, float]], rate: float = 11
) -> str:
    doc = {
        "nodes": nodes,
        "seed": 3,
        "radio": {"rate_mbps": rate},
        "mobility": {"model": "static", "positions": {n: list(p) for n, p in positions.items()}},
    }
    path.write_text(json.dumps(doc))
    return str(path)


class EventLog:
    """Every event of one daemon, stamped by the daemon (unix time)."""

    def __init__(self, lab: str, node: str) -> None:
        self.events: list[dict] = []
        self.sub = jsonlines.subscribe(paths.daemon_socket(lab, node)).connect()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        with contextlib.suppress(OSError):
            for ev in self.sub:
                self.events.append(ev)

    def named(self, name: str) -> list[dict]:
        return [e for e in self.events if e.get("event") == name]

    def close(self) -> None:
        self.sub.close()
