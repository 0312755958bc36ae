"""Traffic kind wrk for real: a one-run matrix (chain-3, DSR, wrk n1 -> n3 for 4 s over 2
hops) through the real CLI; wrk's report is parsed into the run's JSON, and
``--keep-work`` keeps the lab's logs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.lab import run_experiment

pytestmark = [pytest.mark.netns, pytest.mark.slow]

SPEC = """\
name: wrk-smoke
scenarios: [chain-3]
stacks: [dsr]
proxies: [none]
speeds: [0]
seeds: [1]
warmup_s: 3
duration_s: 4
traffics:
  - kind: wrk
    client: n1
    server: n3
    connections: 2
"""


@pytest.mark.skipif(shutil.which("wrk") is None, reason="needs wrk (.ci/install installs it)")
def test_a_wrk_run_loads_the_server_over_two_hops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    out, _ = run_experiment(tmp_path, monkeypatch, SPEC, "--no-report", "--keep-work", timeout=120)
    doc = json.loads((out / "runs" / "chain-3_dsr_none_v0_s1_wrk.json").read_text())
    # --keep-work keeps the lab's logs as the run left them
    logs = out / "work" / "chain-3_dsr_none_v0_s1_wrk" / "logs"
    assert (logs / "ground-truth.jsonl").stat().st_size > 0
    assert {f"daemon-n{i}.log" for i in (1, 2, 3)} <= {p.name for p in logs.iterdir()}
    w = doc["wrk"]
    assert w["exit"] == 0
    assert w["requests"] > 0 and w["errors"] == 0
    assert w["requests_per_s"] > 0
    lat = w["latency_s"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] < 10  # wrk's --timeout is 10 s
