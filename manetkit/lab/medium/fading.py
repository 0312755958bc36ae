"""Nakagami-m fast fading, drawn per frame and per link, held for a coherence time.

The received power of one frame is the mean power (path loss and shadowing) times a
gain g ~ Gamma(m, 1/m) (mean 1; Nakagami-m amplitude, M. Nakagami 1960), as ns-3's
``NakagamiPropagationLossModel`` draws it (propagation/model/propagation-loss-model.cc:
Gamma(m, power/m), an Erlang draw for integer m; m = 1 is Rayleigh fading, larger m a
stronger line-of-sight component; ns-3's default m0 = 1.5 below 80 m).

ns-3 draws independently for every packet. Real channels hold a fade for about a
coherence time: T_c = 9 / (16 pi f_D) ~= 0.423 / f_D with the Doppler spread
f_D = v f / c (Clarke's model; Rappaport, *Wireless Communications*, 2nd ed., eq.
5.40c), v the relative speed: here the sum of both nodes' speeds (an upper bound of
their relative speed). A static link still fades as people and doors move around it:
the speed never goes below ``min_speed_mps`` (0.5 m/s by default: T_c = 105 ms at
2.412 GHz), so consecutive frames of a burst see the same fade while polls a few
hundred milliseconds apart do not. A frame and the ACK or CTS answering it fall within
the same coherence time and see the same fade (the channel is reciprocal).
"""

from __future__ import annotations

import random

from manetkit.lab.medium.pathloss import SPEED_OF_LIGHT

CLARKE_COHERENCE = 0.423  # T_c * f_D (9 / (16 pi))


def coherence_time_s(speed_mps: float, frequency_hz: float, min_speed_mps: float) -> float:
    """Coherence time of a link whose ends move at ``speed_mps`` together."""
    v = max(speed_mps, min_speed_mps)
    if v <= 0:
        return float("inf")
    return CLARKE_COHERENCE * SPEED_OF_LIGHT / (v * frequency_hz)


class NakagamiFading:
    """Per-link power gains; ``m`` None means no fading (gain 1)."""

    __slots__ = ("m", "rng", "_held", "_scale")

    def __init__(self, m: float | None, rng: random.Random):
        if m is not None and m < 0.5:
            raise ValueError("Nakagami m must be >= 0.5")
        self.m = m
        self.rng = rng
        self._scale = 1.0 / m if m else 1.0
        self._held: dict[int, tuple[float, float]] = {}

    def draw(self) -> float:
        """A fresh gain with mean 1."""
        if self.m is None:
            return 1.0
        if self.m == 1.0:
            return self.rng.expovariate(1.0)
        return self.rng.gammavariate(self.m, self._scale)

    def gain(self, link: int, t: float, coherence_s: float) -> float:
        """The gain of ``link`` (any hashable key of the unordered pair) at ``t``: the held
        one while it is younger than ``coherence_s``, else a fresh draw."""
        held = self._held.get(link)
        if held is not None and t < held[0]:
            return held[1]
        g = self.draw()
        self._held[link] = (t + coherence_s, g)
        return g

    def forget(self) -> None:
        self._held.clear()
