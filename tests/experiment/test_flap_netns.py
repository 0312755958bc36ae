"""A mechanism experiment end to end on a real lab: chain-4 with DSR and the ELFN proxy,
one stream n1 -> n4 whose middle link n2-n3 breaks twice in the window (the shape of
configs/experiments/flap.yaml, shortened), measured by the ``flap`` and ``retrans``
metric plug-ins through the real CLI, then its report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.lab import run_experiment

pytestmark = [pytest.mark.netns, pytest.mark.slow]

SPEC = """\
name: flapshort
scenarios: [chain-4]
stacks: [dsr]
proxies: [elfn]
speeds: [0]
seeds: [1]
warmup_s: 8
duration_s: 20                 # breaks at 4-7 s and 12-15 s, 5 s of link-up after
metrics: [flap, retrans]
fidelity: {lag_p99_ms: 50}     # a shared CI machine: this checks the pipeline, not a claim
proxy_config: {partition_timeout: 33}
traffics:
  - kind: stream
    name: flap3
    pairs: [[n1, n4]]
    lead_s: 3
    link_flap: {a: n2, b: n3, down_s: 3, period_s: 8, first_s: 4}
"""


def test_a_flapping_link_is_timed_by_the_flap_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    out, _ = run_experiment(tmp_path, monkeypatch, SPEC, timeout=150)
    doc = json.loads((out / "runs" / "chain-4_dsr_elfn_v0_s1_flap3.json").read_text())
    assert doc["link_flap"] == {"a": "n2", "b": "n3", "breaks": 2, "planned": 2, "error": None}
    flow = doc["bulk"]["flows"][0]
    assert doc["bulk"]["kind"] == "stream" and flow["goodput_kbps"] > 0
    assert flow["intact"] and flow["sender_error"] is None, flow  # the stream arrived whole
    flap = doc["flap"]
    assert flap["breaks"] == 2 and len(flap["recovery_s"]) == 2 and flap["intact"]
    # the stream came back after each 3 s break, within the 5 s of link-up that followed
    assert all(r is not None and 0 < r < 5 for r in flap["recovery_s"]), flap
    assert len(flap["route_back_s"]) == 2
    rt = doc["retrans"]
    assert rt["connections"][0]["port"] is not None  # the source proxy's mesh leg
    assert rt["segments_sent"] > 0 and rt["retrans_ratio"] is not None
    md = (out / "report" / "README.md").read_text()
    assert "## Link flaps: recovery after each restoration" in md
    assert "## TCP retransmissions (ss -tin)" in md
