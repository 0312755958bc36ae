"""The realistic profiles' link budget: mean received powers over time, who can hear
whom, and which links count as usable in the ground truth.

Mean received power from node i at node j (dBm):

    P_ij = P_tx + dP_i + G_tx + G_rx - L(d_ij) + S_ij

with L the log-distance path loss (``pathloss.py``), S_ij the symmetric correlated
shadowing (``shadowing.py``) and dP_i node i's transmit-power offset. Fast fading is not
in it: the MAC multiplies each frame's power by its Nakagami gain (``fading.py``).
Noise at node j: the thermal floor of the channel's bandwidth with the profile's noise
figure plus node j's offset (``power.py``).

Time: shadowing advances on a fixed grid of ``step_s`` (50 ms, the MAC's position
refresh), at the positions of the grid instants, so the same scenario and seed give the
same shadowing whenever (and however often) the medium looks: a live lab, its ground
truth and an offline :func:`manetkit.lab.build.scenario_events` agree. Each node's speed
(for the fading's coherence time) is its displacement over the last grid step.

Usable links (the ground-truth graph): an edge joins i and j when, in both directions,
a 1500-byte IP packet (MPDU 1536 bytes) at the data rate (``rate_mbps``; the lowest
rate of the band under ``rate_control: minstrel``, where the controller falls back to
it) would be lost with probability at most ``usable_per`` on the mean SINR against the
noise floor: path loss and shadowing, not fast fading and not interference. ``lab link
A B down`` removes the edge (and stops reception on the link, not its energy); ``up``
adds it and raises the link's mean power to 10 dB above the usable level.

Audible: a frame is only evaluated at receivers whose mean power is within 10 dB (the
fading margin, 0 without fading) of being detectable or of adding 1 dB to the noise
(6 dB below the floor); weaker signals can neither be received nor matter as
interference, and leaving them out keeps a large lab's cost per frame bounded.
"""

from __future__ import annotations

import math

import numpy as np

from manetkit.lab.medium.airtime import mpdu_bytes
from manetkit.lab.medium.errormodels import (
    SHARED_TABLE,
    BitErrorTable,
    frame_layout,
    sinr_for_success,
)
from manetkit.lab.medium.mobility import World
from manetkit.lab.medium.pathloss import LogDistance
from manetkit.lab.medium.power import noise_floor_dbm
from manetkit.lab.medium.profiles import PhyProfile
from manetkit.lab.medium.shadowing import CorrelatedShadowing

USABLE_PACKET_BYTES = 1500  # IP packet: Ethernet frame 1514, MPDU 1536
FADE_MARGIN_DB = 10.0
NOISE_MARGIN_DB = 6.0
FORCED_UP_MARGIN_DB = 10.0
MAX_CATCH_UP_STEPS = 10_000


def usable_snr_db(profile: PhyProfile, table: BitErrorTable | None = None) -> float:
    """Mean SNR (dB) at which the ground truth calls a link usable (see module doc)."""
    rate = profile.rate_mbps if profile.rate_control == "fixed" else min(profile.rates)
    layout = frame_layout(mpdu_bytes(USABLE_PACKET_BYTES + 14), rate)
    return sinr_for_success(table or SHARED_TABLE, layout, 1.0 - profile.usable_per)


def usable_distance_m(profile: PhyProfile) -> float:
    """Where the usable-link rule's edge lies without shadowing (mean path loss only)."""
    budget = (
        profile.tx_power_dbm
        + 2 * profile.antenna_gain_dbi
        - noise_floor_dbm(profile.bandwidth_hz, profile.noise_figure_db)
        - usable_snr_db(profile)
    )
    pl = LogDistance(
        profile.path_loss_exponent, profile.reference_distance_m, profile.reference_loss_db
    )
    return pl.distance_for_loss(budget)


class LinkBudget:
    """The channel at time ``t``; node indexes are 0-based. ``rx`` / ``dbm`` /
    :meth:`edges` have the meaning of the two-ray :class:`~.topology.Snapshot`'s (usable
    links, mean powers), so the ground truth and the control socket read either."""

    __slots__ = (
        "t",
        "positions",
        "dbm",
        "mean_w",
        "noise_w",
        "audible",
        "rx",
        "rx_sets",
        "speed",
        "blocked",
    )

    def __init__(self, t: float, positions: list[tuple[float, float]]):
        self.t = t
        self.positions = positions
        self.dbm: list[list[float]] = []
        self.mean_w: list[list[float]] = []
        self.noise_w: list[float] = []
        self.audible: list[list[int]] = []
        self.rx: list[list[int]] = []
        self.rx_sets: list[frozenset[int]] = []
        self.speed: list[float] = []
        self.blocked: frozenset[int] = frozenset()  # i * n + j of forced-down links

    def edges(self) -> list[tuple[int, int]]:
        """Undirected usable edges (i < j)."""
        return [(i, j) for i, row in enumerate(self.rx) for j in row if i < j]


