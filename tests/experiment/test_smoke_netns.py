"""The CI smoke matrix end to end: configs/experiments/smoke.yaml through the real CLI
(chain-3, DSR, bulk TCP 5 s with iperf3, one HTTP session client 10 s beside a CBR
flow), then its report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.lab import REPO, run_experiment

pytestmark = [pytest.mark.netns, pytest.mark.slow]


def test_the_smoke_matrix_runs_end_to_end_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    spec = REPO / "configs" / "experiments" / "smoke.yaml"
    out, _ = run_experiment(tmp_path, monkeypatch, spec, timeout=150)
    runs = out / "runs"
    bulk = json.loads((runs / "chain-3_dsr_none_v0_s1_bulk1.json").read_text())
    flow = bulk["bulk"]["flows"][0]
    assert (flow["src"], flow["dst"]) == ("n1", "n3")
    assert flow["goodput_kbps"] > 0
    # static chain-3: n1..n3 is 2 hops all along, so T_exp is the table's T_2
    assert bulk["ground_truth"]["pairs"]["n1-n3"]["hops_s"] == {"2": 5.0}
    assert flow["expected_kbps"] == 683.0
    assert flow["measured_over_expected"] == pytest.approx(flow["goodput_kbps"] / 683.0, abs=1e-3)
    assert bulk["control"]["delivered_packets"] > 0
    # the methodology's records: cubic in every node, the route before the window, the
    # emulation's fidelity over it, and the routing snapshots (the raw ones kept)
    assert bulk["tcp"] == {"congestion_control": "cubic", "nodes": 3, "read_back": {"cubic": 3}}
    conv = bulk["convergence"]
    assert conv["converged"] and conv["asked"] >= 1 and conv["pairs"]["n1-n3"] <= 5.0
    fid = bulk["fidelity"]
    assert fid["outputs"] > 0 and fid["lag_p99_ms"] is not None and "valid" in fid
    assert fid["cpu_s"]["daemons"] > 0
    for moment in ("start", "middle", "end"):
        snap = bulk["snapshots"][moment]
        assert snap["pairs"]["n1-n3"]["path"] == ["n1", "n2", "n3"], moment
        assert snap["pairs"]["n1-n3"]["next_hop_up"] and snap["pairs"]["n1-n3"]["path_in_range"]
        assert (runs / bulk["run"] / snap["file"]).exists()
    http_run = json.loads((runs / "chain-3_dsr_none_v0_s1_http.json").read_text())
    http = http_run["http"]
    assert http["pages_completed"] >= 1
    assert http["service_s"]["mean"] > 0
    # the CBR background ran beside the pages, n3 -> n1 at 4 datagrams a second
    bg = http_run["background"]
    assert bg["flows"][0]["src"] == "n3" and bg["flows"][0]["dst"] == "n1"
    assert bg["sent"] >= 4 * 8  # about the 10 s window at 4/s
    assert bg["delivery_ratio"] > 0.8, bg  # a static 2-hop chain loses next to nothing
    assert (out / "report" / "goodput-chain-3-bulk1.png").exists()
    assert (out / "report" / "http-chain-3-http.png").exists()
    # a second pass finds both runs done and runs no lab
    _, again = run_experiment(tmp_path, monkeypatch, spec, "--no-report", timeout=30)
    assert "made 0, already done 2" in again.stdout
