"""Power units and the receiver's thermal noise floor.

Powers inside the realistic medium are watts (sums of interferers are sums of watts);
scenario fields and reports are dBm and dB.

Thermal noise: N = k * T * B * F (Johnson-Nyquist), k = 1.3803e-23 J/K as ns-3's
``InterferenceHelper::CalculateSnr`` writes it, T = 290 K, B the channel's noise
bandwidth (22 MHz for DSSS/CCK, 20 MHz for OFDM, as ns-3's DSSS and ERP-OFDM PHYs) and
F the receiver's noise figure: -93.55 dBm at 22 MHz and NF 7 dB, -93.97 dBm at 20 MHz.
"""

from __future__ import annotations

import math

BOLTZMANN = 1.3803e-23  # ns-3's value (wifi/model/interference-helper.cc)
NOISE_TEMPERATURE_K = 290.0


def dbm_to_w(dbm: float) -> float:
    return 10.0 ** (dbm / 10.0) / 1000.0


def w_to_dbm(watts: float) -> float:
    """Power in dBm; -inf for zero power."""
    return 10.0 * math.log10(watts * 1000.0) if watts > 0 else -math.inf


def db_to_ratio(db: float) -> float:
    return 10.0 ** (db / 10.0)


def ratio_to_db(ratio: float) -> float:
    return 10.0 * math.log10(ratio) if ratio > 0 else -math.inf


def noise_floor_w(bandwidth_hz: float, noise_figure_db: float) -> float:
    """Thermal noise plus the receiver's noise figure, in watts."""
    return BOLTZMANN * NOISE_TEMPERATURE_K * bandwidth_hz * db_to_ratio(noise_figure_db)


def noise_floor_dbm(bandwidth_hz: float, noise_figure_db: float) -> float:
    return w_to_dbm(noise_floor_w(bandwidth_hz, noise_figure_db))
