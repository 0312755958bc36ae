"""The daemon's top-level ``atra:`` reaches the engine; bad fields are refused by name;
``lab up --set atra.rfp=true`` reaches every node's daemon config."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from manetkit.daemon.config import parse_config
from manetkit.errors import UserError
from manetkit.lab import stacks
from manetkit.lab.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "configs" / "scenarios"
BASE = {"address": "10.42.0.1", "protocol": "dsr"}


def test_off_by_default() -> None:
    atra = parse_config(BASE).engine_config().atra
    assert (atra.rfp, atra.pre, atra.srp) == (False, False, False)
    assert (atra.history, atra.lookahead_s, atra.pre_window_s) == (3, 2.0, 1.0)
    assert atra.path_loss_exponent == 4


@pytest.mark.parametrize("protocol", ["dsr", "smr", "aodv"])
def test_top_level_section_reaches_the_engine(protocol: str) -> None:
    cfg = parse_config(
        {
            **BASE,
            "protocol": protocol,
            "link_sensing": {"backend": "nl80211"},
            "atra": {"rfp": True, "pre": True},
        }
    )
    atra = cfg.engine_config().atra
    assert atra.rfp and atra.pre and not atra.srp


@pytest.mark.parametrize(
    ("section", "needle"),
    [
        ({"rfq": True}, "atra.rfq: Extra inputs are not permitted"),
        ({"lookahead_s": 0}, "atra.lookahead_s: Input should be greater than 0"),
        ({"history": 1}, "atra.history"),
    ],
)
def test_bad_fields_are_named(section: dict, needle: str) -> None:
    with pytest.raises(UserError, match=needle.replace(".", r"\.")):
        parse_config({**BASE, "atra": section})


def test_lab_set_reaches_the_daemons(monkeypatch: pytest.MonkeyPatch) -> None:
    sc = load_scenario(
        SCENARIOS / "walkaway.yaml", {"stack": "dsr", "atra.rfp": "true", "atra.pre": "true"}
    )
    assert sc.atra == {"rfp": True, "pre": True}
    made: list[dict] = []

    def spec(lab: str, node: str, proto: str, extra: dict | None = None) -> None:
        made.append(stacks.daemon_config(lab, node, proto, extra))

    monkeypatch.setattr(stacks, "daemon_spec", spec)
    stacks.node_processes("walkaway", sc, "n1")
    assert made[0]["atra"] == {"rfp": True, "pre": True}
    atra = parse_config(made[0]).engine_config().atra
    assert atra.rfp and atra.pre


@pytest.mark.parametrize(
    ("sensing", "atra", "needle"),
    [
        ({}, {"rfp": True}, "atra.rfp: link_sensing.backend 'hello' reports no received powers"),
        (
            {"backend": "nl80211", "poll_s": 1.0},
            {"rfp": True},
            "atra.window_s: 4 s holds fewer than history + 4 = 7 polls",
        ),
    ],
)
def test_rfp_that_could_never_predict_is_refused(sensing, atra, needle) -> None:
    """No powers (hello), or too few polls in the fit window (median of three, then
    ``history`` points): RFP would be silently inert, so the config is refused."""
    with pytest.raises(UserError, match=re.escape(needle)):
        parse_config({**BASE, "link_sensing": sensing, "atra": atra})
    # the same window with polls dense enough, or pre/srp alone, are fine
    parse_config({**BASE, "link_sensing": {**sensing, "backend": "nl80211", "poll_s": 0.5},
                  "atra": atra})  # fmt: skip
    parse_config({**BASE, "atra": {"pre": True, "srp": True}})
