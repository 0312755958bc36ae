"""Scenario files: every shipped one loads; bad fields are refused by name and reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from manetkit.errors import UserError
from manetkit.lab.scenario import (
    RandomWaypointMobility,
    lab_name,
    load_scenario,
    parse_set_args,
    scenario_from_dict,
)

SCENARIOS = Path(__file__).resolve().parents[2] / "configs" / "scenarios"


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_scenario_loads(path):
    sc = load_scenario(path)
    assert sc.nodes >= 2
    lab_name(sc, path)  # a valid lab name


def test_shipped_chains_and_grid():
    for n in range(2, 10):
        sc = load_scenario(SCENARIOS / f"chain-{n}.yaml")
        assert sc.nodes == n and sc.radio.rate_mbps == 2
        assert sc.static_positions() == [(200.0 * i, 0.0) for i in range(n)]
    grid = load_scenario(SCENARIOS / "grid-3x3.yaml").static_positions()
    assert grid[0] == (0, 0) and grid[4] == (200, 200) and grid[8] == (400, 400)


def test_rwp30_speed_override():
    sc = load_scenario(SCENARIOS / "rwp-30.yaml", {"mobility.speed": "2"})
    assert isinstance(sc.mobility, RandomWaypointMobility)
    assert sc.mobility.speed == 2 and sc.nodes == 30 and (sc.area.x, sc.area.y) == (1500, 300)


def test_defaults(tmp_path):
    sc = load_scenario(write(tmp_path, "nodes: 3\n"))
    assert (sc.stack, sc.proxy, sc.radio.rate_mbps, sc.radio.basic, sc.radio.queue_frames) == (
        "none",
        "none",
        2.0,
        1.0,
        50,
    )
    assert sc.radio.retry_limit == 7 and sc.radio.interference is False
    assert sc.propagation.rx_threshold_w == 3.652e-10
    assert load_scenario(write(tmp_path, "nodes: 2\nradio: {rate_mbps: 54}\n")).radio.basic == 6.0


@pytest.mark.parametrize(
    "text, field, reason",
    [
        ("nodes: 3\nradio: {rate_mbps: 3}\n", "radio.rate_mbps", "not an 802.11 rate"),
        ("nodes: 3\nradoi: {}\n", "radoi", "Extra inputs are not permitted"),
        ("nodes: 0\n", "nodes", "greater than or equal to 1"),
        ("nodes: 3\nradio: {loss: 1.5}\n", "radio.loss", "less than or equal to 1"),
        ("nodes: 3\nstack: olsr\n", "stack", "'none', 'aodv', 'dsr'"),
        ("nodes: 3\nradio: {rate_mbps: 54, basic_rate_mbps: 1}\n", "radio", "same PHY"),
        ("nodes: 3\nmobility: {model: random-waypoint, speed: 5}\n", "(top level)", "needs area"),
        (
            "nodes: 3\nmobility: {model: random-waypoint, speed: -1}\narea: {x: 1, y: 1}\n",
            "mobility.speed",
            ">= 0",
        ),
        (
            "nodes: 3\nmobility: {model: teleport}\n",
            "mobility",
            "does not match any of the expected tags",
        ),
        (
            "nodes: 2\nmobility: {model: static, positions: {n1: [0, 0], n7: [1, 1]}}\n",
            "(top level)",
            "unknown node(s) n7",
        ),
        (
            "nodes: 2\nmobility: {model: static, positions: {n1: [0, 0]}}\n",
            "(top level)",
            "no position for n2",
        ),
        ("nodes: 2\nlinks: [{a: n1, b: n9, loss: 0.5}]\n", "(top level)", "unknown node 'n9'"),
        ("nodes: 2\nname: Bad-Name\n", "name", "lab name"),
    ],
)
def test_bad_fields_are_named(tmp_path, text, field, reason):
    path = write(tmp_path, text)
    with pytest.raises(UserError) as exc:
        load_scenario(path)
    msg = str(exc.value)
    assert str(path) in msg
    assert f"  {field}:" in msg
    assert reason.replace(">= 0", "greater than or equal to 0") in msg


def test_override_validated_like_the_file(tmp_path):
    path = write(tmp_path, "nodes: 3\n")
    assert load_scenario(path, {"radio.rate_mbps": "11"}).radio.rate_mbps == 11
    with pytest.raises(UserError, match=r"radio\.rate_mbps: .*not an 802.11 rate"):
        load_scenario(path, {"radio.rate_mbps": "7"})
    with pytest.raises(UserError, match="nodes is not a section"):
        load_scenario(path, {"nodes.x": "1"})
    with pytest.raises(UserError, match="expected key=value"):
        parse_set_args(["radio.rate_mbps"])
    assert parse_set_args(["a.b=1", "c = x"]) == {"a.b": "1", "c": "x"}


def test_unreadable_and_non_mapping(tmp_path):
    with pytest.raises(UserError, match="No such file"):
        load_scenario(tmp_path / "missing.yaml")
    with pytest.raises(UserError, match="mapping"):
        load_scenario(write(tmp_path, "- 1\n- 2\n"))
    with pytest.raises(UserError, match="not valid YAML"):
        load_scenario(write(tmp_path, "nodes: [1,\n"))
    with pytest.raises(UserError, match="mapping"):
        scenario_from_dict([1])  # type: ignore[arg-type]


def test_setdest_path_relative_to_scenario(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "m.setdest").write_text("$node_(1) set X_ 1\n$node_(1) set Y_ 2\n")
    sc = load_scenario(write(sub, "nodes: 1\nmobility: {model: setdest, file: m.setdest}\n"))
    assert sc.setdest_path() == sub / "m.setdest"
    with pytest.raises(UserError, match="missing.setdest"):
        load_scenario(
            write(sub, "nodes: 1\nmobility: {model: setdest, file: missing.setdest}\n", "t.yaml")
        )
