"""The realistic profiles' parameters as the ns-3 oracle uses them, and the validation grid.

Field names are the scenario's ``radio:`` fields (docs/medium.md, "Validation against
ns-3"), so the oracle's JSON echoes parameters the lab's medium can be checked against.
Shadowing is not here: ns-3's LogDistancePropagationLossModel has none, so the
validation runs without it on both sides.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

SPEED_OF_LIGHT = 299_792_458.0  # m/s
BOLTZMANN = 1.3803e-23  # J/K, the constant ns-3's InterferenceHelper::CalculateSnr uses

# 802.11 MAC overhead of one non-QoS data frame around its frame body (IEEE 802.11-2020
# 9.3.2.1): 24-byte header (three addresses, IBSS) + 4-byte FCS. The frame body is the
# MSDU: an 8-byte LLC/SNAP header (RFC 1042) and the payload.
MAC_HEADER_BYTES = 24
FCS_BYTES = 4
LLC_SNAP_BYTES = 8

STANDARDS = ("802.11b", "802.11g")
RATES_MBPS = {"802.11b": (1.0, 2.0, 5.5, 11.0), "802.11g": (6.0, 12.0, 24.0, 36.0, 54.0)}
# Noise bandwidth of each PHY as ns-3 uses it (DSSS 22 MHz, ERP-OFDM 20 MHz).
BANDWIDTH_MHZ = {"802.11b": 22.0, "802.11g": 20.0}
# ThresholdPreambleDetectionModel settings per standard: (MinimumRssi dBm, Threshold dB).
# ns-3's defaults (-82 dBm, 4 dB) would cut 802.11b off 15 dB above where DSSS cards
# still decode 1 Mbit/s (about -95..-97 dBm), hiding the gray zone.
PREAMBLE_DETECTION = {"802.11b": (-97.0, -5.0), "802.11g": (-94.0, 2.0)}

FRAME_BYTES = (60, 1000)  # frame body (MSDU) lengths of the grid
STEP_M = 10.0  # receivers every 10 m from 10 m on


def friis_loss_db(frequency_mhz: float, distance_m: float = 1.0) -> float:
    """Free-space loss 20*log10(4*pi*f*d/c) (Friis), the log-distance reference loss."""
    return 20 * math.log10(4 * math.pi * frequency_mhz * 1e6 * distance_m / SPEED_OF_LIGHT)


@dataclass(frozen=True, slots=True)
class Profile:
    """One realistic profile's propagation and receiver parameters (both standards)."""

    name: str
    path_loss_exponent: float
    nakagami_m: float
    frequency_mhz: float = 2412.0
    tx_power_dbm: float = 16.0206  # ns-3 YansWifiPhy TxPowerStart/End default (40 mW)
    antenna_gain_dbi: float = 0.0
    reference_distance_m: float = 1.0
    noise_figure_db: float = 7.0  # ns-3 RxNoiseFigure default
    cca_ed_threshold_dbm: float = -62.0  # 802.11-2020 17.3.10.6; ns-3 CcaEdThreshold

    @property
    def reference_loss_db(self) -> float:
        return friis_loss_db(self.frequency_mhz, self.reference_distance_m)

    def mean_rx_dbm(self, distance_m: float) -> float:
        """Received power without fading (log-distance path loss)."""
        loss = self.reference_loss_db + 10 * self.path_loss_exponent * math.log10(
            distance_m / self.reference_distance_m
        )
        return self.tx_power_dbm + 2 * self.antenna_gain_dbi - loss

    def distance_at_dbm(self, rx_dbm: float) -> float:
        """The distance at which the mean received power falls to ``rx_dbm``."""
        margin = self.tx_power_dbm + 2 * self.antenna_gain_dbi - self.reference_loss_db - rx_dbm
        return self.reference_distance_m * 10 ** (margin / (10 * self.path_loss_exponent))

    def as_params(self, standard: str, fading: bool) -> dict[str, float | None]:
        """The parameters one curve is computed with (echoed in the JSON)."""
        rssi, snr = PREAMBLE_DETECTION[standard]
        d = asdict(self)
        d.pop("name")
        d["reference_loss_db"] = round(self.reference_loss_db, 4)
        d["nakagami_m"] = self.nakagami_m if fading else None
        d["noise_dbm"] = round(noise_dbm(standard, self.noise_figure_db), 2)
        d["preamble_min_rssi_dbm"] = rssi
        d["preamble_min_snr_db"] = snr
        return d


