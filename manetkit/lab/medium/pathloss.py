"""Log-distance path loss with a free-space (Friis) reference loss.

    L(d) = L0 + 10 * n * log10(d / d0)        for d > d0
    L(d) = L0                                 for d <= d0
    L0   = 20 * log10(4 * pi * f * d0 / c)    (Friis at the channel's frequency, unless given)

as ns-3's ``LogDistancePropagationLossModel`` (propagation/model/propagation-loss-model.cc:
exponent 3 and reference loss 46.6777 dB at 1 m (5.15 GHz) by default; below the
reference distance it applies no loss beyond L0). With f = 2412 MHz and d0 = 1 m,
L0 = 40.05 dB. The exponent is 2 in free space, about 2.7-3.5 outdoors near the ground
and 3-4 through office walls (Rappaport, *Wireless Communications*, 2nd ed., table 4.2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SPEED_OF_LIGHT = 299_792_458.0


def friis_loss_db(frequency_hz: float, distance_m: float) -> float:
    """Free-space loss between isotropic antennas: 20 log10(4 pi f d / c)."""
    return 20.0 * math.log10(4.0 * math.pi * frequency_hz * distance_m / SPEED_OF_LIGHT)


@dataclass(frozen=True, slots=True)
class LogDistance:
    """``exponent`` n, ``reference_distance_m`` d0 and ``reference_loss_db`` L0."""

    exponent: float
    reference_distance_m: float
    reference_loss_db: float

    @classmethod
    def friis_reference(
        cls, frequency_hz: float, exponent: float, reference_distance_m: float = 1.0
    ) -> LogDistance:
        return cls(
            exponent, reference_distance_m, friis_loss_db(frequency_hz, reference_distance_m)
        )

    def loss_db(self, d: float) -> float:
        if d <= self.reference_distance_m:
            return self.reference_loss_db
        return self.reference_loss_db + 10.0 * self.exponent * math.log10(
            d / self.reference_distance_m
        )

    def loss_db_array(self, d: np.ndarray) -> np.ndarray:
        ratio = np.maximum(d, self.reference_distance_m) / self.reference_distance_m
        return self.reference_loss_db + 10.0 * self.exponent * np.log10(ratio)

    def distance_for_loss(self, loss_db: float) -> float:
        """Inverse of :meth:`loss_db` (the reference distance for losses up to L0)."""
        if loss_db <= self.reference_loss_db:
            return self.reference_distance_m
        return self.reference_distance_m * 10.0 ** (
            (loss_db - self.reference_loss_db) / (10.0 * self.exponent)
        )
