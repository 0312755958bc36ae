"""Scenario files: every shipped one loads; bad fields are refused by name and reason."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

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
        (
            "nodes: 2\nradio: {profile: outdoor, shadowing_sigma_db: -2}\n",
            "radio.shadowing_sigma_db",
            "a standard deviation is",
        ),
        (
            "nodes: 2\nradio: {profile: indoor, path_loss_exponent: 0.8}\n",
            "radio.path_loss_exponent",
            "must be 1..8",
        ),
        (
            "nodes: 2\nradio: {profile: outdoor, standard: 802.11b, rate_mbps: 54}\n",
            "radio.rate_mbps",
            "54 Mbit/s is not an 802.11b rate; use one of 1, 2, 5.5, 11",
        ),
        (
            "nodes: 2\nradio: {profile: outdoor, standard: 802.11g, basic_rate_mbps: 1}\n",
            "radio.basic_rate_mbps",
            "not an 802.11g rate",
        ),
        (
            "nodes: 2\nradio: {profile: outdoor, standard: 802.11b, mcast_rate_mbps: 6}\n",
            "radio.mcast_rate_mbps",
            "6 Mbit/s is not an 802.11b rate",
        ),
        ("nodes: 2\nradio: {mcast_rate_mbps: 2}\n", "radio", "realistic-profile field(s)"),
        (
            "nodes: 2\nradio: {profile: outdoor, nakagami_m: 0.2}\n",
            "radio.nakagami_m",
            "Nakagami's m is",
        ),
        (
            "nodes: 2\nradio: {profile: outdoor, usable_per: 1.5}\n",
            "radio.usable_per",
            "between 0 and 1",
        ),
        (
            "nodes: 2\nradio: {profile: outdoor, noise_figure_db: -3}\n",
            "radio.noise_figure_db",
            "greater than or equal to 0",
        ),
        ("nodes: 2\nradio: {profile: urban}\n", "radio.profile", "'ns2', 'outdoor' or 'indoor'"),
        ("nodes: 2\nradio: {nakagami_m: 1}\n", "radio", "realistic-profile field(s); profile ns2"),
        (
            "nodes: 2\nradio: {profile: outdoor, interference: true}\n",
            "radio",
            "ns2-profile field(s)",
        ),
        (
            "nodes: 2\nradio: {profile: outdoor}\npropagation: {pt_w: 1}\n",
            "(top level)",
            "two-ray ground belongs to the ns2 profile",
        ),
        (
            "nodes: 2\nradio: {profile: outdoor, node_offsets: {n5: {tx_power_db: 3}}}\n",
            "(top level)",
            "unknown node(s) n5",
        ),
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


def test_realistic_profile_defaults_and_overrides(tmp_path):
    sc = load_scenario(write(tmp_path, "nodes: 3\nradio: {profile: outdoor}\n"))
    r = sc.radio
    assert (r.standard, r.rate_mbps, r.basic) == ("802.11b", 11.0, 1.0)
    p = r.phy_profile({"n1": 0, "n2": 1, "n3": 2})
    assert (p.path_loss_exponent, p.shadowing_sigma_db, p.nakagami_m) == (3.0, 4.0, 1.5)
    assert p.reference_loss_db == pytest.approx(40.0953, abs=1e-3)  # Friis at 2412 MHz, 1 m
    g = load_scenario(write(tmp_path, "nodes: 2\nradio: {profile: indoor, rate_mbps: 24}\n"))
    assert (g.radio.standard, g.radio.basic) == ("802.11g", 6.0)
    text = (
        "nodes: 3\nradio: {profile: indoor, nakagami_m: 0, frequency_mhz: 2462, "
        "node_offsets: {n2: {tx_power_db: -6}}}\n"
    )
    p = load_scenario(write(tmp_path, text)).radio.phy_profile({"n1": 0, "n2": 1, "n3": 2})
    assert p.nakagami_m is None  # 0 turns fading off
    assert p.reference_loss_db == pytest.approx(40.273, abs=1e-3)  # Friis at 2462 MHz
    assert p.node_offsets[1].tx_power_db == -6
    assert p.broadcast_rate_mbps == 1.0  # no multicast rate: the basic rate (802.11b)
    m = load_scenario(write(tmp_path, "nodes: 2\nradio: {profile: outdoor}\n"),
                      {"radio.mcast_rate_mbps": "5.5"})  # fmt: skip
    p = m.radio.phy_profile({"n1": 0, "n2": 1})
    assert (p.mcast_rate_mbps, p.broadcast_rate_mbps, p.basic_rate_mbps) == (5.5, 5.5, 1.0)
    # the ns2 profile is untouched by all of this
    assert load_scenario(write(tmp_path, "nodes: 2\n")).radio.profile == "ns2"


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


@pytest.mark.parametrize("name", ["chain-5", "rwp-30", "rwp-30-outdoor", "chain-gray-5"])
def test_a_dumped_scenario_loads_back_the_same(tmp_path, name):
    """lab compose and the medium process hand scenarios over as dumped YAML (every
    field written, unset ones as null): loading that must give the same scenario."""
    sc = load_scenario(SCENARIOS / f"{name}.yaml")
    dumped = tmp_path / "dumped.yaml"
    dumped.write_text(yaml.safe_dump(sc.model_dump(mode="json", exclude={"base_dir"})))
    again = load_scenario(dumped)
    assert again.model_dump(exclude={"base_dir"}) == sc.model_dump(exclude={"base_dir"})
