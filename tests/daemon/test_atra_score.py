"""``manetkit bench atra``'s ground-truth scoring of predictions (pure)."""

from __future__ import annotations

from manetkit.bench.atra import score

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
