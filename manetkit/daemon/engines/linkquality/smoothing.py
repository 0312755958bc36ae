"""Smoothing noisy link observations in time (pure functions and small state, no clock).

Per-frame signal on real 802.11 swings by several dB from frame to frame (Nakagami /
Rayleigh fading) and by 4-8 dB over tens of metres (shadowing), so nothing here ever
trusts one sample:

- :class:`Ewma`: an exponentially weighted mean whose weight follows the time between
  samples (a half-life, not a per-sample weight: samples come at irregular times);
- :class:`DecayedRatio`: successes over attempts, both decayed with a half-life (the
  data path's delivery ratio from transmit statuses);
- :class:`KalmanTrend`: level and slope of a signal (a constant-velocity Kalman filter,
  Kalman 1960; the standard two-state tracker, e.g. Bar-Shalom, Li & Kirubarajan,
  "Estimation with Applications to Tracking and Navigation", 6.3.2), with innovation
  gating so a deep fade moves the estimate by a bounded step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def decay(dt: float, half_life: float) -> float:
    """The weight an old value keeps after ``dt`` seconds (1 at dt <= 0)."""
    return 0.5 ** (dt / half_life) if dt > 0 else 1.0


@dataclass(slots=True)
class Ewma:
    """Exponentially weighted mean with a half-life in seconds."""

    half_life: float
    value: float | None = None
    at: float = 0.0

    def update(self, now: float, x: float) -> float:
        if self.value is None:
            self.value = x
        else:
            keep = decay(now - self.at, self.half_life)
            self.value = keep * self.value + (1 - keep) * x
        self.at = max(self.at, now)
        return self.value


@dataclass(slots=True)
class DecayedRatio:
    """``ok / attempts``, both decayed with a half-life: recent attempts weigh most."""

    half_life: float
    attempts: float = 0.0
    ok: float = 0.0
    at: float = 0.0

    def add(self, now: float, attempts: float, ok: float) -> None:
        keep = decay(now - self.at, self.half_life)
        self.attempts = self.attempts * keep + attempts
        self.ok = self.ok * keep + ok
        self.at = max(self.at, now)

    def weight(self, now: float) -> float:
        """The attempts still counted at ``now``."""
        return self.attempts * decay(now - self.at, self.half_life)

    def ratio(self) -> float | None:
        return self.ok / self.attempts if self.attempts > 0 else None


@dataclass(slots=True)
class KalmanTrend:
    """Level (dBm) and slope (dB/s) of a signal: a constant-velocity Kalman filter.

    ``accel`` is the process noise: the spectral density of the slope's random walk
    (dB^2/s^3); ``noise_db`` the standard deviation of one sample around the true level
    (what fading and rounding add). A sample whose innovation exceeds ``gate`` standard
    deviations is clipped to the gate before the update: a deep fade pulls the estimate
    by a bounded step, a real change keeps pulling and gets through.
    """

    accel: float = 1.0
    noise_db: float = 3.0
    gate: float = 3.0
    level: float | None = None
    slope: float = 0.0
    at: float = 0.0
    # covariance [[p00, p01], [p01, p11]]
    p00: float = 0.0
    p01: float = 0.0
    p11: float = 0.0
    samples: int = 0

    def update(self, now: float, y: float) -> None:
        r = self.noise_db**2
        if self.level is None:
            self.level, self.slope, self.at = y, 0.0, now
            self.p00, self.p01, self.p11 = r, 0.0, 4.0  # slope unknown: +-2 dB/s
            self.samples = 1
            return
        dt = max(now - self.at, 0.0)
        self.at = max(self.at, now)
        # predict
        lv = self.level + self.slope * dt
        q = self.accel
        p00 = self.p00 + 2 * dt * self.p01 + dt * dt * self.p11 + q * dt**3 / 3
        p01 = self.p01 + dt * self.p11 + q * dt * dt / 2
        p11 = self.p11 + q * dt
        # update (H = [1, 0])
        s = p00 + r
        innov = y - lv
        lim = self.gate * math.sqrt(s)
        innov = max(-lim, min(lim, innov))
        k0, k1 = p00 / s, p01 / s
        self.level = lv + k0 * innov
        self.slope = self.slope + k1 * innov
        self.p00 = (1 - k0) * p00
        self.p01 = (1 - k0) * p01
        self.p11 = p11 - k1 * p01
        self.samples += 1

    def level_at(self, t: float) -> float | None:
        if self.level is None:
            return None
        return self.level + self.slope * (t - self.at)

    @property
    def slope_sd(self) -> float:
        return math.sqrt(max(self.p11, 0.0))
