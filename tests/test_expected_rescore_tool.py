"""tools/expected_rescore.py: eq. 3.1 scored afterwards from a run's recorded hop times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from manetkit.errors import UserError
from manetkit.lab.scenario import SHIPPED_SCENARIOS
from tools.expected_rescore import main

SCENARIO = str(SHIPPED_SCENARIOS / "rwp-30-outdoor.yaml")  # outdoor 802.11b, 11 Mbit/s


def _chain(tmp_path: Path, profile: str = "outdoor", rate_bps: int = 11_000_000) -> Path:
    path = tmp_path / "chain.json"
    doc = {"profile": profile, "rate_bps": rate_bps, "hops": [1, 2, 3],
           "throughput_bps": [4_000_000, 2_000_000, 1_000_000]}  # fmt: skip
    path.write_text(json.dumps(doc))
    return path


def _run(results: Path, stack: str, seed: int, kbps: float, hops_s: dict, **kw) -> None:
    runs = results / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    doc = {
        "params": {"stack": stack, "proxy": kw.get("proxy", "none"), "seed": seed,
                   "speed": kw.get("speed", 20.0)},
        "scenario_file": kw.get("scenario", SCENARIO),
        "overrides": kw.get("overrides", {"mobility.speed": "20"}),
        "bulk": {"flows": [{"src": "n1", "dst": "n2", "goodput_kbps": kbps}]},
        "ground_truth": {"pairs": {"n1-n2": {"hops_s": hops_s}}},
        "fidelity": {"valid": kw.get("valid", True)},
    }  # fmt: skip
    name = f"r_{stack}_{kw.get('proxy', 'none')}_s{seed}_{kw.get('speed', 20.0)}_{kbps}"
    (runs / f"{name}.json").write_text(json.dumps(doc))


def test_each_run_is_scored_by_eq_3_1_on_its_own_hop_times(tmp_path: Path) -> None:
    # 50 s at 1 hop (4000), 30 s at 3 (1000), 20 s partitioned (0): T_exp = 2300 kbit/s
    hops = {"1": 50.0, "3": 30.0, "inf": 20.0}
    for seed, kbps in enumerate((1150.0, 1380.0, 1610.0, 1840.0, 2070.0), start=1):
        _run(tmp_path, "aodv", seed, kbps, hops)  # 0.5 .. 0.9 of expected
    _run(tmp_path, "aodv", 6, 2300.0, hops, valid=False)  # left out, counted
    _run(tmp_path, "aodv", 7, 10.0, hops, speed=10.0)  # another speed: left out
    out = main([tmp_path], _chain(tmp_path), speed=20.0, goal=0.8)
    got = out["aodv"]
    assert got["measured_over_expected"] == [0.5, 0.6, 0.7, 0.8, 0.9]
    assert got["median"]["estimate"] == pytest.approx(0.7)
    assert not got["goal_lower_end_clears"] and got["invalid_runs"] == 1
    assert main([tmp_path], _chain(tmp_path), speed=20.0, goal=0.4)["aodv"]["goal_lower_end_clears"]


def test_a_hop_count_beyond_the_table_takes_its_longest_chain(tmp_path: Path) -> None:
    _run(tmp_path, "dsr", 1, 500.0, {"5": 100.0})  # the 3-hop plateau, 1000 kbit/s
    out = main([tmp_path], _chain(tmp_path))
    assert out["dsr"]["measured_over_expected"] == [0.5]


def test_a_chain_from_another_profile_or_rate_is_refused(tmp_path: Path) -> None:
    _run(tmp_path, "dsr", 1, 500.0, {"1": 100.0})
    with pytest.raises(UserError, match="ns2"):
        main([tmp_path], _chain(tmp_path, profile="ns2"))
    with pytest.raises(UserError, match="2 Mbit/s"):
        main([tmp_path], _chain(tmp_path, rate_bps=2_000_000))
