"""Delivery-versus-distance curves of the realistic profiles, for validation.

:func:`delivery_curve` runs the real MAC (:class:`~.realistic.RealisticMedium`) on a fake
clock: one sender at the origin, one receiver at each distance of the grid, ``frames``
non-unicast frames at ``rate_mbps`` (no ACK, no retry: the probability that one
transmission is received), and returns delivered / sent per distance. It is what the
ns-3 oracle (``manetkit bench medium --oracle ns3``) is compared with, and the same
conditions are set on both sides:

- ``size`` is the PSDU in bytes: the MPDU the PHY carries, 802.11 MAC header (24), the
  LLC/SNAP header (8), the payload and the FCS (4) all counted. A lab frame of
  ``size - 22`` Ethernet bytes has that PSDU (``airtime.mpdu_bytes``);
- no shadowing (ns-3's log-distance model has none), path loss and noise of the profile;
- ``fading``: Nakagami-m of the profile drawn independently for every frame (ns-3's
  model draws per packet; here the coherence time is set to 0), or none;
- the frames go at ``rate_mbps`` (the run sets the profile's basic rate to it: the MAC
  sends non-unicast frames at the basic rate), with the profile's preamble detection
  thresholds; receivers never transmit, so nothing interferes.

:func:`expected_delivery` is the same probability computed directly (preamble detection
and the error model, averaged over the fading distribution): the MAC's curve must agree
with it within the sampling error, which the unit tests check.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from manetkit.lab.medium.errormodels import SHARED_TABLE, frame_layout, frame_success
from manetkit.lab.medium.mac import Delivery
from manetkit.lab.medium.mobility import Static, World
from manetkit.lab.medium.pathloss import LogDistance
from manetkit.lab.medium.power import noise_floor_dbm
from manetkit.lab.medium.profiles import PhyProfile
from manetkit.lab.medium.protocol import BROADCAST_MAC, node_mac
from manetkit.lab.medium.realistic import RealisticMedium

WIFI_OVERHEAD = 22  # PSDU bytes - Ethernet frame bytes (36 on the air - 14 Ethernet)
MIN_PSDU = 36
MAC_HEADER_AND_FCS = 28  # 802.11 data header 24 + FCS 4


def psdu_bytes(frame_body_bytes: int) -> int:
    """The PSDU of an 802.11 frame whose body (LLC/SNAP + payload) is this long: the ns-3
    oracle's ``frame_bytes`` (manetkit.bench.oracle) is the body."""
    return frame_body_bytes + MAC_HEADER_AND_FCS


def curve_profile(profile: PhyProfile, rate_mbps: float, fading: bool) -> PhyProfile:
    """The profile under the validation's conditions (module docstring)."""
    if rate_mbps not in profile.rates:
        raise ValueError(f"{rate_mbps:g} Mbit/s is not an {profile.standard} rate")
    return profile.with_(
        rate_mbps=rate_mbps,
        basic_rate_mbps=rate_mbps,
        rate_control="fixed",
        shadowing_sigma_db=0.0,
        nakagami_m=profile.nakagami_m if fading else None,
        coherence_time_s=0.0,
        node_offsets={},
    )


def delivery_curve(
    profile: PhyProfile,
    rate_mbps: float,
    size: int,
    distances: Sequence[float],
    frames: int = 1000,
    fading: bool = True,
    seed: int = 1,
) -> list[float]:
    """Delivered / sent at each distance (metres) for ``frames`` frames of PSDU ``size``
    bytes at ``rate_mbps`` from one sender (module docstring for the conditions)."""
    if size < MIN_PSDU:
        raise ValueError(f"a PSDU of {size} bytes is shorter than its headers ({MIN_PSDU})")
    if frames < 1:
        raise ValueError("frames must be >= 1")
    prof = curve_profile(profile, rate_mbps, fading)
    # Receivers on a line away from the sender: they only listen, so their mutual
    # distances do not matter.
    positions = [(0.0, 0.0)] + [(float(d), 0.0) for d in distances]
    n = len(positions)
    medium = RealisticMedium(World(Static(positions), n), prof, seed=seed, queue_frames=frames)
    frame = BROADCAST_MAC + node_mac(1) + b"\x88\xb5" + bytes(size - WIFI_OVERHEAD - 14)
    got = [0] * n
    t = 0.0
    for _ in range(frames):
        medium.transmit(t, 1, frame)
    while (nxt := medium.get_timer()) is not None:
        t = nxt
        medium.handle_timer(t)
        while (ev := medium.next_event()) is not None:
            if type(ev) is Delivery:
                got[ev.node - 1] += 1
    return [g / frames for g in got[1:]]


def expected_delivery(
    profile: PhyProfile,
    rate_mbps: float,
    size: int,
    distance: float,
    fading: bool = True,
    points: int = 400,
) -> float:
    """The probability that one frame gets through at ``distance``, computed directly:
    preamble detection (power and SNR thresholds) times the frame's success at its SNR,
    averaged over the Nakagami gain (Gamma(m, 1/m), midpoint quantiles)."""
    prof = curve_profile(profile, rate_mbps, fading)
    loss = LogDistance(
        prof.path_loss_exponent, prof.reference_distance_m, prof.reference_loss_db
    ).loss_db(distance)
    mean_dbm = prof.tx_power_dbm + 2 * prof.antenna_gain_dbi - loss
    noise = noise_floor_dbm(prof.bandwidth_hz, prof.noise_figure_db)
    layout = frame_layout(size, rate_mbps)
    table = SHARED_TABLE
    if prof.nakagami_m:
        rng = np.random.default_rng(0)
        gains_db = (
            10
            * np.log10(np.sort(rng.gamma(prof.nakagami_m, 1.0 / prof.nakagami_m, points * 50)))[
                25::50
            ]
        )
    else:
        gains_db = np.zeros(1)
    total = 0.0
    for g in gains_db.tolist():
        rx = mean_dbm + g
        snr = rx - noise
        if rx < prof.preamble_min_rssi_dbm or snr < prof.preamble_min_snr_db:
            continue
        total += frame_success(table, layout, snr)
    return total / len(gains_db)


def distance_at(curve: Sequence[float], distances: Sequence[float], level: float = 0.5) -> float:
    """Where a (decreasing) delivery curve crosses ``level``, linearly interpolated;
    the last distance if it never falls that low, the first if it starts below."""
    pairs = list(zip(distances, curve, strict=True))
    if not pairs:
        return math.nan
    if pairs[0][1] < level:
        return pairs[0][0]
    for (d0, p0), (d1, p1) in zip(pairs, pairs[1:], strict=False):
        if p0 >= level > p1:
            return d0 + (d1 - d0) * (p0 - level) / (p0 - p1)
    return pairs[-1][0]
