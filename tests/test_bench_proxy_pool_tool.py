"""tools/bench_proxy_pool.py: rounds of several bench proxy runs judged together."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import bench_proxy_pool


def _run(path: Path, hops: int, plain: list[float], proxy: list[float]) -> Path:
    lab = {"hops": hops, "plain": {"kbps": plain}, "proxy": {"kbps": proxy}, "intact": True}
    path.write_text(json.dumps({"bench": "proxy", "lab": [lab]}))
    return path


def test_rounds_of_every_file_are_pooled_for_the_chain_asked(tmp_path: Path) -> None:
    a = _run(tmp_path / "a.json", 3, [400.0, 410.0], [390.0, 405.0])
    b = _run(tmp_path / "b.json", 3, [395.0], [402.0])
    c = _run(tmp_path / "c.json", 1, [1300.0], [10.0])  # another chain: left out
    got = bench_proxy_pool.pool([a, b, c], 3)
    assert got == {"plain": [400.0, 410.0, 395.0], "proxy": [390.0, 405.0, 402.0]}


def test_the_verdict_is_printed_per_variant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _run(tmp_path / "a.json", 3, [400.0, 402.0, 398.0, 401.0], [300.0, 302.0, 298.0, 301.0])
    assert bench_proxy_pool.main([str(a), "--hops", "3"]) == 0
    out = capsys.readouterr().out
    assert "plain: 4 rounds" in out and "proxy: 4 rounds" in out and "misses" in out
    assert bench_proxy_pool.main([str(a), "--hops", "2"]) == 2


def test_invalid_rounds_are_left_out_and_unchecked_ones_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A round whose window lost real time is not pooled; a run from before the bench
    recorded fidelity is pooled and said to be unchecked."""
    old = _run(tmp_path / "old.json", 3, [400.0], [398.0])
    new = tmp_path / "new.json"
    lab = {
        "hops": 3,
        "plain": {"kbps": [402.0, 50.0], "valid": [True, False]},
        "proxy": {"kbps": [9.0, 401.0], "valid": [False, True]},
    }
    new.write_text(json.dumps({"bench": "proxy", "lab": [lab]}))
    tally: dict[str, dict[str, int]] = {}
    got = bench_proxy_pool.pool([old, new], 3, tally)
    assert got == {"plain": [400.0, 402.0], "proxy": [398.0, 401.0]}
    assert tally["plain"] == {"valid": 1, "invalid": 1, "unchecked": 1}
    assert bench_proxy_pool.main([str(old), str(new), "--hops", "3"]) == 0
    assert "1 valid, 1 unchecked, 1 invalid left out" in capsys.readouterr().out
