"""``manetkit.bench.expected``: eq. 3.1 for one bench flow, and ``--chain-table`` (pure)."""

from __future__ import annotations

import json

import pytest

from manetkit.bench import expected

# n1-n2-n3 line; n3 walks off (partitioned from wall 110), then comes back next to n1.
LOG = [
    {"t": 0.0, "wall": 100.0, "edges": [["n1", "n2"], ["n2", "n3"]]},
    {"t": 10.0, "wall": 110.0, "edges": [["n1", "n2"]]},
    {"t": 15.0, "wall": 115.0, "edges": [["n1", "n2"], ["n1", "n3"]]},
]


def test_expected_for_pair_weights_chain_throughput_by_time_at_each_hop_count(tmp_path):
    # window 105..120: 5 s at 2 hops, 5 s partitioned, 5 s at 1 hop
    want = (5 * 683 + 5 * 0 + 5 * 1366) / 15
    got = expected.expected_for_pair(LOG, "n1", "n3", 105.0, 120.0)
    assert got["expected_kbps"] == pytest.approx(want, abs=0.05)
    assert got["hops_s"] == {"1": 5.0, "2": 5.0, "inf": 5.0}
    assert got["partition_s"] == 5.0
    assert got["covered_s"] == 15.0
    # the log's path works as well as its events, and the table is the caller's
    path = tmp_path / "ground-truth.jsonl"
    path.write_text("".join(json.dumps(ev) + "\n" for ev in LOG))
    got = expected.expected_for_pair(path, "n3", "n1", 105.0, 120.0, {1: 900.0, 2: 300.0})
    assert got["expected_kbps"] == pytest.approx((5 * 300 + 5 * 900) / 15, abs=0.05)


def test_a_window_the_log_does_not_cover_expects_nothing():
    got = expected.expected_for_pair(LOG, "n1", "n3", 50.0, 90.0)
    assert (got["expected_kbps"], got["covered_s"]) == (None, 0.0)
    assert expected.expected_for_pair([], "n1", "n3", 0.0, 1.0)["expected_kbps"] is None


def test_ground_truth_and_chain_table_must_share_a_profile(tmp_path):
    from manetkit.errors import UserError

    rule = "outdoor 802.11b: PER of a 1500-byte packet at 11 Mbit/s <= 0.1 on the mean SNR"
    realistic = [{**LOG[0], "rule": rule}, *LOG[1:]]
    assert expected.log_profile(realistic) == "outdoor" and expected.log_profile(LOG) is None
    with pytest.raises(UserError, match="measured on ns2"):
        expected.expected_for_pair(realistic, "n1", "n3", 105.0, 120.0)  # the ns2 default table
    table = {1: 4000.0, 2: 2000.0}
    got = expected.expected_for_pair(realistic, "n1", "n3", 105.0, 120.0, table, "outdoor")
    assert got["expected_kbps"] == pytest.approx((5 * 2000 + 5 * 4000) / 15, abs=0.05)
    bench = tmp_path / "chain.json"
    bench.write_text(json.dumps({"hops": [1], "throughput_bps": [4e6], "profile": "outdoor"}))
    assert expected.chain_table_profile(bench) == "outdoor"
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"hops": [1], "throughput_bps": [1.4e6], "radio": {}}))
    assert expected.chain_table_profile(old) == "ns2"
