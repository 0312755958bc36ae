"""The scenario file format: nodes, radio, propagation, area, mobility (YAML).

Every field is documented in ``docs/scenario.md``. Models refuse unknown fields
(``extra="forbid"``) so a typo is an error naming the field rather than a silent default.
``load_scenario`` applies ``--set key=value`` overrides (dotted keys, YAML values) before
validation, so an override is checked exactly like the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from manetkit import paths
from manetkit.configfile import read_yaml_mapping, validate
from manetkit.errors import UserError
from manetkit.lab.medium.airtime import (
    DSSS_RATES,
    OFDM_RATES,
    RTS_OFF,
    is_ofdm,
)
from manetkit.lab.medium.airtime import default_basic_rate as default_rate_of_phy
from manetkit.lab.medium.pathloss import friis_loss_db
from manetkit.lab.medium.profiles import (
    RATES as BAND_RATES,
)
from manetkit.lab.medium.profiles import (
    STANDARDS,
    NodeOffset,
    PhyProfile,
    default_value,
    profile_defaults,
)
from manetkit.lab.peers import PEER_STACKS, BabeldSettings, BatmandSettings

# The shipped scenarios (configs/scenarios/ of this checkout; manetkit installs editable).
SHIPPED_SCENARIOS = Path(__file__).resolve().parents[2] / "configs" / "scenarios"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NodeOffsetFields(_Strict):
    """A node's deviation from the realistic profile (asymmetric links), in dB."""

    tx_power_db: float = Field(0.0, ge=-60, le=60)
    noise_figure_db: float = Field(0.0, ge=-20, le=60)


# Fields of the realistic profiles only (manetkit/lab/medium/profiles.py has every
# default and its source); None means "the profile's default".
REALISTIC_FIELDS = (
    "standard",
    "rate_control",
    "wmm",
    "frequency_mhz",
    "tx_power_dbm",
    "antenna_gain_dbi",
    "path_loss_exponent",
    "reference_distance_m",
    "reference_loss_db",
    "shadowing_sigma_db",
    "shadowing_decorrelation_m",
    "nakagami_m",
    "coherence_time_s",
    "fading_min_speed_mps",
    "noise_figure_db",
    "preamble_min_rssi_dbm",
    "preamble_min_snr_db",
    "cca_ed_threshold_dbm",
    "capture_threshold_db",
    "usable_per",
    "mcast_rate_mbps",
    "node_offsets",
)
NS2_ONLY_FIELDS = ("interference", "priqueue")
# The realistic MAC's queue discipline (not PHY parameters: RealisticMedium takes them).
REALISTIC_MAC_FIELDS = ("queue", "codel_target_ms", "codel_interval_ms")


