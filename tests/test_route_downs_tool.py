"""tools/route_downs.py counts a run's route-downs by reason inside its window only."""

from __future__ import annotations

from tools.route_downs import count


def test_counts_by_reason_inside_the_window_only() -> None:
    events = [
        {"node": "n1", "event": "route-down", "time": 9.0, "reason": "tx-failed"},  # before
        {"node": "n1", "event": "route-down", "time": 10.0, "reason": "tx-failed"},
        {"node": "n2", "event": "route-down", "time": 12.0, "reason": "tx-failed"},
        {"node": "n2", "event": "route-down", "time": 13.0, "reason": "rerr"},
        {"node": "n3", "event": "neighbour-down", "time": 14.0, "reason": "silent"},
        {"node": "n3", "event": "route-up", "time": 15.0},
        {"node": "n3", "event": "route-down", "time": 20.5, "reason": "hello-loss"},  # after
    ]
    got = count(events, 10.0, 20.0)
    assert got["window_s"] == 10.0
    assert got["route-down"] == {"tx-failed": 2, "rerr": 1}
    assert got["neighbour-down"] == {"silent": 1}
    assert got["route_downs_by_node"] == {"n1": 1, "n2": 2}
