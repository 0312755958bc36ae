"""The run's record of the rates its unicast frames went at (``rateuse.window``)."""

from __future__ import annotations

import pytest

from manetkit.experiment import rateuse
from manetkit.lab.medium.mobility import Static, World
from manetkit.lab.medium.profiles import profile_defaults
from manetkit.lab.medium.realistic import RealisticMedium
from tests.helpers.medium import run_events


def test_window_is_the_difference_busiest_link_first():
    a = {"n1>n2": {"1": [10, 8], "11": [5, 5]}, "n3>n2": {"2": [4, 1]}}
    b = {
        "n1>n2": {"1": [30, 20], "11": [5, 5]},  # no 11 Mbit/s attempt in the window
        "n3>n2": {"2": [4, 1]},  # idle in the window: left out
        "n2>n1": {"11": [100, 90]},  # new in the window
    }
    w = rateuse.window(a, b)
    assert w is not None
    assert [x["link"] for x in w["links"]] == ["n2>n1", "n1>n2"]
    n1 = w["links"][1]
    assert n1["attempts"] == {"1": 20} and n1["acked"] == {"1": 12}
    assert n1["delivery"] == 0.6 and n1["mean_rate_mbps"] == 1.0
    assert w["totals"] == {"1": {"attempts": 20, "acked": 12}, "11": {"attempts": 100, "acked": 90}}
    assert w["acked_share"] == {"1": round(12 / 102, 4), "11": round(90 / 102, 4)}


def test_no_reading_no_record_and_counts_going_down_are_refused():
    assert rateuse.window(None, {"n1>n2": {"1": [1, 1]}}) is None
    with pytest.raises(ValueError, match="went down"):
        rateuse.window({"n1>n2": {"1": [5, 5]}}, {"n1>n2": {"1": [4, 4]}})


def test_window_over_a_real_medium_adds_up_to_its_counters():
    """Two readings of the realistic medium's ``stats``: the window's acknowledged
    attempts are the unicast frames delivered between them, and a near and a far sender
    to one relay are told apart by the rate they used."""
    prof = profile_defaults("outdoor", "802.11b").with_(
        rate_control="minstrel", shadowing_sigma_db=0.0, coherence_time_s=0.0
    )
    m = RealisticMedium(World(Static([(0, 0), (40.0, 0), (-190.0, 0)]), 3), prof, seed=4)
    run_events(m, 2.0, {2: 1, 3: 1})
    s0 = m.stats()
    ok0 = s0["unicast_ok"]
    run_events(m, 4.0, {2: 1, 3: 1}, t=2.0)
    s1 = m.stats()
    w = rateuse.window(s0["rate_use"], s1["rate_use"])
    assert w is not None
    assert sum(t["acked"] for t in w["totals"].values()) == s1["unicast_ok"] - ok0
    by_link = {x["link"]: x for x in w["links"]}
    assert by_link["n2>n1"]["mean_rate_mbps"] > 8.0
    assert by_link["n3>n1"]["mean_rate_mbps"] < 3.0