class Radio(_Strict):
    """The 802.11 radio every node has (one rate for the whole lab).

    ``profile`` picks the physics: ``ns2`` (two-ray ground, ns-2's MAC; the ``propagation``
    section) or a realistic profile (``outdoor``, ``indoor``: log-distance, shadowing,
    fading, SINR; every field below ``profile`` defaults to the profile's value)."""

    profile: Literal["ns2", "outdoor", "indoor"] = "ns2"
    standard: Literal["802.11b", "802.11g"] | None = None
    rate_mbps: float = 2.0
    basic_rate_mbps: float | None = None
    # realistic profiles: broadcasts and multicasts at this rate (iw's mcast-rate)
    mcast_rate_mbps: float | None = None
    queue_frames: int = Field(50, ge=1, le=100_000)
    retry_limit: int = Field(7, ge=0, le=255)
    loss: float = Field(0.0, ge=0.0, le=1.0)
    short_preamble: bool = False
    interference: bool = False
    # RTS/CTS before unicasts whose MPDU is longer than this (bytes); 2347 = off.
    rts_threshold: int = Field(RTS_OFF, ge=0, le=RTS_OFF)
    # Unicasts are also received by other nodes in range whose radio0 is promiscuous.
    overhear: bool = True
    # ns2 profile: ns-2's PriQueue (routing control, DSCP CS6/CS7, ahead of data).
    priqueue: bool = False
    # --- realistic profiles -----------------------------------------------------------
    rate_control: Literal["fixed", "minstrel"] | None = None
    wmm: bool | None = None
    # Each access category's transmit queue: drop-tail of queue_frames, or mac80211's
    # FQ-CoDel (manetkit/lab/medium/fqcodel.py) with its target and interval.
    queue: Literal["droptail", "fq_codel"] = "droptail"
    codel_target_ms: float = Field(20.0, gt=0, le=10_000)
    codel_interval_ms: float = Field(100.0, gt=0, le=100_000)
    frequency_mhz: float | None = Field(None, ge=2400, le=6000)
    tx_power_dbm: float | None = Field(None, ge=-30, le=40)
    antenna_gain_dbi: float | None = Field(None, ge=-20, le=30)
    path_loss_exponent: float | None = None
    reference_distance_m: float | None = Field(None, gt=0, le=1000)
    reference_loss_db: float | None = Field(None, ge=0, le=200)
    shadowing_sigma_db: float | None = None
    shadowing_decorrelation_m: float | None = Field(None, ge=0, le=10_000)
    nakagami_m: float | None = None
    coherence_time_s: float | None = Field(None, ge=0, le=3600)
    fading_min_speed_mps: float | None = Field(None, ge=0, le=100)
    noise_figure_db: float | None = Field(None, ge=0, le=30)
    preamble_min_rssi_dbm: float | None = Field(None, ge=-130, le=0)
    preamble_min_snr_db: float | None = Field(None, ge=-30, le=40)
    cca_ed_threshold_dbm: float | None = Field(None, ge=-130, le=0)
    capture_threshold_db: float | None = Field(None, ge=0, le=60)
    usable_per: float | None = None
    node_offsets: dict[str, NodeOffsetFields] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _profile_defaults(cls, data: Any) -> Any:
        """A realistic profile's band follows the rate given (DSSS: 802.11b, OFDM:
        802.11g; 802.11b when none is), and its rates default to the band's."""
        if not isinstance(data, dict) or data.get("profile", "ns2") == "ns2":
            return data
        data = dict(data)
        rate = data.get("rate_mbps")
        if data.get("standard") is None:
            known = isinstance(rate, int | float) and rate in DSSS_RATES + OFDM_RATES
            data["standard"] = "802.11g" if known and is_ofdm(rate) else "802.11b"
        std = data["standard"]
        if std in STANDARDS and rate is None:
            data["rate_mbps"] = default_value("rate_mbps", data["profile"], std)
        return data

    @field_validator("rate_mbps", "basic_rate_mbps", "mcast_rate_mbps")
    @classmethod
    def _known_rate(cls, v: float | None, info: ValidationInfo) -> float | None:
        if v is None:
            return v
        std = info.data.get("standard")
        if info.data.get("profile", "ns2") != "ns2" and std in STANDARDS:
            if v not in BAND_RATES[std]:
                raise ValueError(
                    f"{v:g} Mbit/s is not an {std} rate; use one of "
                    f"{', '.join(f'{r:g}' for r in BAND_RATES[std])}"
                )
        elif v not in DSSS_RATES + OFDM_RATES:
            raise ValueError(
                f"{v} Mbps is not an 802.11 rate; use one of "
                f"{', '.join(f'{r:g}' for r in DSSS_RATES + OFDM_RATES)}"
            )
        return v

    @field_validator("path_loss_exponent")
    @classmethod
    def _exponent(cls, v: float | None) -> float | None:
        if v is not None and not 1.0 <= v <= 8.0:
            raise ValueError(
                f"{v:g}: a path-loss exponent must be 1..8 (2 is free space; below 1 the "
                "power would fall slower than a line source's, above 8 no medium measured)"
            )
        return v

    @field_validator("shadowing_sigma_db")
    @classmethod
    def _sigma(cls, v: float | None) -> float | None:
        if v is not None and not 0.0 <= v <= 20.0:
            raise ValueError(
                f"{v:g} dB: a standard deviation is >= 0, and shadowing beyond 20 dB "
                "is not a propagation model (measurements: 3-12 dB)"
            )
        return v

    @field_validator("nakagami_m")
    @classmethod
    def _nakagami(cls, v: float | None) -> float | None:
        if v is not None and v != 0 and not 0.5 <= v <= 100:
            raise ValueError(
                f"{v:g}: Nakagami's m is >= 0.5 (0.5: one-sided Gaussian, 1: Rayleigh, "
                "larger: a line of sight); 0 turns fast fading off"
            )
        return v

    @field_validator("usable_per")
    @classmethod
    def _usable_per(cls, v: float | None) -> float | None:
        if v is not None and not 0.0 < v < 1.0:
            raise ValueError(f"{v:g}: a packet error rate threshold is between 0 and 1")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Radio:
        if self.profile == "ns2":
            # an explicit default (a dumped scenario writes every field, null ones too)
            # sets nothing; only a value the ns2 model would ignore is refused
            fields = type(self).model_fields
            given = [
                f
                for f in REALISTIC_FIELDS + REALISTIC_MAC_FIELDS
                if f in self.model_fields_set
                and getattr(self, f) != fields[f].get_default(call_default_factory=True)
            ]
            if given:
                raise ValueError(
                    f"{', '.join(given)}: realistic-profile field(s); profile ns2 is "
                    "two-ray ground (the propagation section): set profile: outdoor or indoor"
                )
        else:
            given = [f for f in NS2_ONLY_FIELDS if getattr(self, f)]
            if given:
                raise ValueError(
                    f"{', '.join(given)}: ns2-profile field(s); the {self.profile} profile "
                    "always models interference (SINR) and queues by access category (wmm)"
                )
        if self.basic_rate_mbps is not None and is_ofdm(self.basic_rate_mbps) != is_ofdm(
            self.rate_mbps
        ):
            raise ValueError(
                "basic_rate_mbps must be of the same PHY as rate_mbps "
                "(DSSS 1/2/5.5/11 or OFDM 6..54)"
            )
        return self

    @property
    def basic(self) -> float:
        if self.basic_rate_mbps:
            return self.basic_rate_mbps
        if self.profile != "ns2" and self.standard is not None:
            return float(default_value("basic_rate_mbps", self.profile, self.standard))
        return default_rate_of_phy(self.rate_mbps)

    def phy_profile(self, node_index: dict[str, int]) -> PhyProfile:
        """The realistic profile with this radio's overrides (``node_index``: node name
        to 0-based index, for ``node_offsets``)."""
        assert self.profile != "ns2" and self.standard is not None
        p = profile_defaults(self.profile, self.standard)
        changes: dict[str, Any] = {
            k: getattr(self, k)
            for k in REALISTIC_FIELDS
            if k not in ("standard", "node_offsets") and getattr(self, k) is not None
        }
        if "reference_loss_db" not in changes and (
            "frequency_mhz" in changes or "reference_distance_m" in changes
        ):
            changes["reference_loss_db"] = friis_loss_db(
                changes.get("frequency_mhz", p.frequency_mhz) * 1e6,
                changes.get("reference_distance_m", p.reference_distance_m),
            )
        if changes.get("nakagami_m") == 0:
            changes["nakagami_m"] = None
        changes["rate_mbps"] = self.rate_mbps
        changes["basic_rate_mbps"] = self.basic
        changes["node_offsets"] = {
            node_index[name]: NodeOffset(o.tx_power_db, o.noise_figure_db)
            for name, o in self.node_offsets.items()
        }
        return p.with_(**changes)


