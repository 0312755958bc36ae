"""An earlier matrix's "babeld + proxy plain delivered 0 bytes to iperf3": not the proxy. babeld
(hello 4 s, an IHU every 3 hellos) installs its first route n1 -> n3 of chain-3 some 10 s
after lab up, and its nodes have a /32 on radio0 and no covering route, so an iperf3
started before that failed its connect at once (ENETUNREACH) and never tried again: 0
bytes for the whole window (proxy none as well; after convergence babeld + plain carries
~670 kbit/s over the 2 hops). The runner now starts such a sender again for what is left
of the window (manetkit.experiment.bulk)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.lab import run_experiment

pytestmark = [pytest.mark.netns, pytest.mark.slow]

SPEC = """\
name: early
scenarios: [chain-3]
stacks: [babeld]
proxies: [plain]
speeds: [0]
seeds: [1]
set: {babeld.profile: mobile}  # hello 1 s: the first route ~3-5 s after lab up, not 10-20 s
warmup_s: 0                   # the traffic starts before babeld has a route
duration_s: 15
traffics:
  - kind: bulk
    name: bulk1
    flows: 1
    pairs: [[n1, n3]]
"""


def test_a_flow_started_before_babelds_first_route_gets_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    out, _ = run_experiment(tmp_path, monkeypatch, SPEC, "--no-report", timeout=150)
    doc = json.loads((out / "runs" / "chain-3_babeld_plain_v0_s1_bulk1.json").read_text())
    flow = doc["bulk"]["flows"][0]
    # the first sender found no route (before the fix the run ended here with 0 bytes)
    assert flow["client_attempts"] > 1, flow
    assert flow["bytes"] > 0 and flow["goodput_kbps"] > 0, flow
