"""Random waypoint, run-time moves and the ground-truth graph / hop counts."""

from __future__ import annotations

import io
import json
import math

import pytest

from manetkit.lab.build import scenario_events
from manetkit.lab.medium.groundtruth import GroundTruthLog, bfs_hops, hop_counts, time_at_hops
from manetkit.lab.medium.mobility import RandomWaypoint, Static, World
from manetkit.lab.scenario import scenario_from_dict


def test_rwp_is_seeded_bounded_and_continuous():
    a = RandomWaypoint(5, (1500, 300), speed=10, seed=4)
    b = RandomWaypoint(5, (1500, 300), speed=10, seed=4)
    c = RandomWaypoint(5, (1500, 300), speed=10, seed=5)
    ts = [k * 0.5 for k in range(0, 400)]
    pa = [a.position(2, t) for t in ts]
    assert pa == [b.position(2, t) for t in reversed(ts)][::-1]  # query order does not matter
    assert pa != [c.position(2, t) for t in ts]
    for x, y in pa:
        assert 0 <= x <= 1500 and 0 <= y <= 300
    # Holland & Vaidya speeds: every step is at most 1.1 v, and the node does move.
    steps = [math.dist(p, q) / 0.5 for p, q in zip(pa, pa[1:], strict=False)]
    assert max(steps) <= 11.0 + 1e-9 and sum(steps) > 0


def test_rwp_uniform_never_zero_and_pause():
    m = RandomWaypoint(3, (100, 100), speed=5, pause_s=2.0, speed_dist="uniform", seed=1)
    assert m.position(0, 0.0) == m.position(0, 1.99)  # paused at start
    for _ in range(200):
        assert 0.1 <= m._draw_speed(m._rngs[0]) <= 5
    assert not RandomWaypoint(2, (100, 100), speed=0).mobile


def test_world_move_walk_and_jump():
    w = World(Static([(0, 0), (100, 0)]), 2)
    w.move(0, 100, 0, t=10.0, speed=10)
    assert w.position(0, 10.0) == (0, 0)
    assert w.position(0, 15.0) == pytest.approx((50, 0))
    assert w.position(0, 30.0) == pytest.approx((100, 0))
    w.move(1, 500, 500, t=1.0)
    assert w.position(1, 1.0) == (500, 500)
    with pytest.raises(ValueError):
        w.move(5, 0, 0, t=0)
    with pytest.raises(ValueError):
        w.set_link(0, 0, "down")
    w.set_link(1, 0, "down")
    assert w.link_state(0, 1) == "down"
    w.set_link(0, 1, "auto")
    assert w.link_state(0, 1) == "auto"


def test_bfs_hops():
    edges = [["n1", "n2"], ["n2", "n3"], ["n3", "n4"], ["n1", "n5"], ["n5", "n4"]]
    assert bfs_hops(edges, "n1", "n4") == 2
    assert bfs_hops(edges, "n1", "n1") == 0
    assert bfs_hops(edges, "n1", "n9") is None


def test_log_only_on_change_and_hop_counts_from_log(tmp_path):
    out = io.StringIO()
    log = GroundTruthLog(out, t0_wall=1000.0)
    chain = [["n1", "n2"], ["n2", "n3"]]
    assert log.observe(0.0, chain) is not None
    assert log.observe(0.1, chain) is None
    log.observe(5.0, chain + [["n1", "n3"]])
    log.observe(9.0, [["n1", "n2"]])
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [x["t"] for x in lines] == [0.0, 5.0, 9.0] and lines[1]["wall"] == 1005.0
    path = tmp_path / "gt.jsonl"
    path.write_text(out.getvalue())
    counts = hop_counts(path, "n1", "n3")
    assert counts == [(0.0, 2), (5.0, 1), (9.0, None)]
    assert time_at_hops(counts, 10.0) == {2: 5.0, 1: 4.0, None: 1.0}


def test_hop_counts_from_scenario_walk_away(tmp_path):
    (tmp_path / "walk.setdest").write_text(
        "$node_(0) set X_ 0\n$node_(0) set Y_ 0\n$node_(1) set X_ 200\n$node_(1) set Y_ 0\n"
        "$node_(2) set X_ 400\n$node_(2) set Y_ 0\n"
        '$ns_ at 1.0 "$node_(2) setdest 100 0 10"\n'  # comes closer: 1 hop from t = 16
        '$ns_ at 30.0 "$node_(2) setdest 1000 0 100"\n'  # then leaves (partition)
    )
    sc = scenario_from_dict(
        {"nodes": 3, "mobility": {"model": "setdest", "file": "walk.setdest"}}, base_dir=tmp_path
    )
    counts = hop_counts(scenario_events(sc, duration_s=40.0), "n1", "n3")
    assert [h for _, h in counts] == [2, 1, 2, None]
    assert counts[1][0] == pytest.approx(16.0, abs=0.11)  # 400 -> 250 m at 10 m/s from t = 1
    assert counts[3][0] == pytest.approx(30.0 + (450 - 100) / 100, abs=0.11)
