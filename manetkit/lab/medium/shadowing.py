"""Log-normal shadowing per link: symmetric, spatially correlated as the nodes move.

Each unordered pair of nodes {a, b} has a shadowing term S_ab in dB, the same in both
directions (the obstacles between two nodes are the same both ways), normal with mean 0
and standard deviation sigma. As the nodes move, S_ab follows Gudmundson's exponential
autocorrelation (M. Gudmundson, "Correlation model for shadow fading in mobile radio
systems", Electronics Letters 27(23), 1991): after a displacement Delta,

    S_new = R * S_old + sqrt(1 - R^2) * N(0, sigma),    R = exp(-|Delta| / d_corr),

which is exactly how ns-3's 3GPP channel models update their shadowing
(``ThreeGppPropagationLossModel::GetShadowing``, propagation/model/
three-gpp-propagation-loss-model.cc): Delta is the change of the 2-D vector between the
two nodes since the last update, and the key is the unordered pair. A first-order
autoregression with that R gives every sample the same N(0, sigma) marginal and the
exponential correlation exp(-d/d_corr) over the distance moved (an Ornstein-Uhlenbeck
process along the path), however often it is sampled.

Gudmundson measured d_corr of about 20 m outdoors (suburban, 900 MHz); indoors, walls
decorrelate within a few metres (3GPP TR 38.901 table 7.5-6: 6 m LOS, 10 m NLOS for
indoor office; 13 m for UMi). Sigma: 3-4 dB line-of-sight outdoors, 6-8 dB through office
walls (TR 38.901 table 7.4.1-1; Rappaport table 4.2).
"""

from __future__ import annotations

import numpy as np


class CorrelatedShadowing:
    """S_ab in dB for ``n`` nodes; :meth:`update` with each new set of positions.

    ``rng`` is injected (a seeded ``numpy.random.Generator``); every update draws one
    normal per pair, moved or not, so the stream of draws never depends on who moved.
    """

    def __init__(self, n: int, sigma_db: float, decorrelation_m: float, rng: np.random.Generator):
        if sigma_db < 0:
            raise ValueError("shadowing sigma must be >= 0 dB")
        if decorrelation_m < 0:
            raise ValueError("shadowing decorrelation distance must be >= 0 m")
        self.n = n
        self.sigma_db = sigma_db
        self.decorrelation_m = decorrelation_m
        self.rng = rng
        self._iu = np.triu_indices(n, 1)
        self._values = np.zeros(len(self._iu[0]))  # per pair a < b
        self._rel: np.ndarray | None = None  # pos[b] - pos[a] at the last update
        self.db = np.zeros((n, n))  # the symmetric matrix, zero diagonal

    def update(self, positions: np.ndarray) -> np.ndarray:
        """Advance every link to ``positions`` (an (n, 2) array); returns the n x n dB matrix."""
        if self.sigma_db == 0 or self.n < 2:
            return self.db
        a, b = self._iu
        rel = positions[b] - positions[a]
        draws = self.rng.standard_normal(len(a)) * self.sigma_db
        if self._rel is None:
            self._values = draws
        else:
            moved = np.hypot(*(rel - self._rel).T)
            if self.decorrelation_m > 0:
                r = np.exp(-moved / self.decorrelation_m)
            else:
                r = np.where(moved > 0, 0.0, 1.0)
            self._values = r * self._values + np.sqrt(1.0 - r * r) * draws
        self._rel = rel
        db = np.zeros((self.n, self.n))
        db[a, b] = self._values
        db[b, a] = self._values
        self.db = db
        return db
