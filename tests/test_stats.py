"""The bootstrap arithmetic behind the goals: medians and their 95 % intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from manetkit import stats


def test_the_median_interval_brackets_the_median_and_is_reproducible():
    values = [410.0, 520.0, 480.0, 505.0, 495.0, 470.0, 530.0, 515.0, 490.0, 500.0]
    ci = stats.median_ci(values)
    assert ci.estimate == 497.5 and ci.n == (10,)
    assert 470.0 <= ci.low <= 497.5 <= ci.high <= 520.0
    assert stats.median_ci(values) == ci  # seeded: the same runs, the same interval
    # every resample's median is one of the values or a midpoint of two: so are the ends
    mids = {(a + b) / 2 for a in values for b in values}
    assert ci.low in mids and ci.high in mids


def test_a_constant_group_has_a_point_interval():
    ci = stats.median_ci([3.0] * 7)
    assert (ci.estimate, ci.low, ci.high) == (3.0, 3.0, 3.0)


def test_the_ratio_of_two_separated_groups_clears_its_target():
    ours = [1000.0 + 10 * k for k in range(10)]  # median 1045
    theirs = [500.0 + 5 * k for k in range(10)]  # median 522.5
    ci = stats.ratio_ci(ours, theirs)
    assert ci.estimate == pytest.approx(1045 / 522.5)
    assert ci.n == (10, 10)
    # the extremes of any resample: min(ours)/max(theirs) .. max(ours)/min(theirs)
    assert 1000 / 545 <= ci.low <= ci.estimate <= ci.high <= 1090 / 500
    assert ci.clears(1.3) and not ci.clears(2.5)


def test_a_bimodal_peer_widens_the_interval_below_the_target():
    """babeld near full rate or near zero on the same seeds: the median can clear 1.3x
    while the interval does not, and then the goal is not met."""
    ours = [900.0, 920.0, 880.0, 910.0, 905.0, 895.0, 915.0, 890.0, 925.0, 885.0]
    peer = [850.0, 0.0, 860.0, 5.0, 840.0, 0.0, 870.0, 10.0, 845.0, 2.0]
    ci = stats.ratio_ci(ours, peer)
    assert ci.estimate > 1.3  # median of the peer: (10 + 840) / 2 = 425
    assert ci.low < 1.3  # resamples with mostly full-rate runs give ~1.06
    assert ci.high > 100  # resamples with mostly zeros: the peer's median is 0..10 kbit/s


def test_a_peer_that_delivered_nothing_is_an_infinite_ratio():
    ci = stats.ratio_ci([100.0, 200.0], [0.0, 0.0, 0.0])
    assert math.isinf(ci.estimate) and math.isinf(ci.low)
    assert ci.clears(1.3)
    assert ci.to_json()["low"] == "inf"
    both = stats.ratio_ci([0.0], [0.0])  # nothing on either side: no difference
    assert both.estimate == 1.0 and both.low == 1.0


def test_the_reduction_interval_is_the_ratio_interval_turned_around():
    ours = [1.0, 1.2, 1.1, 0.9, 1.05]
    theirs = [2.0, 2.5, 2.2, 1.8, 2.1]
    r = stats.ratio_ci(ours, theirs)
    cut = stats.reduction_ci(ours, theirs)
    assert cut.estimate == pytest.approx(1 - 1.05 / 2.1)
    assert (cut.low, cut.high) == pytest.approx((1 - r.high, 1 - r.low))
    assert cut.clears(0.3)


def test_the_percentiles_are_numpys_over_the_seeded_resamples():
    """The interval is the 2.5th/97.5th percentile (order statistics) of the ratios of
    medians of resamples drawn by numpy's default generator with the documented seed
    (each group in turn)."""
    ours, theirs = [5.0, 7.0, 9.0, 11.0], [2.0, 3.0, 4.0]
    rng = np.random.default_rng(stats.SEED)
    a = np.median(np.asarray(ours)[rng.integers(0, 4, (stats.RESAMPLES, 4))], axis=1)
    b = np.median(np.asarray(theirs)[rng.integers(0, 3, (stats.RESAMPLES, 3))], axis=1)
    lo = np.percentile(a / b, 2.5, method="lower")
    hi = np.percentile(a / b, 97.5, method="higher")
    ci = stats.ratio_ci(ours, theirs)
    assert (ci.low, ci.high) == pytest.approx((lo, hi))


@pytest.mark.parametrize(
    ("num", "den", "what"),
    [([], [1.0], "numerator: needs at least one run"),
     ([1.0], [], "denominator: needs at least one run"),
     ([1.0, float("nan")], [1.0], "numerator: every value must be a finite number")],
)  # fmt: skip
def test_bad_input_is_refused_naming_the_group(num, den, what):
    with pytest.raises(ValueError, match=what):
        stats.ratio_ci(num, den)


def test_the_seed_paired_interval_removes_the_spread_both_sides_share():
    """Seeds whose pairs move 10x apart, ours 2x the peer's on every seed: resampling the
    sides independently mixes fast and slow seeds unevenly and the interval straddles
    1.3x; drawing seeds for both sides at once keeps every resample near 2x."""
    scale = {1: 1500.0, 2: 150.0, 3: 170.0, 4: 140.0, 5: 160.0}
    ours = [(2 * v * f, s) for s, v in scale.items() for f in (0.95, 1.05)]
    theirs = [(v * f, s) for s, v in scale.items() for f in (0.9, 1.1)]
    independent = stats.ratio_ci([v for v, _ in ours], [v for v, _ in theirs])
    paired = stats.paired_ratio_ci(ours, theirs)
    assert paired.estimate == pytest.approx(independent.estimate)
    assert not independent.clears(1.3)
    assert paired.clears(1.3) and paired.high < 2.5
    assert paired.n == (10, 10)


def test_the_paired_resamples_are_whole_seeds_drawn_by_the_seeded_generator():
    """Reference: draw the shared seeds with numpy's generator, pool each drawn seed's
    runs on both sides, and take the medians' ratio."""
    ours = [(5.0, "a"), (7.0, "a"), (9.0, "b"), (30.0, "c"), (11.0, "c")]
    theirs = [(2.0, "a"), (3.0, "b"), (8.0, "b"), (4.0, "c"), (99.0, "d")]
    shared = ["a", "b", "c"]  # "d" ran on one side only: left out
    rng = np.random.default_rng(stats.SEED)
    picks = rng.integers(0, 3, (stats.RESAMPLES, 3))
    ratios = []
    for row in picks:
        drawn = [shared[k] for k in row]
        num = [v for d in drawn for v, s in ours if s == d]
        den = [v for d in drawn for v, s in theirs if s == d]
        ratios.append(np.median(num) / np.median(den))
    ci = stats.paired_ratio_ci(ours, theirs)
    assert ci.n == (5, 4)
    assert ci.estimate == pytest.approx(9.0 / 3.5)
    lo = np.percentile(ratios, 2.5, method="lower")
    hi = np.percentile(ratios, 97.5, method="higher")
    assert (ci.low, ci.high) == pytest.approx((lo, hi))


@given(
    st.lists(st.integers(0, 50), min_size=1, max_size=8).map(sorted),
    st.lists(st.integers(0, 3), min_size=8, max_size=8),
)
def test_a_weighted_median_is_the_median_of_the_expanded_multiset(values, counts):
    counts = counts[: len(values)]
    if sum(counts) == 0:
        counts[0] = 1
    expanded = [v for v, c in zip(values, counts, strict=True) for _ in range(c)]
    got = stats._weighted_medians(np.asarray(values, float), np.asarray([counts]))
    assert got[0] == np.median(expanded)


def test_the_paired_interval_needs_two_seeds_on_both_sides():
    with pytest.raises(ValueError, match="at least 2 seeds on both sides, got 1"):
        stats.paired_ratio_ci([(1.0, 1), (2.0, 2)], [(1.0, 1), (3.0, 3)])
