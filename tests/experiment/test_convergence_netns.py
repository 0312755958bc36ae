"""The warm-up's convergence wait and the routing snapshot on a real small lab: chain-3
with babeld (n1 -- n2 -- n3), its kernel routes read as the runner reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from manetkit import paths
from manetkit.bench import labrun
from manetkit.experiment import convergence, snapshots
from manetkit.lab import netns, nodes
from tests.helpers.lab import SCENARIOS, nsexec, unique_lab

pytestmark = [pytest.mark.netns, pytest.mark.slow]

CAP_S = 40.0  # babeld's wireless profile (hello 2 s) has its routes ~5-10 s after lab up


def test_babeld_on_a_chain_converges_and_the_snapshot_shows_its_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    (tmp_path / "run").mkdir()
    monkeypatch.setenv("MANETKIT_RUNDIR", str(tmp_path / "run"))  # the lab's files, private
    lab = unique_lab("cv")
    try:
        nodes.up(SCENARIOS / "chain-3.yaml", name=lab, overrides={"stack": "babeld"}, timeout=60)
        has_route, ask = convergence.probes(lab, "babeld")
        assert ask is None  # a proactive stack is not asked, only watched
        up = labrun.medium_time(lab)
        got = convergence.wait_converged(
            [("n1", "n3"), ("n3", "n1")], has_route, lambda: labrun.medium_time(lab), up + CAP_S
        )
        assert got.converged and not got.cap_hit, got
        assert up <= got.pairs["n1-n3"] <= got.t_s < up + CAP_S
        # the wait ends with the route: it is in the kernel, through n2
        assert "via 10.42.0.2" in nsexec(lab, "n1", "ip", "route", "get", "10.42.0.3").stdout
        nsexec(lab, "n1", "ping", "-c", "1", "-W", "3", "10.42.0.3")  # ARP for n2, once
        snap = snapshots.take(lab, ["n1", "n2", "n3"], "babeld")
        assert "add neighbour" in snap["nodes"]["n1"]["daemon"]  # babeld's dump
        s = snapshots.summarise(snap, [("n1", "n3")])["pairs"]["n1-n3"]
        assert s["path"] == ["n1", "n2", "n3"] and s["complete"]
        assert s["next_hop_neigh"] in snapshots.REACHABLE_STATES, s
    finally:
        nodes.down(lab)
    assert not netns.list_names(f"{paths.NETNS_PREFIX}{lab}-")
