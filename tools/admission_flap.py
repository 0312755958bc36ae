"""How often signal admission releases a good link when only beacons feed it.

Feeds link quality's own estimator (``LinkEstimates.signal``: the EWMA with
``signal_half_life_s`` and the admission hysteresis, ``admit_dbm`` / ``release_dbm`` at
their defaults) with received powers drawn as the realistic medium draws them: the
link's mean power from the outdoor profile (``profile_defaults``: transmit power,
antenna gains, log-distance path loss), a fresh Nakagami-m fade per frame
(``NakagamiFading``), rounded to 1 dB as the lab's radio reports it, frames below the
profile's preamble-detection floor never heard. Prints, per sample rate (beacons alone:
1 a second; with data flowing: more), the share of samples at which the link is
admitted, its releases per minute, and the share of time all ``--hops`` such links are
admitted at once (independent links). docs/linkquality.md "In the lab".

    python3 tools/admission_flap.py --distance 90 --hops 4
"""

from __future__ import annotations

import argparse
import random
from ipaddress import IPv4Address

from manetkit.daemon.engines.linkquality.config import LinkQualityConfig
from manetkit.daemon.engines.linkquality.estimator import LinkEstimates
from manetkit.lab.medium.fading import NakagamiFading
from manetkit.lab.medium.pathloss import LogDistance
from manetkit.lab.medium.power import ratio_to_db
from manetkit.lab.medium.profiles import PhyProfile, profile_defaults

NEIGHBOUR = IPv4Address("10.42.0.2")


def mean_dbm(profile: PhyProfile, distance_m: float) -> float:
    loss = LogDistance(
        profile.path_loss_exponent, profile.reference_distance_m, profile.reference_loss_db
    ).loss_db(distance_m)
    return profile.tx_power_dbm + 2 * profile.antenna_gain_dbi - loss


def admitted_share(
    profile: PhyProfile, distance_m: float, rate_hz: float, seconds: float, rng: random.Random
) -> tuple[float, float]:
    """(share of samples at which the link is admitted, releases per minute)."""
    mean = mean_dbm(profile, distance_m)
    fading = NakagamiFading(profile.nakagami_m, rng)
    est = LinkEstimates(LinkQualityConfig.model_validate({"admission": {"signal": True}}))
    admitted = releases = heard = 0
    was: bool | None = None
    for k in range(int(seconds * rate_hz)):
        dbm = round(mean + ratio_to_db(fading.draw()))
        if dbm < profile.preamble_min_rssi_dbm:
            continue  # not heard: no sample
        now = est.signal(k / rate_hz, NEIGHBOUR, dbm).admitted_signal
        releases += bool(was and not now)
        admitted += bool(now)
        heard += 1
        was = now
    return admitted / heard, releases / seconds * 60


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--distance", type=float, default=90.0, help="link length, m")
    ap.add_argument("--hops", type=int, default=4, help="links that must be admitted at once")
    ap.add_argument("--nakagami-m", type=float, default=None, help="default: the profile's")
    ap.add_argument("--seconds", type=float, default=20_000.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    profile = profile_defaults("outdoor")
    if a.nakagami_m is not None:
        profile = profile.with_(nakagami_m=a.nakagami_m)
    print(f"mean power at {a.distance:g} m: {mean_dbm(profile, a.distance):.1f} dBm")
    rng = random.Random(a.seed)
    for rate in (1.0, 10.0):
        share, per_min = admitted_share(profile, a.distance, rate, a.seconds, rng)
        print(
            f"{rate:g} samples/s: admitted {share:.3f}, releases {per_min:.2f}/min, "
            f"all {a.hops} admitted {share**a.hops:.3f}"
        )


if __name__ == "__main__":
    main()
