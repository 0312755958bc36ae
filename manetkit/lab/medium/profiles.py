"""The realistic radio profiles: every physical parameter, its default and its source.

``ns2`` is not here: it is the two-ray MAC of ``mac.py`` with the scenario's
``propagation`` section, unchanged. The realistic profiles are ``outdoor`` (open field)
and ``indoor`` (office), each for ``802.11b`` (DSSS/CCK 1, 2, 5.5, 11 Mbit/s, 22 MHz) or
``802.11g`` (ERP-OFDM 6..54 Mbit/s, 20 MHz). :data:`PARAMETERS` is the table
docs/medium.md and docs/scenario.md print: per field, the outdoor and indoor defaults
(a pair where 802.11b and g differ) and where the number comes from. The same values
drive the ns-3 oracle (ns-3.37's attribute names are given where one exists).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from manetkit.lab.medium.errormodels import DSSS_BANDWIDTH_HZ, OFDM_BANDWIDTH_HZ
from manetkit.lab.medium.pathloss import friis_loss_db

ProfileName = Literal["outdoor", "indoor"]
Standard = Literal["802.11b", "802.11g"]
PROFILES: tuple[str, ...] = ("outdoor", "indoor")
STANDARDS: tuple[str, ...] = ("802.11b", "802.11g")
RATES: dict[str, tuple[float, ...]] = {
    "802.11b": (1.0, 2.0, 5.5, 11.0),
    "802.11g": (6.0, 9.0, 12.0, 18.0, 24.0, 36.0, 48.0, 54.0),
}


@dataclass(frozen=True, slots=True)
class Parameter:
    outdoor: object
    indoor: object
    source: str


def _b_g(b: object, g: object) -> dict[str, object]:
    return {"802.11b": b, "802.11g": g}


# field -> defaults and source. A dict value means "per standard".
PARAMETERS: dict[str, Parameter] = {
    "frequency_mhz": Parameter(2412.0, 2412.0, "channel 1 (2.4 GHz band)"),
    "tx_power_dbm": Parameter(
        16.0206, 16.0206, "40 mW: ns-3 YansWifiPhy TxPowerStart/TxPowerEnd; laptops 15-18 dBm"
    ),
    "antenna_gain_dbi": Parameter(0.0, 0.0, "isotropic, at the transmitter and the receiver"),
    "path_loss_exponent": Parameter(
        3.0,
        3.5,
        "log-distance (ns-3 LogDistancePropagationLossModel Exponent, default 3); "
        "Rappaport table 4.2: 2.7-3.5 outdoors, 3-4 in offices",
    ),
    "reference_distance_m": Parameter(1.0, 1.0, "d0 (LogDistance ReferenceDistance)"),
    "reference_loss_db": Parameter(
        None, None, "null = Friis at the frequency and d0: 40.05 dB at 2412 MHz and 1 m"
    ),
    "shadowing_sigma_db": Parameter(
        4.0, 7.0, "log-normal per link, symmetric; 3GPP TR 38.901 table 7.4.1-1, Rappaport 4.2"
    ),
    "shadowing_decorrelation_m": Parameter(
        20.0, 5.0, "Gudmundson 1991 (about 20 m outdoors); TR 38.901 table 7.5-6 (indoor 6-10 m)"
    ),
    "nakagami_m": Parameter(
        1.5, 1.0, "ns-3 NakagamiPropagationLossModel m0 = 1.5; m = 1 is Rayleigh (no line of sight)"
    ),
    "coherence_time_s": Parameter(
        None, None, "null = from the nodes' speed, T_c = 0.423 c / (v f) (Clarke; Rappaport 5.40c)"
    ),
    "fading_min_speed_mps": Parameter(
        0.5, 0.5, "moving scatterers around static nodes (people, doors): T_c <= 105 ms"
    ),
    "noise_figure_db": Parameter(7.0, 7.0, "ns-3 WifiPhy RxNoiseFigure default"),
    "preamble_min_rssi_dbm": Parameter(
        _b_g(-97.0, -94.0),
        _b_g(-97.0, -94.0),
        "ns-3 ThresholdPreambleDetectionModel MinimumRssi (default -82 hides the 802.11b "
        "gray zone: DSSS cards decode 1 Mbit/s near -95..-97 dBm)",
    ),
    "preamble_min_snr_db": Parameter(
        _b_g(-5.0, 2.0),
        _b_g(-5.0, 2.0),
        "ThresholdPreambleDetectionModel Threshold (default 4 dB would hide DSSS's processing gain)",
    ),
    "cca_ed_threshold_dbm": Parameter(
        -62.0, -62.0, "energy-detect carrier sense: IEEE 802.11-2020 17.3.10.6, ns-3 CcaEdThreshold"
    ),
    "capture_threshold_db": Parameter(
        None,
        None,
        "null = no frame capture (ns-3.37 default); a number = message-in-message capture",
    ),
    "rate_mbps": Parameter(
        _b_g(11.0, 54.0), _b_g(11.0, 54.0), "unicast data rate (rate_control: fixed)"
    ),
    "basic_rate_mbps": Parameter(
        _b_g(1.0, 6.0),
        _b_g(1.0, 6.0),
        "broadcasts, multicasts, ACK, RTS/CTS: the lowest basic rate",
    ),
    "mcast_rate_mbps": Parameter(
        None,
        None,
        "null = the basic rate; a rate of the standard = broadcasts and multicasts at it, "
        "ACK/RTS/CTS still at the basic rate (`iw dev IF ibss join ... mcast-rate R`, "
        "wpa_supplicant's `mcast_rate`: NL80211_ATTR_MCAST_RATE; IBSS meshes such as "
        "Freifunk's run 6 Mbit/s)",
    ),
    "rate_control": Parameter(
        "fixed",
        "fixed",
        "fixed: rate_mbps; minstrel: per transmitter and destination (mac80211 rc80211_minstrel)",
    ),
    "wmm": Parameter(True, True, "802.11e access categories (mac80211 with a QoS IBSS)"),
    "usable_per": Parameter(
        0.1,
        0.1,
        "ground truth: a link is usable when a 1500-byte frame's PER at the data rate, "
        "on the mean path loss and shadowing, is at most this",
    ),
}


@dataclass(frozen=True, slots=True)
class NodeOffset:
    """A node's deviation from the profile (asymmetric links): transmit power and noise
    figure, in dB."""

    tx_power_db: float = 0.0
    noise_figure_db: float = 0.0


@dataclass(frozen=True, slots=True)
class PhyProfile:
    """Every physical parameter of one realistic profile (see :data:`PARAMETERS`)."""

    name: str
    standard: str
    frequency_mhz: float
    tx_power_dbm: float
    antenna_gain_dbi: float
    path_loss_exponent: float
    reference_distance_m: float
    reference_loss_db: float
    shadowing_sigma_db: float
    shadowing_decorrelation_m: float
    nakagami_m: float | None
    coherence_time_s: float | None
    fading_min_speed_mps: float
    noise_figure_db: float
    preamble_min_rssi_dbm: float
    preamble_min_snr_db: float
    cca_ed_threshold_dbm: float
    capture_threshold_db: float | None
    rate_mbps: float
    basic_rate_mbps: float
    mcast_rate_mbps: float | None
    rate_control: str
    wmm: bool
    usable_per: float
    node_offsets: dict[int, NodeOffset] = field(default_factory=dict)  # 0-based node index

    @property
    def frequency_hz(self) -> float:
        return self.frequency_mhz * 1e6

    @property
    def bandwidth_hz(self) -> float:
        return DSSS_BANDWIDTH_HZ if self.standard == "802.11b" else OFDM_BANDWIDTH_HZ

    @property
    def broadcast_rate_mbps(self) -> float:
        """The rate of broadcasts and multicasts: the multicast rate, else the basic rate."""
        return self.mcast_rate_mbps or self.basic_rate_mbps

    @property
    def rates(self) -> tuple[float, ...]:
        return RATES[self.standard]

    def with_(self, **changes: object) -> PhyProfile:
        return replace(self, **changes)


def default_value(name: str, profile: str, standard: str) -> object:
    p = PARAMETERS[name]
    v = p.outdoor if profile == "outdoor" else p.indoor
    return v[standard] if isinstance(v, dict) else v


def profile_defaults(profile: str, standard: str = "802.11b") -> PhyProfile:
    """The profile with every default (reference loss: Friis at the frequency and d0)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r} (outdoor, indoor; ns2 is the two-ray MAC)")
    if standard not in STANDARDS:
        raise ValueError(f"unknown standard {standard!r} (802.11b, 802.11g)")
    values = {k: default_value(k, profile, standard) for k in PARAMETERS}
    if values["reference_loss_db"] is None:
        values["reference_loss_db"] = friis_loss_db(
            values["frequency_mhz"] * 1e6, values["reference_distance_m"]
        )
    return PhyProfile(name=profile, standard=standard, **values)
