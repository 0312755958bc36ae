"""Helpers for the daemon-in-the-lab tests (tests/lab/test_stack_*.py)."""

from __future__ import annotations

import importlib
import json
import subprocess
import time

import pytest

from manetkit import paths
from manetkit.jsonlines import request
from manetkit.lab.stacks import daemon_socket


def need_engine(protocol: str) -> None:
    """Skip (with the reason) when the protocol's engine is not in this tree yet."""
    try:
        mod = importlib.import_module(f"manetkit.daemon.engines.{protocol}")
    except ModuleNotFoundError:
        pytest.skip(f"the {protocol} engine is not built yet")
    if not hasattr(mod, f"{protocol.capitalize()}Engine"):
        pytest.skip(f"the {protocol} engine is not built yet")


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
    return request(daemon_socket(lab, node), {"cmd": "status"})["status"]


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