class Propagation(_Strict):
    """Two-ray ground with ns-2's defaults (250 m reception, 550 m carrier sense)."""

    model: Literal["two-ray-ground"] = "two-ray-ground"
    pt_w: float = Field(0.28183815, gt=0)
    freq_hz: float = Field(914e6, gt=0)
    gt: float = Field(1.0, gt=0)
    gr: float = Field(1.0, gt=0)
    ht_m: float = Field(1.5, gt=0)
    hr_m: float = Field(1.5, gt=0)
    system_loss: float = Field(1.0, gt=0)
    rx_threshold_w: float = Field(3.652e-10, gt=0)
    cs_threshold_w: float = Field(1.559e-11, gt=0)

    @model_validator(mode="after")
    def _cs_below_rx(self) -> Propagation:
        if self.cs_threshold_w > self.rx_threshold_w:
            raise ValueError("cs_threshold_w must not exceed rx_threshold_w")
        return self


class Area(_Strict):
    x: float = Field(gt=0)
    y: float = Field(gt=0)


class Layout(_Strict):
    kind: Literal["line", "grid"] = "line"
    spacing: float = Field(200.0, gt=0)
    columns: int = Field(3, ge=1)


class StaticMobility(_Strict):
    model: Literal["static"] = "static"
    positions: dict[str, tuple[float, float]] | None = None
    layout: Layout | None = None

    @model_validator(mode="after")
    def _one_source(self) -> StaticMobility:
        if self.positions is not None and self.layout is not None:
            raise ValueError("give either positions or layout, not both")
        return self


