"""ns-2 / BonnMotion movement files: good files parse, malformed lines are all reported."""

from __future__ import annotations

import pytest

from manetkit.errors import UserError
from manetkit.lab.medium.mobility import Trajectories
from manetkit.lab.medium.setdest import parse_setdest

BONNMOTION = """\
$node_(0) set X_ 10.0
$node_(0) set Y_ 20.0
$node_(0) set Z_ 0.0
$node_(1) set X_ 300.5
$node_(1) set Y_ 0
$god_ set-dist 0 1 1
$ns_ at 2.0 "$node_(0) setdest 110.0 20.0 10.0"
$ns_ at 1.0 "$god_ set-dist 0 1 2"
# a comment

$ns_ at 20.0 "$node_(1) setdest 0.0 0.0 1.0e1"
"""


def test_bonnmotion_zero_based():
    tr = parse_setdest(BONNMOTION, 2)
    assert tr.initial == {0: (10.0, 20.0), 1: (300.5, 0.0)}
    assert [(m.t, m.node, m.x, m.y, m.speed) for m in tr.moves] == [
        (2.0, 0, 110.0, 20.0, 10.0),
        (20.0, 1, 0.0, 0.0, 10.0),
    ]


def test_one_based_when_no_node_zero():
    text = "$node_(1) set X_ 5\n$node_(1) set Y_ 6\n$node_(2) set X_ 7\n$node_(2) set Y_ 8\n"
    assert parse_setdest(text, 2).initial == {0: (5.0, 6.0), 1: (7.0, 8.0)}
    # explicit base 0: node_(2) is the third node, not in a 2-node lab
    with pytest.raises(UserError, match=r"line 3: node_\(2\) is outside"):
        parse_setdest(text, 2, base=0)


def test_malformed_lines_all_listed():
    text = (
        "$node_(0) set X_ 0\n"
        "$node_(0) set Y_ zero\n"
        '$ns_ at 1.0 "$node_(0) setdest 1 2"\n'
        '$ns_ at 1.0 "$node_(0) setdest 1 2 -3"\n'
        "hello\n"
    )
    with pytest.raises(UserError) as exc:
        parse_setdest(text, 1, source="bad.setdest")
    msg = str(exc.value)
    assert "bad.setdest" in msg
    for n in (2, 3, 5):
        assert f"line {n}: not a setdest line" in msg
    assert "line 4:" in msg
    assert "line 1" not in msg


def test_missing_initial_position():
    with pytest.raises(UserError, match="no initial position .* n2"):
        parse_setdest("$node_(0) set X_ 0\n$node_(0) set Y_ 0\n", 2)


def test_trajectory_follows_moves():
    tr = parse_setdest(BONNMOTION, 2)
    traj = Trajectories.from_setdest(tr, 2)
    assert traj.position(0, 0.0) == (10.0, 20.0)
    assert traj.position(0, 2.0) == (10.0, 20.0)
    assert traj.position(0, 7.0) == pytest.approx((60.0, 20.0))  # 5 s at 10 m/s
    assert traj.position(0, 100.0) == pytest.approx((110.0, 20.0))
    # A later command interrupts the current one from where the node is.
    t2 = Trajectories([(0.0, 0.0)], [(0.0, 0, 100.0, 0.0, 10.0), (5.0, 0, 50.0, 0.0, 10.0)])
    assert t2.position(0, 5.0) == pytest.approx((50.0, 0.0))
    assert t2.position(0, 6.0) == pytest.approx((50.0, 0.0))
