"""The ``atra`` metric plug-in: predictions and breaks scored against the medium's ground
truth, read from the daemons' events, and the report's row (pure: no lab)."""

from __future__ import annotations

from manetkit.experiment.plugins import atra
from manetkit.experiment.plugins.atra import classify_breaks, from_events, score

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
        "false_alarms_already_gone": 0,
        "false_alarms_lost_later": 2,  # n1-n2 at 98: 5 s later; n10-n2 at 101: 19 s later
        "false_alarms_never_lost": 0,
        "late_losses_s": [5.0, 19.0],
    }
    assert score([], GRAPH, 4.0)["precision"] is None
    kept = score([(101.0, "n10", "n2")], GRAPH[:2], 4.0)  # the log ends before 120
    assert (kept["false_alarms_lost_later"], kept["false_alarms_never_lost"]) == (0, 1)


def test_unpredicted_breaks_are_split_by_whether_the_link_was_still_in_the_graph() -> None:
    breaks = [
        (101.5, "n1", "n2", "tx-failed", 101.5),  # n1-n2 still in the graph: a retry failure
        (101.6, "n1", "n2", "tx-failed", 101.6),  # the same break, another route: merged
        (104.0, "n1", "n2", "link-down", 104.0),  # gone at 103: a miss
        (110.0, "n2", "n10", "tx-failed", 110.0),  # predicted by n2 at 108: not counted as missed
        (121.0, "n10", "n2", "tx-failed", 121.0),  # gone at 120
        (99.0, "n1", "n2", "tx-failed", 99.0),  # before the log starts: unknown
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
        "recall": 0.2,  # 1 of the 5 breaks had a prediction of that node for that link
    }


def test_predictions_and_unpredicted_breaks_come_from_the_daemons_events() -> None:
    events = [
        {"node": "n2", "event": "predicted-failure", "neighbour": "10.42.0.1", "time": 101.0},
        {"node": "n1", "event": "route-down", "predicted": False, "reason": "tx-failed",
         "broken_link": ["10.42.0.1", "10.42.0.2"], "time": 101.5},
        # n3 reports a route through someone else's link: not its own break
        {"node": "n3", "event": "route-down", "predicted": False, "reason": "error",
         "broken_link": ["10.42.0.1", "10.42.0.2"], "time": 101.7},
        # a predicted route-down is the prediction acted on, not a break
        {"node": "n2", "event": "route-down", "predicted": True, "reason": "predicted",
         "broken_link": ["10.42.0.2", "10.42.0.1"], "time": 101.1},
        {"node": "n2", "event": "route-up", "dst": "10.42.0.1", "time": 102.0},
    ]  # fmt: skip
    preds, breaks = from_events(events)
    assert preds == [(101.0, "n2", "n1")]
    assert breaks == [(101.5, "n1", "n2", "tx-failed", 101.5)]


def test_the_report_row_sums_a_cells_runs() -> None:
    def run(seed: int, preds: int, hits: int, breaks: int, predicted: int) -> dict:
        return {
            "params": {"scenario": "rwp-30", "traffic": "bulk1", "stack": "dsr-atra",
                       "proxy": "none", "speed": 20.0, "seed": seed},
            "atra": {
                "engine": {**dict.fromkeys(atra.COUNTERS, 0), "hits": hits, "false_alarms": 1},
                "ground_truth": {"predictions": preds, "hits": hits,
                                 "mean_lead_s": 1.0 if hits else None},
                "breaks": {"breaks": breaks, "predicted": predicted, "in_graph": 1, "gone": 2},
            },
        }  # fmt: skip

    rows = atra.Atra.rows([run(1, 10, 6, 8, 4), run(2, 10, 2, 2, 0), {"params": {}, "x": 1}])
    assert len(rows) == 1
    r = rows[0]
    assert (r["variant"], r["runs"], r["predictions"]) == ("dsr-atra", 2, 20)
    assert r["precision"] == 0.4 and r["recall"] == 0.4  # 8 of 20; 4 of 10
    assert (r["unpredicted"], r["engine"]) == ("2 / 4", "8 / 2")


def test_a_prediction_of_a_link_already_out_of_the_graph_is_no_hit() -> None:
    # n1-n2 left the graph at 103; another link changes at 105.5. A prediction of n1-n2
    # at 104 comes after its break: not a hit with the 1.5 s "lead" to the next change of
    # the graph, but a prediction of a link already gone.
    graph = [*GRAPH[:2], {"wall": 105.5, "edges": [["n2", "n10"], ["n3", "n4"]]}, GRAPH[2]]
    got = score([(104.0, "n1", "n2"), (102.0, "n2", "n1")], graph, 4.0)
    assert (got["hits"], got["mean_lead_s"], got["precision"]) == (1, 1.0, 0.5)
    assert (got["false_alarms"], got["false_alarms_already_gone"]) == (1, 1)
    # a prediction of a link that was never in the graph (a gray-zone neighbour)
    assert score([(101.0, "n1", "n10")], graph, 4.0)["false_alarms_already_gone"] == 1


def test_a_silent_break_is_dated_when_the_neighbour_was_last_heard() -> None:
    # n1 last heard n2 at 103.0; link sensing declares it down 3 s later (106.0), when
    # n1 reports its routes over n2 down. n1 predicted the failure at 100.5, 2.5 s before
    # it last heard n2: within twice the look-ahead of the break, so the break was
    # predicted, although 5.5 s before the report.
    events = [
        {"node": "n1", "event": "predicted-failure", "neighbour": "10.42.0.2", "time": 100.5},
        {"node": "n1", "event": "route-down", "reason": "silent",
         "broken_link": ["10.42.0.1", "10.42.0.2"], "time": 106.0},
        {"node": "n1", "event": "neighbour-down", "neighbour": "10.42.0.2", "reason": "silent",
         "silent_s": 3.0, "time": 106.001},
        # n3's silent break with no neighbour-down seen: dated at the report
        {"node": "n3", "event": "route-down", "reason": "silent",
         "broken_link": ["10.42.0.3", "10.42.0.2"], "time": 106.0},
    ]  # fmt: skip
    preds, breaks = from_events(events)
    got = classify_breaks(breaks, preds, GRAPH, 4.0)
    assert (got["breaks"], got["predicted"], got["recall"]) == (2, 1, 0.5)
    assert breaks == [(106.0, "n1", "n2", "silent", 103.001), (106.0, "n3", "n2", "silent", 106.0)]
    assert got["by_reason"] == {"silent": {"in_graph": 0, "gone": 1, "unknown": 0}}