class RandomWaypointMobility(_Strict):
    model: Literal["random-waypoint"]
    speed: float = Field(ge=0, description="mean speed (holland) or maximum (uniform), m/s")
    speed_dist: Literal["holland", "uniform"] = "holland"
    pause_s: float = Field(0.0, ge=0)


class SetdestMobility(_Strict):
    model: Literal["setdest"]
    file: str
    base: Literal["auto", 0, 1] = "auto"


Mobility = Annotated[
    StaticMobility | RandomWaypointMobility | SetdestMobility, Field(discriminator="model")
]


class LinkLoss(_Strict):
    a: str
    b: str
    loss: float = Field(ge=0.0, le=1.0)


class Scenario(_Strict):
    """A lab: how many nodes, which stack and proxy, the radio and the world."""

    name: str | None = None
    nodes: int = Field(ge=1, le=1000)
    stack: Literal["none", "aodv", "dsr", "smr", "babeld", "batmand"] = "none"
    proxy: Literal["none", "plain", "fixed-rto", "elfn", "bus"] = "none"
    seed: int = 1
    duration_s: float | None = Field(None, gt=0)
    radio: Radio = Field(default_factory=Radio)
    propagation: Propagation = Field(default_factory=Propagation)
    area: Area | None = None
    mobility: Mobility = Field(default_factory=lambda: StaticMobility(layout=Layout()))
    links: list[LinkLoss] = Field(default_factory=list)
    atra: dict[str, Any] = Field(
        default_factory=dict,
        description="the daemons' atra: section (docs/atra.md), e.g. --set atra.rfp=true",
    )
    # The daemons' protocol sections, checked when lab up writes each node's daemon
    # config (manetkit.daemon.config: field and reason), e.g. --set smr.mode=backup2.
    aodv: dict[str, Any] = Field(default_factory=dict, description="the daemons' aodv: section")
    dsr: dict[str, Any] = Field(default_factory=dict, description="the daemons' dsr: section")
    smr: dict[str, Any] = Field(default_factory=dict, description="the daemons' smr: section")
    # The peer daemons' settings (manetkit.lab.peers), used with stack: babeld|batmand.
    babeld: BabeldSettings = Field(default_factory=BabeldSettings)
    batmand: BatmandSettings = Field(default_factory=BatmandSettings)

    # Directory of the scenario file, for relative paths (setdest files).
    base_dir: Path = Field(default=Path("."), exclude=True)

    @field_validator("proxy")
    @classmethod
    def _proxy_on_stack(cls, v: str, info: ValidationInfo) -> str:
        stack = info.data.get("stack")
        if stack in PEER_STACKS and v in ("elfn", "bus"):
            raise ValueError(
                f"{v} needs the route events of a manetkit daemon (stack aodv, dsr or smr); "
                f"{stack} sends none: use proxy plain or fixed-rto with stack {stack}"
            )
        return v

    @field_validator("name")
    @classmethod
    def _lab_name(cls, v: str | None) -> str | None:
        return paths.check_lab_name(v) if v is not None else v

    @property
    def node_names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.nodes + 1)]

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        names = set(self.node_names)
        mob = self.mobility
        if isinstance(mob, StaticMobility) and mob.positions is not None:
            unknown = sorted(set(mob.positions) - names)
            if unknown:
                raise ValueError(
                    f"mobility.positions: unknown node(s) {', '.join(unknown)} (nodes are n1..n{self.nodes})"
                )
            missing = [n for n in self.node_names if n not in mob.positions]
            if missing:
                raise ValueError(f"mobility.positions: no position for {', '.join(missing[:10])}")
        if isinstance(mob, RandomWaypointMobility) and self.area is None:
            raise ValueError("mobility.model random-waypoint needs area: {x: .., y: ..}")
        for i, link in enumerate(self.links):
            for end in (link.a, link.b):
                if end not in names:
                    raise ValueError(
                        f"links[{i}]: unknown node {end!r} (nodes are n1..n{self.nodes})"
                    )
            if link.a == link.b:
                raise ValueError(f"links[{i}]: a and b are the same node")
        unknown = sorted(set(self.radio.node_offsets) - names)
        if unknown:
            raise ValueError(
                f"radio.node_offsets: unknown node(s) {', '.join(unknown)} (nodes are n1..n{self.nodes})"
            )
        default_propagation = (
            type(self).model_fields["propagation"].get_default(call_default_factory=True)
        )
        if (
            self.radio.profile != "ns2"
            and "propagation" in self.model_fields_set
            and self.propagation != default_propagation
        ):
            raise ValueError(
                f"propagation: two-ray ground belongs to the ns2 profile; the {self.radio.profile} "
                "profile takes its propagation from radio (path_loss_exponent, shadowing_sigma_db, "
                "nakagami_m, ...)"
            )
        return self

    def static_positions(self) -> list[tuple[float, float]]:
        """Positions of a static scenario (layout or explicit), in node order."""
        mob = self.mobility
        assert isinstance(mob, StaticMobility)
        if mob.positions is not None:
            return [tuple(mob.positions[n]) for n in self.node_names]  # type: ignore[misc]
        layout = mob.layout or Layout()
        if layout.kind == "line":
            return [(i * layout.spacing, 0.0) for i in range(self.nodes)]
        cols = layout.columns
        return [
            ((i % cols) * layout.spacing, (i // cols) * layout.spacing) for i in range(self.nodes)
        ]

    def setdest_path(self) -> Path:
        mob = self.mobility
        assert isinstance(mob, SetdestMobility)
        p = Path(mob.file)
        return p if p.is_absolute() else self.base_dir / p


# --- loading ---------------------------------------------------------------------------


def apply_overrides(data: dict, overrides: dict[str, str]) -> dict:
    """Set dotted keys (``mobility.speed``) to YAML-parsed values (``10``, ``true``)."""
    for key, raw in overrides.items():
        parts = key.split(".")
        if not key or any(not p for p in parts):
            raise UserError(
                f"--set {key}={raw}: the key must be a dotted field path like radio.rate_mbps"
            )
        try:
            value = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError as exc:
            raise UserError(f"--set {key}={raw}: not a YAML value ({exc})") from None
        node = data
        for i, p in enumerate(parts[:-1]):
            nxt = node.get(p)
            if nxt is None:
                nxt = node[p] = {}
            if not isinstance(nxt, dict):
                raise UserError(f"--set {key}: {'.'.join(parts[: i + 1])} is not a section")
            node = nxt
        node[parts[-1]] = value
    return data


# Discriminator values pydantic puts into error locations (see configfile.field_path).
_MOBILITY_TAGS = ("static", "random-waypoint", "setdest")


def scenario_from_dict(
    data: dict, source: str = "<scenario>", base_dir: Path | None = None
) -> Scenario:
    """Validate a scenario given as a dict; errors as :class:`UserError`."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: a scenario must be a YAML mapping, got {type(data).__name__}")
    sc = validate(
        Scenario, {**data, "base_dir": base_dir or Path(".")}, source, "scenario", _MOBILITY_TAGS
    )
    if isinstance(sc.mobility, SetdestMobility):
        # Parse now so a malformed movement file is refused at load, with its line numbers.
        from manetkit.lab.medium.setdest import load_setdest

        load_setdest(sc.setdest_path(), sc.nodes, sc.mobility.base)
    return sc


def load_scenario(path: str | Path, overrides: dict[str, str] | None = None) -> Scenario:
    """Read, override and validate a scenario file."""
    path = Path(path)
    data = read_yaml_mapping(path, "scenario")
    if overrides:
        data = apply_overrides(data, overrides)
    return scenario_from_dict(data, str(path), path.resolve().parent)


def parse_set_args(items: list[str] | None) -> dict[str, str]:
    """``["a.b=1", ...]`` (the CLI's repeated ``--set``) to a dict, refusing items without '='."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise UserError(f"--set {item}: expected key=value")
        out[key.strip()] = value.strip()
    return out


def lab_name(scenario: Scenario, path: str | Path) -> str:
    """Default lab name: the scenario's ``name`` or the file's stem made name-safe."""
    if scenario.name:
        return scenario.name
    stem = "".join(c if c.isalnum() else "_" for c in Path(path).stem.lower())[:12]
    return paths.check_lab_name(stem or "lab")


__all__ = [
    "Scenario",
    "Radio",
    "NodeOffsetFields",
    "Propagation",
    "Area",
    "Layout",
    "StaticMobility",
    "RandomWaypointMobility",
    "SetdestMobility",
    "LinkLoss",
    "load_scenario",
    "apply_overrides",
    "parse_set_args",
    "scenario_from_dict",
    "lab_name",
]
