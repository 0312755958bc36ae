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
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from manetkit import jsonlines, paths
from manetkit.daemonstatus import DaemonStatus, fetch_status
from manetkit.lab import netns, nodes
from manetkit.lab.medium.control import control as medium_control
from manetkit.procs import wait_for

__all__ = [
    "REPO", "SCENARIOS", "EventLog", "air_quiet", "labs_made", "listening", "manetkit", "nsexec", "nspopen",
    "ping_ok", "run_experiment", "status", "unique_lab", "wait_for", "wait_ping", "write_scenario",
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


@contextlib.contextmanager
def labs_made() -> Iterator[Callable[..., str]]:
    """``make(scenario, *args, prefix="lt") -> lab`` runs ``manetkit lab up`` on a fresh lab
    name (:func:`unique_lab`); on leaving, whatever happened, every lab made is brought down
    and no namespace of it may survive."""
    made: list[str] = []

    def make(scenario: str | Path, *args: str, prefix: str = "lt") -> str:
        lab = unique_lab(prefix)
        made.append(lab)
        manetkit("lab", "up", str(scenario), "--name", lab, *args)
        return lab

    try:
        yield make
    finally:
        for lab in made:
            manetkit("lab", "down", "--name", lab, check=False)
            # Belt and braces: even if the CLI failed, nothing of the lab may survive.
            nodes.down(lab)
            assert not netns.list_names(f"{paths.NETNS_PREFIX}{lab}-")


def run_experiment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str | Path, *args: str, timeout: float
) -> tuple[Path, subprocess.CompletedProcess]:
    """``manetkit experiment`` through the real CLI (:func:`manetkit`) with its labs' files
    in a private MANETKIT_RUNDIR (``tmp_path/run``). ``spec``: a spec's text (written to
    ``tmp_path/spec.yaml``) or a spec file's path; ``args``: more of the CLI's arguments.
    Returns the results folder (``tmp_path/out``) and the CLI's result, once no namespace
    of a lab the run brought up is left."""
    rundir = tmp_path / "run"
    rundir.mkdir(exist_ok=True)
    monkeypatch.setenv("MANETKIT_RUNDIR", str(rundir))
    labs = f"{paths.NETNS_PREFIX}mkx"  # the runner's lab names (manetkit.experiment.execute)
    before = set(netns.list_names(labs))  # another run's leftovers are not ours
    if isinstance(spec, str):
        path = tmp_path / "spec.yaml"
        path.write_text(spec)
        spec = path
    out = tmp_path / "out"
    proc = manetkit("experiment", str(spec), "--out", str(out), *args, timeout=timeout)
    assert not set(netns.list_names(labs)) - before  # every lab of the run is down
    return out, proc


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


def status(lab: str, node: str) -> DaemonStatus:
    """The node's daemon status (:func:`manetkit.daemonstatus.fetch_status`)."""
    return fetch_status(paths.daemon_socket(lab, node))


def air_quiet(lab: str) -> bool:
    """Every frame the lab's medium took has ended (delivered, failed after its retries
    or dropped at a full queue) and none waits: nothing is left on the air."""
    m = medium_control(lab, {"cmd": "stats"})["medium"]
    ended = m["broadcast"] + m["unicast_ok"] + m["unicast_failed"] + m["queue_drops"]
    return m["queued"] == 0 and m["frames_in"] == ended


def listening(lab: str, node: str, port: int) -> bool:
    """A TCP socket listens on ``port`` in ``node``."""
    return f":{port} " in nsexec(lab, node, "ss", "-Hltn").stdout


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
