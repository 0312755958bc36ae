"""Medians and bootstrap confidence intervals for the report's goal cells.

A goal compares two groups of runs (the best manetkit stack's and a peer's in one cell,
or one group against a fixed target). Each group's figure is the **median** over its
valid runs (robust to the bimodal peers: babeld near full rate or near zero on the same
seed), and the uncertainty is a **percentile bootstrap** (Efron & Tibshirani, *An
Introduction to the Bootstrap*, 1993, ch. 13): resample each group's runs with
replacement, recompute the statistic, and take the 2.5th and 97.5th percentiles of
``resamples`` recomputations (the nearest order statistics outside them) as the 95 %
interval. The two groups are resampled
independently (their runs are separate labs). The random generator is seeded, so the
same runs always give the same interval.

A goal is met only when the interval's *lower* end clears the target: the claim holds
for the runs' spread, not only for their medians.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    r = ratio_ci(ours, theirs, **kw)  # type: ignore[arg-type]
    return Interval(1 - r.estimate, 1 - r.high, 1 - r.low, r.n)