PROFILES = {
    "outdoor": Profile("outdoor", path_loss_exponent=3.0, nakagami_m=1.5),
    "indoor": Profile("indoor", path_loss_exponent=3.5, nakagami_m=1.0),
}
# Rates of each profile's grid: outdoor every rate, indoor the lowest and highest.
GRID_RATES = {
    "outdoor": RATES_MBPS,
    "indoor": {"802.11b": (1.0, 11.0), "802.11g": (6.0, 54.0)},
}


def noise_dbm(standard: str, noise_figure_db: float) -> float:
    """Thermal noise k*T*B at 290 K times the noise figure, as ns-3 computes it."""
    watts = BOLTZMANN * 290 * BANDWIDTH_MHZ[standard] * 1e6 * 10 ** (noise_figure_db / 10)
    return 10 * math.log10(watts) + 30


def psdu_bytes(frame_bytes: int) -> int:
    """PSDU length of a frame body: MAC header + body + FCS."""
    return MAC_HEADER_BYTES + frame_bytes + FCS_BYTES


@dataclass(frozen=True, slots=True)
class CurveSpec:
    """One curve of the validation grid."""

    profile: str
    standard: str
    rate_mbps: float
    frame_bytes: int
    fading: bool

    @property
    def key(self) -> str:
        fading = "nakagami" if self.fading else "none"
        return f"{self.profile}/{self.standard}/{self.rate_mbps:g}/{self.frame_bytes}/{fading}"

    def max_distance_m(self) -> float:
        """Where the receivers stop: the mean power is below the preamble-detection gate
        (15 dB below it with fading, beyond any Nakagami up-fade ns-3 draws in 1000
        frames), rounded up to the grid, plus one step."""
        profile = PROFILES[self.profile]
        gate, _ = PREAMBLE_DETECTION[self.standard]
        edge = profile.distance_at_dbm(gate - (15.0 if self.fading else 0.0))
        return (math.ceil(edge / STEP_M) + 1) * STEP_M


def validation_grid(profiles: tuple[str, ...] = ("outdoor", "indoor")) -> list[CurveSpec]:
    """Every curve of the grid: each profile's rates, both frame sizes, with and without
    Nakagami fading."""
    grid = []
    for name in profiles:
        if name not in PROFILES:
            raise ValueError(f"profile {name!r}: not one of {', '.join(PROFILES)}")
        for standard in STANDARDS:
            for rate in GRID_RATES[name][standard]:
                for frame in FRAME_BYTES:
                    for fading in (False, True):
                        grid.append(CurveSpec(name, standard, rate, frame, fading))
    return grid


# The chain table (Holland & Vaidya Fig. 1 on the outdoor 802.11b profile).
CHAIN_PROFILE = "outdoor"
CHAIN_RATE_MBPS = 11.0
CHAIN_HOPS = tuple(range(1, 8))
# 1448-byte TCP segments: 1500-byte IP packets, frame body 1508, PSDU 1536 bytes. ns-3
# delivers every such frame at 11 Mbit/s up to 110 m without fading and none at 150 m and
# beyond (outdoor profile), so at 100 m only adjacent nodes decode data: 2 hops (200 m)
# get 0 % (0.8 % with Nakagami m = 1.5), while preambles still carry to 270 m.
CHAIN_HOP_M = 100.0
