"""Medians and bootstrap confidence intervals: the experiment report's goal cells and the
benches that compare variants round by round (``manetkit bench proxy``).

A goal compares two groups of runs (the best manetkit stack's and a peer's in one cell,
or one group against a fixed target). Each group's figure is the **median** over its
valid runs (robust to the bimodal peers: babeld near full rate or near zero on the same
seed), and the uncertainty is a **percentile bootstrap** (Efron & Tibshirani, *An
Introduction to the Bootstrap*, 1993, ch. 13): resample each group's runs with
replacement, recompute the statistic, and take the 2.5th and 97.5th percentiles of
``resamples`` recomputations (the nearest order statistics outside them) as the 95 %
interval. The two groups are resampled
independently (their runs are separate labs). The random generator is seeded, so the
same runs in the same order always give the same interval; the draws are by index, so
another order is another set of resamples (the report passes the runs in file-name
order). With ten runs a side the resampled medians take few values, and an interval's
far end can move by a fifth or more between orders (the realistic goal cell's DSR /
batmand: upper end 12.2x in file order, 9.4x in another; lower end 0.34x in both).

A goal is met only when the interval's *lower* end clears the target: the claim holds
for the runs' spread, not only for their medians.

Every stack of a cell runs the same seeds (the same movement and flow pairs), and most of
the spread between runs is between seeds: one seed's pair may stay a hop apart while
another's crosses the area. Resampling the two groups independently lets one side's
resample draw the fast seed three times while the other's draws it never, which the
design excludes. :func:`paired_ratio_ci` keeps the pairing: a **cluster bootstrap**
(Davison & Hinkley, *Bootstrap Methods and their Application*, 1997, section 3.8)
resamples the seeds both groups ran and takes each drawn seed's runs from both sides.
With five seeds the percentile interval of a cluster bootstrap is known to be too narrow
(few clusters, few distinct resamples), so the report prints it beside the independent
interval and the goal's verdict stays on the independent one.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000
SEED = 0
LEVEL = 0.95


@dataclass(frozen=True, slots=True)
class Interval:
    """A statistic and its bootstrap interval (``low`` <= ``estimate`` <= ``high`` as a
    rule; ``inf`` when a denominator's median can be 0)."""

    estimate: float
    low: float
    high: float
    n: tuple[int, ...]  # runs in each group

    def clears(self, target: float) -> bool:
        """The interval's lower end is at or above ``target``."""
        return self.low >= target

    def to_json(self) -> dict:
        return {
            "estimate": _finite(self.estimate),
            "low": _finite(self.low),
            "high": _finite(self.high),
            "n": list(self.n),
        }


def _finite(x: float) -> float | str:
    return round(float(x), 4) if np.isfinite(x) else str(x)


def _check(values: Sequence[float], what: str) -> np.ndarray:
    a = np.asarray(values, dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{what}: needs at least one run")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: every value must be a finite number")
    return a


def _resampled_medians(a: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    idx = rng.integers(0, a.size, size=(resamples, a.size))
    return np.median(a[idx], axis=1)


def _bounds(stats: np.ndarray, level: float) -> tuple[float, float]:
    """The interval's ends as order statistics of the resamples (the nearest resample
    at or outside each percentile: never interpolated, so an infinite resample ratio
    stays infinite instead of making the bound undefined)."""
    tail = (1 - level) / 2 * 100
    lo = np.percentile(stats, tail, method="lower")
    hi = np.percentile(stats, 100 - tail, method="higher")
    return float(lo), float(hi)


def median_ci(
    values: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> Interval:
    """The median of ``values`` and its percentile-bootstrap interval."""
    a = _check(values, "values")
    rng = np.random.default_rng(seed)
    lo, hi = _bounds(_resampled_medians(a, rng, resamples), level)
    return Interval(float(np.median(a)), lo, hi, (int(a.size),))


def ratio_ci(
    num: Sequence[float],
    den: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> Interval:
    """median(``num``) / median(``den``) and its bootstrap interval, each group resampled
    on its own. A resample whose denominator median is 0 gives ``inf`` (a peer that
    delivered nothing: any positive numerator clears any ratio)."""
    a = _check(num, "numerator")
    b = _check(den, "denominator")
    rng = np.random.default_rng(seed)
    ma = _resampled_medians(a, rng, resamples)
    mb = _resampled_medians(b, rng, resamples)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(mb > 0, ma / np.where(mb > 0, mb, 1.0), np.where(ma > 0, np.inf, 1.0))
        est_den = float(np.median(b))
        est_num = float(np.median(a))
        estimate = est_num / est_den if est_den > 0 else (np.inf if est_num > 0 else 1.0)
    lo, hi = _bounds(ratios, level)
    return Interval(float(estimate), lo, hi, (int(a.size), int(b.size)))


def reduction_ci(ours: Sequence[float], theirs: Sequence[float], **kw: float) -> Interval:
    """1 - median(``ours``) / median(``theirs``) (how much lower ours is, e.g. a page
    service time) and its bootstrap interval: the ratio's interval turned around."""
    return _turned_around(ratio_ci(ours, theirs, **kw))  # type: ignore[arg-type]


def _turned_around(r: Interval) -> Interval:
    """A ratio's interval as a reduction: 1 - ratio, its ends swapped."""
    return Interval(1 - r.estimate, 1 - r.high, 1 - r.low, r.n)


def _weighted_medians(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row of ``weights`` (how many times each of the sorted ``values`` is drawn): the
    median of that multiset, the mean of its two middle elements when its size is even."""
    cum = weights.cumsum(axis=1)
    total = cum[:, -1]
    lower = np.argmax(cum > ((total - 1) // 2)[:, None], axis=1)
    upper = np.argmax(cum > (total // 2)[:, None], axis=1)
    return (values[lower] + values[upper]) / 2


def _cluster_medians(
    values: np.ndarray, seeds: list[Hashable], index: dict[Hashable, int], drawn: np.ndarray
) -> tuple[float, np.ndarray, int]:
    """The median of the runs whose seed is in ``index``, each resample's median (a
    run counts as often as its seed was drawn: ``drawn[r, index[seed]]``), and how many
    runs that is."""
    keep = sorted((k for k, s in enumerate(seeds) if s in index), key=lambda k: values[k])
    sorted_values = values[keep]
    weights = drawn[:, [index[seeds[k]] for k in keep]]
    return float(np.median(sorted_values)), _weighted_medians(sorted_values, weights), len(keep)


def paired_ratio_ci(
    num: Sequence[tuple[float, Hashable]],
    den: Sequence[tuple[float, Hashable]],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> Interval:
    """median(``num``) / median(``den``) over the runs of the seeds both groups ran, and
    its cluster-bootstrap interval: each resample draws that many seeds with replacement
    and takes every run of each drawn seed from both groups. ``num`` and ``den`` are
    (value, seed) pairs; runs of a seed only one group ran are left out. A resample
    whose denominator median is 0 gives ``inf``, as in :func:`ratio_ci`."""
    a = _check([v for v, _ in num], "numerator")
    b = _check([v for v, _ in den], "denominator")
    shared = sorted({s for _, s in num} & {s for _, s in den}, key=repr)
    if len(shared) < 2:
        raise ValueError(f"paired: needs runs of at least 2 seeds on both sides, got {len(shared)}")
    index = {s: k for k, s in enumerate(shared)}
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(shared), size=(resamples, len(shared)))
    drawn = (picks[:, :, None] == np.arange(len(shared))).sum(axis=1)  # times each seed
    est_num, ma, n_num = _cluster_medians(a, [s for _, s in num], index, drawn)
    est_den, mb, n_den = _cluster_medians(b, [s for _, s in den], index, drawn)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(mb > 0, ma / np.where(mb > 0, mb, 1.0), np.where(ma > 0, np.inf, 1.0))
    estimate = est_num / est_den if est_den > 0 else (np.inf if est_num > 0 else 1.0)
    lo, hi = _bounds(ratios, level)
    return Interval(float(estimate), lo, hi, (n_num, n_den))


def paired_reduction_ci(
    ours: Sequence[tuple[float, Hashable]], theirs: Sequence[tuple[float, Hashable]], **kw: float
) -> Interval:
    """:func:`reduction_ci` with the seed-paired interval of :func:`paired_ratio_ci`."""
    return _turned_around(paired_ratio_ci(ours, theirs, **kw))  # type: ignore[arg-type]
