"""Who hears whom at one instant: received powers, reception and carrier-sense neighbours.

Computed with numpy for all pairs at once (a 1000-node lab is a 1000x1000 matrix), from
positions and the two-ray model; forced link states (``lab link A B down|up``) then
remove or add reception edges. Carrier sense stays physical: an obstacle command only
stops frames being received, the radios still hear the channel busy (a conservative
choice; it keeps the airtime sharing of a chain unchanged by a scripted link break).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from manetkit.lab.medium.propagation import TwoRayGround


class Snapshot:
    """Connectivity at time ``t``. Node indexes are 0-based (n1 = 0)."""

    __slots__ = ("t", "power_w", "dbm", "rx", "rx_sets", "cs", "positions")

    def __init__(
        self,
        t: float,
        positions: Sequence[tuple[float, float]],
        prop: TwoRayGround,
        links: Mapping[tuple[int, int], str] | None = None,
    ):
        self.t = t
        self.positions = [(float(x), float(y)) for x, y in positions]
        n = len(self.positions)
        pos = np.asarray(self.positions, dtype=float).reshape(n, 2)
        d = np.sqrt(((pos[:, None, :] - pos[None, :, :]) ** 2).sum(axis=2))
        d = np.maximum(d, 0.01)
        lam = prop.wavelength_m
        friis = (
            prop.pt_w
            * prop.gt
            * prop.gr
            * lam
            * lam
            / ((4 * np.pi) ** 2 * d * d * prop.system_loss)
        )
        two_ray = (
            prop.pt_w * prop.gt * prop.gr * (prop.ht_m * prop.hr_m) ** 2 / (d**4 * prop.system_loss)
        )
        p = np.where(d <= prop.crossover_m, friis, two_ray)
        np.fill_diagonal(p, 0.0)
        rx = p >= prop.rx_threshold_w
        for (a, b), state in (links or {}).items():
            if state == "down":
                rx[a, b] = rx[b, a] = False
            elif state == "up":
                rx[a, b] = rx[b, a] = True
                # A forced-up link reports at least the reception threshold.
                p[a, b] = p[b, a] = max(p[a, b], prop.rx_threshold_w)
        np.fill_diagonal(rx, False)
        cs = p >= prop.cs_threshold_w
        np.fill_diagonal(cs, False)
        self.power_w: list[list[float]] = p.tolist()
        with np.errstate(divide="ignore"):
            self.dbm: list[list[float]] = (10.0 * np.log10(p * 1000.0)).tolist()
        self.rx: list[list[int]] = [np.flatnonzero(row).tolist() for row in rx]
        self.rx_sets: list[frozenset[int]] = [frozenset(r) for r in self.rx]
        self.cs: list[list[int]] = [np.flatnonzero(row).tolist() for row in cs]

    def edges(self) -> list[tuple[int, int]]:
        """Undirected reception edges (i < j)."""
        return [(i, j) for i, row in enumerate(self.rx) for j in row if i < j]
