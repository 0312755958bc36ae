"""Atra's route failure prediction, RFP (Anantharaman et al. section IV-A), sans-I/O.

The paper models the received power beyond the two-ray crossover as ``P = K / d^4``, so
a node can turn each power it hears from a neighbour into a distance, fit how fast the
two are moving apart (``s``) over the last N receptions, and predict the link's failure
once the power falls below

    P_RFP = K / (r - s*t)^4        (r: reception range, t: look-ahead, 2 s)

i.e. once the neighbour is expected to cross the range edge within ``t``. K comes from the
configured receive threshold and range (``K = P_th * r^n``: with ns-2's two-ray this is
exactly ``Pt*Gt*Gr*ht^2*hr^2``); the exponent ``n`` is 4 as in the paper, or a
log-distance exponent (about 3) for real Wi-Fi.

The paper's speed is the mean of the N-1 consecutive slopes of ``(1/P)^(1/4)``; for
evenly spaced receptions that is the least-squares slope over the N points, which is
what this module computes, over every power heard in the last ``window_s`` (at least N
of them). Section V names the two ways a prediction goes wrong, a stationary neighbour
just inside the range and fading; "maintaining the history" is the paper's guard. Here
the history is made robust explicitly: a causal median of three removes single fading
dips, the fitted speed must be ``min_t_stat`` standard errors above zero and below
``max_speed_mps``, and ``confirm`` consecutive samples must agree.

Bookkeeping (:mod:`.scoring`): a prediction is a *hit* when the link really fails
within twice the look-ahead, otherwise a *false alarm*; a failure with no open
prediction is a *break not predicted*.
"""

from __future__ import annotations

import math
from collections import deque
from ipaddress import IPv4Address

from manetkit.daemon.engines.atra.config import AtraConfig
from manetkit.daemon.engines.atra.scoring import MAX_FAILED, Prediction, ScoredPredictor

__all__ = ["MAX_FAILED", "Prediction", "RfpPredictor", "fit_line", "t_scale"]

_LN10 = math.log(10.0)


