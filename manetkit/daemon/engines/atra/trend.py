"""Atra's route failure prediction that survives fading (``atra.predictor: trend``).

The paper's rule (Anantharaman et al. IV-A, :mod:`.rfp`) turns each received power into a
distance and fits a speed to the last few; on real 802.11 the per-frame power swings by
several dB (Nakagami / Rayleigh fading) and by 4-8 dB over tens of metres (shadowing),
so three samples do not make a trend, and the fit's look-ahead is spent waiting for
enough samples to pass its noise guards. This predictor:

- **smooths** every power heard from a neighbour with a Kalman filter on the signal's
  level and slope (a constant-velocity model in dB; :class:`~manetkit.daemon.engines.
  linkquality.smoothing.KalmanTrend`): each sample weighs by how noisy samples are
  (``trend_noise_db``) against how fast a slope can change (``trend_accel``), and a deep
  fade moves the estimate by a bounded step (innovation gating). No distance model is
  needed: the edge is a power, ``rx_threshold_dbm``;
- **predicts** when the smoothed level, falling significantly (at least
  ``trend_min_slope_db_per_s`` and ``trend_z`` standard deviations below zero), will
  cross the edge within ``lookahead_s``, and the measured loss does not contradict it
  (none measured, or some loss already);
- **or** when the link is near the edge (within ``loss_margin_db``), not rising, and
  its measured loss reaches ``loss_trigger``: the data path says what the trend cannot
  yet (a neighbour standing at the edge, a slow walker in shadow);
- the condition must hold on ``trend_confirm`` consecutive samples.

The measured loss comes from link quality's estimator when it runs
(:meth:`~manetkit.daemon.engines.linkquality.estimator.LinkEstimates.recent_loss`: the
data path's failed attempts of the last seconds, else the missed beacons); without it
the trend decides alone. Scoring is the fit's (:mod:`.scoring`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from ipaddress import IPv4Address

from manetkit.daemon.engines.atra.config import AtraConfig
from manetkit.daemon.engines.atra.scoring import Prediction, ScoredPredictor
from manetkit.daemon.engines.linkquality.smoothing import KalmanTrend

LossOf = Callable[[float, IPv4Address], float | None]
MAX_TRACKED = 1024  # neighbours with a filter; beyond that the one heard least recently goes


class TrendPredictor(ScoredPredictor):
    """Per-neighbour Kalman trend and the combined trigger; inputs stamped with ``now``."""

    def __init__(self, config: AtraConfig, loss_of: LossOf | None = None) -> None:
        super().__init__(config)
        self.loss_of = loss_of
        self._filters: dict[IPv4Address, KalmanTrend] = {}

    def _filter(self, neighbour: IPv4Address) -> KalmanTrend:
        k = self._filters.get(neighbour)
        if k is None:
            if len(self._filters) >= MAX_TRACKED:
                old = min(self._filters, key=lambda n: self._filters[n].at)
                del self._filters[old]
                self._streak.pop(old, None)
            cfg = self.cfg
            k = self._filters[neighbour] = KalmanTrend(cfg.trend_accel, cfg.trend_noise_db)
        return k

    # -- inputs
    def sample(self, now: float, neighbour: IPv4Address, dbm: float) -> Prediction | None:
        """A power heard from ``neighbour``; returns a new prediction, if this makes one."""
        cfg = self.cfg
        k = self._filter(neighbour)
        if k.samples and now < k.at:
            return None  # out of order: ignore rather than corrupt the filter
        if k.samples and now - k.at > cfg.window_s:
            k.level = None  # silent for a whole window: what we knew is stale
            k.samples = 0
        k.update(now, dbm)
        if k.samples < cfg.history or not self._condition(now, neighbour, k):
            self._streak[neighbour] = 0
            return None
        streak = self._streak.get(neighbour, 0) + 1
        self._streak[neighbour] = streak
        if streak < cfg.trend_confirm or neighbour in self.book.open:
            return None
        level = k.level or 0.0
        eta = (level - cfg.rx_threshold_dbm) / -k.slope if k.slope < 0 else math.inf
        pred = Prediction(
            neighbour=neighbour,
            at=now,
            signal_dbm=round(level, 2),
            slope_db_per_s=round(k.slope, 3),
            eta_s=round(min(max(eta, 0.0), 3600.0), 3),
            speed_mps=0.0,  # no distance model here
            distance_m=0.0,
        )
        self.book.add(pred)
        return pred

    def _condition(self, now: float, neighbour: IPv4Address, k: KalmanTrend) -> bool:
        cfg = self.cfg
        level, slope, sd = k.level or 0.0, k.slope, k.slope_sd
        edge = cfg.rx_threshold_dbm
        loss = self.loss_of(now, neighbour) if self.loss_of is not None else None
        falling = slope <= -cfg.trend_min_slope_db_per_s and slope < -cfg.trend_z * sd
        if falling and level + slope * cfg.lookahead_s <= edge and (loss is None or loss > 0):
            return True
        return (
            loss is not None
            and loss >= cfg.loss_trigger
            and level <= edge + cfg.loss_margin_db
            and slope <= 0
        )

    def _forget(self, neighbour: IPv4Address) -> tuple[bool, float | None]:
        k = self._filters.pop(neighbour, None)
        return k is not None, k.at if k is not None and k.samples else None
