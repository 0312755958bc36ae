"""Fixtures for lab tests: unique lab names, a private rundir, labs that always come down."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from manetkit import paths
from manetkit.lab import netns
from tests.helpers.lab import labs_made, unique_lab
from tests.helpers.radio import FakeMedium


@pytest.fixture
def rundir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private MANETKIT_RUNDIR, for this process and the CLIs it starts."""
    d = tmp_path / "run"
    d.mkdir()
    monkeypatch.setenv("MANETKIT_RUNDIR", str(d))
    return d


@pytest.fixture
def lab_factory(rundir: Path) -> Iterator[Callable[..., str]]:
    """``make(scenario_path, *extra_args, prefix="lt") -> lab`` runs ``manetkit lab up``;
    every lab made is brought down at the end of the test, whatever happened."""
    with labs_made() as make:
        yield make


@pytest.fixture
def radio_node(rundir):
    """A namespace ``mk-<lab>-n1`` running the real radio process against a FakeMedium."""
    lab = unique_lab("rd")
    ns = paths.netns_name(lab, "n1")
    medium = FakeMedium(lab)
    netns.create(ns)
    proc = None
    try:
        proc = netns.popen(
            ns,
            [sys.executable, "-m", "manetkit.lab.radio", "--lab", lab, "--node", "n1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        yield lab, ns, medium, proc
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        medium.close()
        netns.delete(ns)