def fit_line(ts: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least-squares ``y = a + b*t``: returns (a, b, standard error of b; inf if unknown)."""
    n = len(ts)
    mt = sum(ts) / n
    my = sum(ys) / n
    sxx = sum((t - mt) ** 2 for t in ts)
    if sxx <= 0:
        return my, 0.0, math.inf
    b = sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True)) / sxx
    a = my - b * mt
    if n <= 2:
        return a, b, math.inf
    sse = sum((y - (a + b * t)) ** 2 for t, y in zip(ts, ys, strict=True))
    return a, b, math.sqrt(sse / (n - 2) / sxx)


# One-sided 99 % quantiles of Student's t by degrees of freedom (beyond 30: 2.33):
# with few powers in the window the fit's standard error is itself uncertain, so the
# required t statistic grows (min_t_stat is scaled by t_dof / t_inf).
_T99 = {
    1: 31.82,
    2: 6.96,
    3: 4.54,
    4: 3.75,
    5: 3.36,
    6: 3.14,
    7: 3.0,
    8: 2.9,
    9: 2.82,
    10: 2.76,
    12: 2.68,
    15: 2.6,
    20: 2.53,
    30: 2.46,
}


def t_scale(dof: int) -> float:
    """How much harder than with many samples a fit with ``dof`` must be (>= 1)."""
    if dof <= 0:
        return math.inf
    for k in sorted(_T99):
        if dof <= k:
            return _T99[k] / 2.33
    return 1.0


def _median3(samples: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Causal median of three: each output is the middle sample (its own time) of three.

    A single dip (or spike) never becomes the median, so it never reaches the fit.
    """
    out = []
    for i in range(2, len(samples)):
        out.append(sorted(samples[i - 2 : i + 1], key=lambda s: s[1])[1])
    return out


class RfpPredictor(ScoredPredictor):
    """Per-neighbour power history and the RFP rule; inputs stamped with ``now``."""

    def __init__(self, config: AtraConfig) -> None:
        super().__init__(config)
        self._hist: dict[IPv4Address, deque[tuple[float, float]]] = {}

    # -- the propagation model (section IV-A: P = K / d^n)
    @property
    def k_w(self) -> float:
        """K in W*m^n: the threshold power times the range to the n-th power."""
        p_th = 10 ** (self.cfg.rx_threshold_dbm / 10) / 1000
        return p_th * self.cfg.range_m**self.cfg.path_loss_exponent

    def distance_m(self, dbm: float) -> float:
        """``d = (K/P)^(1/n)``, computed as ``r * (P_th/P)^(1/n)``."""
        cfg = self.cfg
        return cfg.range_m * 10 ** ((cfg.rx_threshold_dbm - dbm) / (10 * cfg.path_loss_exponent))

    def threshold_dbm(self, speed_mps: float) -> float:
        """``P_RFP = K / (r - s*t)^n`` in dBm (the paper's prediction threshold)."""
        cfg = self.cfg
        left = cfg.range_m - speed_mps * cfg.lookahead_s
        if left <= 0:
            return math.inf
        return cfg.rx_threshold_dbm + 10 * cfg.path_loss_exponent * math.log10(cfg.range_m / left)

    # -- inputs
    def sample(self, now: float, neighbour: IPv4Address, dbm: float) -> Prediction | None:
        """A power heard from ``neighbour``; returns a new prediction, if this makes one."""
        cfg = self.cfg
        hist = self._hist.setdefault(neighbour, deque())
        if hist and now < hist[-1][0]:
            return None  # out of order: ignore rather than corrupt the fit
        hist.append((now, dbm))
        while hist and hist[0][0] < now - cfg.window_s:
            hist.popleft()
        est = self._estimate(now, list(hist))
        if est is None:
            self._streak[neighbour] = 0
            return None
        speed, d_now, t_stat = est
        if speed > cfg.max_speed_mps or t_stat < cfg.min_t_stat:
            self._streak[neighbour] = 0
            return None
        # The recession must be established on ``confirm`` consecutive samples; the
        # threshold test itself is then the paper's, on the latest fit.
        streak = self._streak.get(neighbour, 0) + 1
        self._streak[neighbour] = streak
        eta = (cfg.range_m - d_now) / speed
        if eta > cfg.lookahead_s:  # P > P_RFP(s), i.e. d < r - s*t: not yet
            return None
        if streak < cfg.confirm or neighbour in self.book.open:
            return None
        slope = -10 * cfg.path_loss_exponent * speed / (_LN10 * max(d_now, 1e-3))
        pred = Prediction(
            neighbour=neighbour,
            at=now,
            signal_dbm=round(dbm, 2),
            slope_db_per_s=round(slope, 3),
            eta_s=round(max(eta, 0.0), 3),
            speed_mps=round(speed, 2),
            distance_m=round(d_now, 1),
        )
        self.book.add(pred)
        return pred

    def _estimate(
        self, now: float, hist: list[tuple[float, float]]
    ) -> tuple[float, float, float] | None:
        """(receding speed m/s, distance now, t statistic of the speed) or None."""
        pts = _median3(hist) if len(hist) >= 3 else []
        if len(pts) < self.cfg.history:
            return None
        ts = [t for t, _ in pts]
        ds = [self.distance_m(p) for _, p in pts]
        a, speed, se = fit_line(ts, ds)
        if speed <= 0:
            return None
        t_stat = speed / se if se > 0 else math.inf
        return speed, a + speed * now, t_stat / t_scale(len(pts) - 2)

    def _forget(self, neighbour: IPv4Address) -> tuple[bool, float | None]:
        hist = self._hist.pop(neighbour, None)
        return hist is not None, hist[-1][0] if hist else None
