"""The ``atra:`` settings (Anantharaman et al. section IV-A); off by default.

Every mechanism is switchable on its own (``rfp``, ``pre``, ``srp``), as the paper
evaluates RFP+PRE, SRP and all three separately (section IV-B).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class AtraConfig(BaseModel):
    """Atra settings (YAML ``atra:``); defaults are the paper's values (section IV-A)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rfp: bool = Field(False, description="route failure prediction from signal strength")
    pre: bool = Field(False, description="proactive route errors to every recent source")
    srp: bool = Field(False, description="symmetric route pinning of pure TCP ACKs")
    history: int = Field(
        3, ge=2, le=64, description="N: received powers needed before a prediction (paper: 3)"
    )
    lookahead_s: float = Field(
        2.0, gt=0, le=60, description="t: predict this long before the link breaks (paper: 2 s)"
    )
    pre_window_s: float = Field(
        1.0, gt=0, le=60, description="T: sources that used a link this recently get PRE errors"
    )
    path_loss_exponent: float = Field(
        4.0,
        ge=1.5,
        le=8,
        description="P = K/d^n: 4 is two-ray beyond the crossover (paper); ~3 for real Wi-Fi",
    )
    rx_threshold_dbm: float = Field(
        -64.37,
        ge=-120,
        le=0,
        description="receive threshold: power at the range edge r (ns-2 RXThresh, the lab's)",
    )
    range_m: float = Field(
        250.0, gt=0, le=100_000, description="r: the reception range (K = P_th * r^n)"
    )
    window_s: float = Field(
        4.0,
        gt=0,
        le=60,
        description="slope fit over the powers heard this recently (at least N of them)",
    )
    min_t_stat: float = Field(
        6.0,
        ge=0,
        le=100,
        description="the fitted speed must be this many standard errors above 0 (noise guard)",
    )
    confirm: int = Field(
        4, ge=1, le=20, description="consecutive samples that must show the recession first"
    )
    max_speed_mps: float = Field(
        80.0, gt=0, description="relative speeds above this are fading, not motion"
    )
    predictor: Literal["fit", "trend"] = Field(
        "fit",
        description="fit: the paper's distance fit over window_s (median of three, t "
        "test, confirm); trend: a Kalman level and slope of the signal, the trigger "
        "combining the smoothed trend with measured loss (survives fading; atra/trend.py)",
    )
    trend_accel: float = Field(
        2.0,
        gt=0,
        le=100,
        description="trend: how fast the slope may change (Kalman process noise, dB^2/s^3)",
    )
    trend_noise_db: float = Field(
        3.0, gt=0, le=30, description="trend: one sample's noise around the signal (dB)"
    )
    trend_z: float = Field(
        1.0, ge=0, le=10, description="trend: the falling slope's standard deviations from 0"
    )
    trend_min_slope_db_per_s: float = Field(
        0.5, ge=0, le=100, description="trend: slower falls are not motion worth predicting"
    )
    loss_trigger: float = Field(
        0.3,
        gt=0,
        le=1,
        description="trend: measured loss (data path, else beacons) that predicts a "
        "break by itself near the edge",
    )
    loss_margin_db: float = Field(
        4.0,
        ge=0,
        le=40,
        description="trend: how far above rx_threshold_dbm loss alone may predict",
    )
    trend_confirm: int = Field(
        1, ge=1, le=20, description="trend: consecutive samples the trigger must hold on"
    )
    srp_timeout_s: float = Field(
        10.0, gt=0, le=3600, description="a pinned flow with no data this long is forgotten"
    )

    @model_validator(mode="after")
    def _window(self) -> AtraConfig:
        if self.window_s < self.lookahead_s / 10:
            raise ValueError("window_s: too short for the look-ahead (>= lookahead_s/10)")
        return self

    @property
    def enabled(self) -> bool:
        return self.rfp or self.pre or self.srp
