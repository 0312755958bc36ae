"""``manetkit bench atra``'s ground-truth scoring of predictions and breaks, and its
summary against the expected throughput (pure: no lab)."""

from __future__ import annotations

import argparse
import json

from manetkit.bench import atra
from manetkit.bench.atra import classify_breaks, score

GRAPH = [
    {"wall": 100.0, "edges": [["n1", "n2"], ["n2", "n10"]]},
    {"wall": 103.0, "edges": [["n2", "n10"]]},  # n1-n2 breaks at 103
    {"wall": 120.0, "edges": []},  # n2-n10 breaks at 120
]


def test_a_prediction_is_a_hit_only_if_its_link_breaks_within_the_horizon() -> None:
    preds = [
        (101.0, "n2", "n1"),  # either end, 2 s ahead: hit
        (98.0, "n1", "n2"),  # 5 s ahead: beyond 2 x 2 s
        (101.0, "n10", "n2"),  # that link lives on until 120: false alarm
        (117.0, "n2", "n10"),  # 3 s ahead: hit
    ]
    got = score(preds, GRAPH, 4.0)
    assert got == {
        "predictions": 4,
        "hits": 2,
        "false_alarms": 2,
        "precision": 0.5,
        "mean_lead_s": 2.5,
        "false_alarms_lost_later": 2,  # n1-n2 at 98: 5 s later; n10-n2 at 101: 19 s later
        "false_alarms_never_lost": 0,
        "late_losses_s": [5.0, 19.0],
    }
    assert score([], GRAPH, 4.0)["precision"] is None
    kept = score([(101.0, "n10", "n2")], GRAPH[:2], 4.0)  # the log ends before 120
    assert (kept["false_alarms_lost_later"], kept["false_alarms_never_lost"]) == (0, 1)


def test_unpredicted_breaks_are_split_by_whether_the_link_was_still_in_the_graph() -> None:
    breaks = [
        (101.5, "n1", "n2", "tx-failed"),  # n1-n2 still in the graph: a retry failure
        (101.6, "n1", "n2", "tx-failed"),  # the same break, another route: merged
        (104.0, "n1", "n2", "link-down"),  # gone at 103: a miss
        (110.0, "n2", "n10", "tx-failed"),  # predicted by n2 at 108: not counted as missed
        (121.0, "n10", "n2", "tx-failed"),  # gone at 120
        (99.0, "n1", "n2", "tx-failed"),  # before the log starts: unknown
    ]
    preds = [(108.0, "n2", "n10"), (109.0, "n10", "n2")]
    got = classify_breaks(breaks, preds, GRAPH, 4.0)
    assert got == {
        "breaks": 5,
        "predicted": 1,
        "in_graph": 1,
        "gone": 2,
        "unknown": 1,
        "by_reason": {
            "tx-failed": {"in_graph": 1, "gone": 1, "unknown": 1},
            "link-down": {"in_graph": 0, "gone": 1, "unknown": 0},
        },
    }


def test_summary_gives_expected_throughput_and_the_ceiling_over_dsr(tmp_path, monkeypatch) -> None:
    """``run`` with the labs faked: the table and JSON carry mean expected, measured /
    expected and expected / DSR per variant and speed."""
    kbps = {("dsr", 1): 300.0, ("dsr", 2): 500.0, ("dsr+atra", 1): 450.0, ("dsr+atra", 2): 450.0}
    exp = {1: 600.0, 2: 1000.0}

    def fake_run_one(variant, speed, seed, args, work):
        return {
            "variant": variant,
            "speed": speed,
            "seed": seed,
            "tcp_kbps": kbps[(variant, seed)],
            "expected_kbps": exp[seed],
            "measured_over_expected": kbps[(variant, seed)] / exp[seed],
            "engine": dict.fromkeys(atra.COUNTERS, 0),
            "ground_truth": {"predictions": 0, "hits": 0},
            "breaks": {
                "breaks": 3,
                "predicted": 1,
                "in_graph": 1,
                "gone": 1,
                "unknown": 0,
                "by_reason": {"tx-failed": {"in_graph": 1, "gone": 0, "unknown": 0}},
            },
        }

    monkeypatch.setattr(atra, "run_one", fake_run_one)
    monkeypatch.setattr(atra, "plot", lambda *a, **k: None)
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")  # the bench command's own option
    atra.register(parser)
    args = parser.parse_args(
        ["--variants", "dsr,dsr+atra", "--speeds", "20", "--seeds", "1,2", "--out", str(tmp_path)]
    )
    assert atra.run(args) == 0
    doc = json.loads((tmp_path / "atra.json").read_text())
    dsr, at = doc["summary"]
    assert (dsr["mean_expected_kbps"], dsr["measured_over_expected"]) == (800.0, 0.5)
    assert dsr["ceiling_vs_dsr"] == 2.0  # 800 expected / 400 DSR: at most 2x DSR
    assert at["vs_dsr"] == 450.0 / 400.0
    assert at["measured_over_expected"] == round(450.0 / 800.0, 3)
    assert at["measured_over_expected_per_seed"] == [0.75, 0.45]
    assert at["unpredicted_breaks"] == {
        "breaks": 6,
        "predicted": 2,
        "in_graph": 2,
        "gone": 2,
        "unknown": 0,
    }
    assert at["unpredicted_tx_failed"] == {"in_graph": 2, "gone": 0}
    assert doc["settings"]["chain_table"]["1"] == 1366
