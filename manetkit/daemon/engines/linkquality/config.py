"""The ``link_quality:`` settings (docs/linkquality.md); every mechanism off by default.

Three mechanisms, each switchable on its own, shared by the DSR and AODV engines (SMR
and Atra through them):

- ``admission``: which links may build routes, against gray zones (Lundgren, Nordstroem
  & Tschudin, WMASH 2002: a signal threshold and N consecutive hellos);
- ``metric``: the path metric routes are chosen by, hop count or ETX (De Couto et al.,
  MobiCom 2003) estimated from the data path's transmit statuses where there are any
  (Draves, Padhye & Zill, MobiCom 2004: LQSR carries it in DSR's discovery);
- ``veto``: a transmit failure breaks a link only when enough failures follow each
  other or something corroborates it (Valera, Tan & Seah: link-layer feedback on real
  hardware reports false failures).

With everything off the engines behave exactly as RFC 4728 and RFC 3561 say
(``tests/daemon/test_engine_traces.py``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AdmissionConfig(_Strict):
    """Neighbour admission against gray zones (Lundgren et al. 2002, section 5)."""

    signal: bool = Field(
        False, description="admit a link only while its smoothed signal is above a threshold"
    )
    admit_dbm: float = Field(
        -86.0,
        ge=-120,
        le=0,
        description="a refused link is admitted once its smoothed signal reaches this "
        "(about where 11 Mbit/s unicast works: the outdoor 802.11b profile's 120 m)",
    )
    release_dbm: float = Field(
        -89.0,
        ge=-120,
        le=0,
        description="an admitted link is refused again once its smoothed signal falls "
        "below this (hysteresis: release_dbm <= admit_dbm)",
    )
    signal_half_life_s: float = Field(
        1.0,
        gt=0,
        le=60,
        description="half-life of the signal's exponential smoothing (per-frame fading "
        "averages out; a walk away still shows within a second or two)",
    )
    hellos: bool = Field(
        False, description="admit a link only when N of the last M neighbour beacons came"
    )
    hellos_heard: int = Field(3, ge=1, le=64, description="N: beacons that must have come")
    hellos_window: int = Field(4, ge=1, le=64, description="M: of the last M beacons expected")

    @model_validator(mode="after")
    def _consistent(self) -> AdmissionConfig:
        if self.release_dbm > self.admit_dbm:
            raise ValueError(
                f"release_dbm {self.release_dbm:g} is above admit_dbm {self.admit_dbm:g}: "
                "the hysteresis needs release_dbm <= admit_dbm"
            )
        if self.hellos_heard > self.hellos_window:
            raise ValueError(
                f"hellos_heard {self.hellos_heard} exceeds hellos_window {self.hellos_window}"
            )
        return self

    @property
    def on(self) -> bool:
        return self.signal or self.hellos


class MetricConfig(_Strict):
    """The path metric (De Couto et al. 2003; Draves, Padhye & Zill 2004)."""

    kind: Literal["hops", "etx"] = Field(
        "hops",
        description="hops: RFC 4728 / RFC 3561; etx: expected transmissions, carried "
        "in discovery (DSR option 53, AODV extension 247)",
    )
    memory_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="estimates fade with this half-life and costs learnt from discovery "
        "are forgotten after it (short memory for mobility: LQSR lagged when nodes moved)",
    )
    hello_window: int = Field(
        10,
        ge=2,
        le=64,
        description="beacons in a link's reverse delivery ratio (De Couto et al.: 10 s of 1 s probes)",
    )
    min_attempts: float = Field(
        4.0,
        gt=0,
        le=1000,
        description="transmit attempts (decayed) before the data path's estimate replaces "
        "the beacons'",
    )
    unknown_cost: float = Field(
        1.0, ge=1, le=100, description="the cost of a link no estimate covers (a plain hop)"
    )
    max_cost: float = Field(
        20.0,
        ge=1,
        le=650,
        description="a link's cost is capped here (a dead link's ETX is infinite)",
    )
    better_copy_margin: float = Field(
        0.1,
        ge=0,
        le=10,
        description="a duplicate route request is processed again only when its path "
        "cost is lower by this fraction (LQSR, HWMP forward better copies)",
    )
    max_better_copies: int = Field(
        2, ge=0, le=16, description="better copies of one request processed again, at most"
    )


class VetoConfig(_Strict):
    """False-failure defence (Valera, Tan & Seah)."""

    enabled: bool = Field(
        True,
        description="veto transmit failures that nothing corroborates (on by default: "
        "docs/linkquality.md, 'Defaults')",
    )
    failures: int = Field(
        3,
        ge=1,
        le=100,
        description="consecutive failures that break a link without corroboration",
    )
    silence_s: float = Field(
        1.5,
        gt=0,
        le=60,
        description="a failure corroborated by the neighbour's silence: nothing heard "
        "from it (beacon, signal sample) for this long",
    )
    trend_db_per_s: float = Field(
        2.0,
        gt=0,
        le=100,
        description="a failure corroborated by the signal's trend: falling at least this fast",
    )
    floor_dbm: float | None = Field(
        None,
        ge=-120,
        le=0,
        description="a failure corroborated by a smoothed signal below this (none: "
        "admission.release_dbm when admission.signal is on, else unused)",
    )


class LinkQualityConfig(_Strict):
    """Link-quality routing (YAML ``link_quality:``, docs/linkquality.md)."""

    admission: AdmissionConfig = Field(default_factory=AdmissionConfig)
    metric: MetricConfig = Field(default_factory=MetricConfig)
    veto: VetoConfig = Field(default_factory=VetoConfig)

    @property
    def enabled(self) -> bool:
        return self.admission.on or self.metric.kind != "hops" or self.veto.enabled
