"""How often signal admission releases a good link when only beacons feed it.

Feeds link quality's own smoothing (``Ewma`` with ``signal_half_life_s``) and the
admission hysteresis (``admit_dbm`` / ``release_dbm``, the defaults) with received
powers drawn as the realistic medium draws them: the link's mean power from the outdoor
profile's log-distance path loss, a Nakagami-m fade per frame, rounded to 1 dB as the
lab's radio reports it, frames below the -97 dBm detection floor never heard. Prints, per
sample rate (beacons alone: 1 a second; with data flowing: more), the share of time the
link is admitted, its releases per minute, and the share of time all ``--hops`` such
links are admitted at once (independent links). docs/linkquality.md "In the lab".

    python3 tools/admission_flap.py --distance 90 --hops 4
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from manetkit.daemon.engines.linkquality.config import AdmissionConfig
from manetkit.daemon.engines.linkquality.smoothing import Ewma
from manetkit.lab.medium.pathloss import LogDistance

TX_POWER_DBM = 16.0206  # the outdoor profile's (docs/medium.md)
EXPONENT = 3.0
FREQUENCY_HZ = 2.412e9
DETECTION_FLOOR_DBM = -97.0


def admitted_share(
    mean_dbm: float, rate_hz: float, seconds: float, m: float, rng: np.random.Generator
) -> tuple[float, float]:
    """(share of samples at which the link is admitted, releases per minute)."""
    cfg = AdmissionConfig()
    ewma = Ewma(cfg.signal_half_life_s)
    admitted: bool | None = None
    states: list[bool] = []
    releases = 0
    for k in range(int(seconds * rate_hz)):
        x = round(mean_dbm + 10 * math.log10(rng.gamma(m, 1 / m)))
        if x < DETECTION_FLOOR_DBM:
            continue  # not heard: no sample
        v = ewma.update(k / rate_hz, x)
        if admitted is None:
            admitted = v >= cfg.admit_dbm
        elif admitted and v < cfg.release_dbm:
            admitted, releases = False, releases + 1
        elif not admitted and v >= cfg.admit_dbm:
            admitted = True
        states.append(admitted)
    return float(np.mean(states)), releases / seconds * 60


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--distance", type=float, default=90.0, help="link length, m")
    ap.add_argument("--hops", type=int, default=4, help="links that must be admitted at once")
    ap.add_argument("--nakagami-m", type=float, default=1.5)
    ap.add_argument("--seconds", type=float, default=20_000.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    loss = LogDistance.friis_reference(FREQUENCY_HZ, EXPONENT).loss_db(a.distance)
    mean = TX_POWER_DBM - loss
    print(f"mean power at {a.distance:g} m: {mean:.1f} dBm")
    rng = np.random.default_rng(a.seed)
    for rate in (1.0, 10.0):
        share, per_min = admitted_share(mean, rate, a.seconds, a.nakagami_m, rng)
        print(
            f"{rate:g} samples/s: admitted {share:.3f}, releases {per_min:.2f}/min, "
            f"all {a.hops} admitted {share**a.hops:.3f}"
        )


if __name__ == "__main__":
    main()
