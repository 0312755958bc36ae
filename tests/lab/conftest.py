"""Fixtures for lab tests: unique lab names, a private rundir, labs that always come down."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from manetkit import paths
from manetkit.lab import netns, nodes

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "configs" / "scenarios"
_counter = itertools.count()


def unique_lab(prefix: str = "lt") -> str:
    """A lab name no parallel test (or engineer) uses: prefix + pid + counter, <= 12 chars."""
    return f"{prefix}{os.getpid() % 100000}{next(_counter)}"[:12]


@pytest.fixture
def rundir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private MANETKIT_RUNDIR, for this process and the CLIs it starts."""
    d = tmp_path / "run"
    d.mkdir()
    monkeypatch.setenv("MANETKIT_RUNDIR", str(d))
    return d


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


@pytest.fixture
def lab_factory(rundir: Path) -> Iterator[Callable[..., str]]:
    """``make(scenario_path, *extra_args) -> lab`` runs ``manetkit lab up``; every lab made is
    brought down at the end of the test, whatever happened."""
    made: list[str] = []

    def make(scenario: str | Path, *extra: str, prefix: str = "lt") -> str:
        lab = unique_lab(prefix)
        made.append(lab)
        manetkit("lab", "up", str(scenario), "--name", lab, *extra)
        return lab

    try:
        yield make
    finally:
        for lab in made:
            manetkit("lab", "down", "--name", lab, check=False)
            # Belt and braces: even if the CLI failed, nothing of the lab may survive.
            nodes.down(lab)
            assert not netns.list_names(f"{paths.NETNS_PREFIX}{lab}-")


def wait_for(cond: Callable[[], object], timeout: float = 10.0, what: str = "condition"):
    """Poll ``cond`` until it returns a truthy value (real-network tests only)."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
