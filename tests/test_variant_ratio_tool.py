"""tools/variant_ratio.py: variants against their stack, proxy modes against no proxy."""

from __future__ import annotations

import json
from pathlib import Path

from tools.variant_ratio import main


def _run(results: Path, stack: str, proxy: str, seed: int, kbps: float, valid: bool = True) -> None:
    runs = results / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    name = f"s_{stack}_{proxy}_s{seed}_{kbps}"
    doc = {
        "params": {"stack": stack, "proxy": proxy, "seed": seed},
        "bulk": {"flows": [{"goodput_kbps": kbps}]},
        "fidelity": {"valid": valid},
    }
    (runs / f"{name}.json").write_text(json.dumps(doc))


def _matrix(tmp_path: Path) -> None:
    for seed in (1, 2, 3, 4, 5):
        _run(tmp_path, "aodv", "none", seed, 100.0 + seed)
        _run(tmp_path, "aodv", "elfn", seed, 300.0 + seed)
        _run(tmp_path, "aodv-veto", "none", seed, 50.0 + seed)
    _run(tmp_path, "aodv", "elfn", 6, 1.0, valid=False)  # left out, and counted
    # a run that failed to run at all: the runner's error record, no results
    (tmp_path / "runs" / "s_aodv_elfn_s7.error.json").write_text(json.dumps({"error": "x"}))


def test_variants_count_only_the_runs_with_no_proxy(tmp_path: Path) -> None:
    _matrix(tmp_path)
    out = main(tmp_path, goal=1.0)
    assert set(out) == {"aodv-veto"}
    got = out["aodv-veto"]
    assert got["off_kbps"] == [101.0, 102.0, 103.0, 104.0, 105.0]  # not the elfn runs
    assert got["ratio"]["estimate"] < 1.0 and not got["goal_lower_end_clears"]


def test_proxies_each_mode_against_no_proxy_in_its_stack(tmp_path: Path) -> None:
    _matrix(tmp_path)
    out = main(tmp_path, goal=2.0, proxies=True)
    assert set(out) == {"aodv+elfn"}
    got = out["aodv+elfn"]
    assert sorted(got["on_kbps"]) == [301.0, 302.0, 303.0, 304.0, 305.0]
    assert abs(got["ratio"]["estimate"] - 303.0 / 103.0) < 1e-3
    assert got["goal_lower_end_clears"] and got["invalid_runs"] == 1
    assert not [k for k in got if k.startswith("over_")]  # no mode over itself


def test_a_pair_measures_one_variant_against_another(tmp_path: Path) -> None:
    _matrix(tmp_path)
    for seed in (1, 2, 3, 4, 5):
        _run(tmp_path, "aodv-floor", "none", seed, 100.0 + seed)
    out = main(tmp_path, goal=1.0, pairs=[("aodv-floor", "aodv-veto"), ("aodv-x", "aodv")])
    assert set(out) == {"aodv-floor/aodv-veto"}  # a variant with no runs is left out
    got = out["aodv-floor/aodv-veto"]
    assert got["off_kbps"] == [51.0, 52.0, 53.0, 54.0, 55.0]
    assert abs(got["ratio"]["estimate"] - 103.0 / 53.0) < 1e-3
