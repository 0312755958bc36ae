"""Two-ray ground against the formula computed here independently (ns-2 defaults)."""

from __future__ import annotations

import math

import pytest

from manetkit.lab.medium.propagation import TwoRayGround, watts_to_dbm

PT, F, H, RX, CS = 0.28183815, 914e6, 1.5, 3.652e-10, 1.559e-11
LAM = 3e8 / F  # ns-2 defines SPEED_OF_LIGHT as 3e8


def expected_w(d: float) -> float:
    crossover = 4 * math.pi * H * H / LAM
    if d < crossover:
        return PT * LAM**2 / ((4 * math.pi * d) ** 2)
    return PT * H**2 * H**2 / d**4


@pytest.mark.parametrize("d", [50.0, 150.0, 249.0, 251.0])
def test_power_matches_formula(d):
    m = TwoRayGround()
    assert m.rx_power_w(d) == pytest.approx(expected_w(d), rel=1e-12)
    assert m.rx_power_dbm(d) == pytest.approx(10 * math.log10(expected_w(d) * 1000), abs=1e-9)


def test_50m_is_friis_150m_is_two_ray():
    m = TwoRayGround()
    assert 50 < m.crossover_m < 150
    assert m.crossover_m == pytest.approx(86.14, abs=0.01)


def test_threshold_ranges_are_250_and_550():
    m = TwoRayGround()
    assert m.range_m() == pytest.approx(250.0, abs=0.05)
    assert m.cs_range_m() == pytest.approx(550.0, abs=0.05)
    assert m.rx_power_w(249.0) >= RX > m.rx_power_w(251.0)
    assert m.rx_power_w(549.0) >= CS > m.rx_power_w(551.0)


def test_power_falls_with_distance():
    m = TwoRayGround()
    powers = [m.rx_power_w(d) for d in range(10, 1000, 10)]
    assert all(a > b for a, b in zip(powers, powers[1:], strict=False))


def test_friis_range_when_threshold_is_high():
    # A threshold reached below the crossover distance is solved with Friis.
    m = TwoRayGround(rx_threshold_w=expected_w(40.0))
    assert m.range_m() == pytest.approx(40.0, rel=1e-9)


def test_dbm():
    assert watts_to_dbm(0.001) == pytest.approx(0.0)
    assert watts_to_dbm(0.0) == -math.inf