class Channel:
    """Mean powers for a :class:`World` under a :class:`PhyProfile`; seeded."""

    def __init__(self, profile: PhyProfile, world: World, seed: int = 1, step_s: float = 0.05):
        if step_s <= 0:
            raise ValueError("step_s must be > 0")
        self.profile = profile
        self.world = world
        self.n = n = world.n
        self.step_s = step_s
        self.pathloss = LogDistance(
            profile.path_loss_exponent, profile.reference_distance_m, profile.reference_loss_db
        )
        self.shadowing = CorrelatedShadowing(
            n,
            profile.shadowing_sigma_db,
            profile.shadowing_decorrelation_m,
            np.random.default_rng([seed, 0x5AD0]),
        )
        offsets = profile.node_offsets
        self.tx_dbm = np.array(
            [
                profile.tx_power_dbm + 2 * profile.antenna_gain_dbi
                + (offsets[i].tx_power_db if i in offsets else 0.0)
                for i in range(n)
            ]
        )  # fmt: skip
        floor = noise_floor_dbm(profile.bandwidth_hz, profile.noise_figure_db)
        self.noise_dbm = np.array(
            [floor + (offsets[i].noise_figure_db if i in offsets else 0.0) for i in range(n)]
        )
        self.table = SHARED_TABLE
        self.usable_snr_db = usable_snr_db(profile, self.table)
        margin = FADE_MARGIN_DB if profile.nakagami_m else 0.0
        self.audible_floor_dbm = (
            min(profile.preamble_min_rssi_dbm, float(self.noise_dbm.min()) - NOISE_MARGIN_DB)
            - margin
        )
        self._k = -1  # last grid step the shadowing advanced to
        self._pos_k: np.ndarray | None = None
        self._speed = np.zeros(n)

    def _advance(self, t: float) -> None:
        last = math.floor(t / self.step_s + 1e-9)
        if last <= self._k:
            return
        first = self._k + 1
        if self._k >= 0 and not self.world.mobile:
            first = last  # nothing moved: one step keeps the grid, the draws are spent
        first = max(first, last - MAX_CATCH_UP_STEPS)
        for k in range(first, last + 1):
            pos = np.asarray(self.world.positions(k * self.step_s), dtype=float).reshape(self.n, 2)
            if self._pos_k is not None:
                steps = k - self._k if k == first else 1
                self._speed = np.hypot(*(pos - self._pos_k).T) / (steps * self.step_s)
            self.shadowing.update(pos)
            self._pos_k = pos
            self._k = k

    def snapshot(self, t: float) -> LinkBudget:
        """The link budget at ``t`` (positions at ``t``, shadowing at the last grid step)."""
        self._advance(t)
        n = self.n
        positions = [(float(x), float(y)) for x, y in self.world.positions(t)]
        pos = np.asarray(positions, dtype=float).reshape(n, 2)
        d = np.sqrt(((pos[:, None, :] - pos[None, :, :]) ** 2).sum(axis=2))
        dbm = self.tx_dbm[:, None] - self.pathloss.loss_db_array(d) + self.shadowing.db
        snr_ok = (dbm - self.noise_dbm[None, :]) >= self.usable_snr_db
        usable = snr_ok & snr_ok.T
        blocked = []
        for (a, b), state in self.world.links.items():
            if state == "down":
                usable[a, b] = usable[b, a] = False
                blocked += [a * n + b, b * n + a]
            elif state == "up":
                usable[a, b] = usable[b, a] = True
                for i, j in ((a, b), (b, a)):
                    dbm[i, j] = max(
                        dbm[i, j], self.noise_dbm[j] + self.usable_snr_db + FORCED_UP_MARGIN_DB
                    )
        np.fill_diagonal(usable, False)
        np.fill_diagonal(dbm, -np.inf)
        audible = dbm >= self.audible_floor_dbm
        lb = LinkBudget(t, positions)
        lb.dbm = dbm.tolist()
        lb.mean_w = (10.0 ** (dbm / 10.0) / 1000.0).tolist()
        lb.noise_w = (10.0 ** (self.noise_dbm / 10.0) / 1000.0).tolist()
        lb.audible = [np.flatnonzero(row).tolist() for row in audible]
        lb.rx = [np.flatnonzero(row).tolist() for row in usable]
        lb.rx_sets = [frozenset(r) for r in lb.rx]
        lb.speed = self._speed.tolist()
        lb.blocked = frozenset(blocked)
        return lb

    def link_rule(self) -> str:
        """The usable-link rule in words (written into the ground-truth log)."""
        p = self.profile
        rate = p.rate_mbps if p.rate_control == "fixed" else min(p.rates)
        return (
            f"{p.name} {p.standard}: PER of a {USABLE_PACKET_BYTES}-byte packet at {rate:g} "
            f"Mbit/s <= {p.usable_per:g} on the mean SNR (path loss + shadowing, no fading) in "
            f"both directions: SNR >= {self.usable_snr_db:.2f} dB"
        )
