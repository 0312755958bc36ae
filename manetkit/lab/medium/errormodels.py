"""Per-rate error models: the probability that a chunk of bits survives a given SINR.

A frame's success probability is the product over its chunks (intervals of constant
interference) and over its PHY header and payload of (1 - BER)^bits (or of the symbol
success for CCK), as ns-3's ``InterferenceHelper`` computes it
(wifi/model/interference-helper.cc: ``CalculatePhyHeaderSectionPsr`` and
``CalculatePayloadPer``, with nbits = bit rate x chunk duration). This module gives the
natural log of the success per bit, so chunks add up: log P = sum(bits x lpb(SINR)).

802.11b (DSSS/CCK), as ns-3's ``DsssErrorRateModel`` (its GSL variant, which Debian's
libns3 is built with), Eb/N0 = SINR x 22 MHz / bit rate:

- 1 Mbit/s DBPSK: BER = 1/2 exp(-Eb/N0) (Proakis, *Digital Communications*, eq. 5.2-69);
- 2 Mbit/s DQPSK: BER = (sqrt 2 + 1) / sqrt(8 pi sqrt 2) x^-1/2 exp(-(2 - sqrt 2) x),
  x = Eb/N0 (Ferrari & Corazza, Electronics Letters 40(20), 2004, eq. 8);
- 5.5 and 11 Mbit/s CCK: the symbol error probability of M-ary biorthogonal signalling,
  1 - integral_{-b}^{inf} (2 Phi(x + b) - 1)^(M/2 - 1) phi(x) dx, b = sqrt(2 E), M = 16
  (Pursley & Royster, IEEE Trans. Commun. 57(2), 2009, eqs. 17-18); 5.5 Mbit/s: one
  16-ary symbol per 4 bits with E = 8 SINR; 11 Mbit/s: two per 8 bits with E = 4 SINR.

802.11g (ERP-OFDM), as ns-3's ``NistErrorRateModel`` (Pei & Henderson, "Validation of
OFDM error rate model in ns-3", 2010): the uncoded BER of the constellation at the
SINR, then the first-event error bound of the convolutional code from its distance
spectrum (Frenger et al.; Haccoun & Begin), pe = min(1, ...), chunk success
(1 - pe)^bits.

Rates are named by their Mbit/s; every one of them has a :class:`Mode`. The PHY header
goes at the header mode: DSSS 1 Mbit/s DBPSK (48 bits, long preamble) or 2 Mbit/s DQPSK
(short preamble), OFDM 6 Mbit/s (the 24-bit SIGNAL field); the preamble itself is not
error-checked (its detection is the preamble-detection threshold's job).

Per-bit values are tabulated on a 0.01 dB grid of SINR, -30..60 dB, a mode's whole grid
at once (the CCK integrals vectorised): a frame's success costs two list look-ups and
an exp.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from manetkit.lab.medium.airtime import DSSS_RATES, OFDM_RATES, ppdu_us

DSSS_BANDWIDTH_HZ = 22e6
OFDM_BANDWIDTH_HZ = 20e6
GRID_PER_DB = 100  # cache resolution: 0.01 dB
MIN_SINR_DB = -30.0  # below: every bit is lost (success 0)
MAX_SINR_DB = 60.0  # above: nothing is lost


@dataclass(frozen=True, slots=True)
class Mode:
    """One 802.11b/g rate: modulation and (OFDM) the code rate's Frenger/Haccoun table."""

    rate_mbps: float
    modulation: str  # dbpsk, dqpsk, cck16 (5.5), cck256 (11), bpsk, qpsk, qam16, qam64
    code: int = 0  # OFDM: 1 = rate 1/2, 2 = 2/3, 3 = 3/4 (ns-3's "b value")

    @property
    def ofdm(self) -> bool:
        return self.code > 0


MODES: dict[float, Mode] = {
    1.0: Mode(1.0, "dbpsk"),
    2.0: Mode(2.0, "dqpsk"),
    5.5: Mode(5.5, "cck16"),
    11.0: Mode(11.0, "cck256"),
    6.0: Mode(6.0, "bpsk", 1),
    9.0: Mode(9.0, "bpsk", 3),
    12.0: Mode(12.0, "qpsk", 1),
    18.0: Mode(18.0, "qpsk", 3),
    24.0: Mode(24.0, "qam16", 1),
    36.0: Mode(36.0, "qam16", 3),
    48.0: Mode(48.0, "qam64", 2),
    54.0: Mode(54.0, "qam64", 3),
}


def mode(rate_mbps: float) -> Mode:
    try:
        return MODES[float(rate_mbps)]
    except KeyError:
        raise ValueError(f"{rate_mbps} Mbit/s is not an 802.11b/g rate") from None


# --- uncoded and coded bit/symbol error rates --------------------------------------------

_DQPSK_K = (math.sqrt(2.0) + 1.0) / math.sqrt(8.0 * math.pi * math.sqrt(2.0))


def _q(x: np.ndarray) -> np.ndarray:
    """Gaussian tail probability Q(x) = 1 - Phi(x) of every element (math.erfc: numpy
    has none, and this runs only when the cache misses)."""
    erfc, r = math.erfc, 1.0 / math.sqrt(2.0)
    return 0.5 * np.array([erfc(v * r) for v in x.tolist()])


def cck_symbol_error(e: float, points: int = 801) -> float:
    """Symbol error probability of 16-ary biorthogonal signalling (Pursley & Royster eq.
    18) at symbol energy over noise ``e``, written as
    Phi(-b) + integral_{-b}^{inf} (1 - (1 - 2 Q(x + b))^7) phi(x) dx, b = sqrt(2 e), so
    that small error probabilities keep their precision (Simpson's rule on |x| <= 9,
    801 points: within 1e-9 relative of a 4001-point integral)."""
    b = math.sqrt(2.0 * e)
    lo = max(-b, -9.0)
    if lo >= 9.0:
        return 0.0
    x = np.linspace(lo, 9.0, points)
    two_q = 2.0 * _q(x + b)
    with np.errstate(divide="ignore"):
        miss = -np.expm1(7.0 * np.log1p(-np.minimum(two_q, 1.0)))
    f = miss * np.exp(-x * x / 2.0) / math.sqrt(2.0 * math.pi)
    h = (9.0 - lo) / (points - 1)
    integral = h / 3.0 * (f[0] + f[-1] + 4.0 * f[1:-1:2].sum() + 2.0 * f[2:-1:2].sum())
    tail = 0.5 * math.erfc(b / math.sqrt(2.0))
    return min(1.0, tail + float(integral))


def _coded_pe(p: float, code: int) -> float:
    """First-event error probability bound of the 802.11a/g convolutional code at raw
    BER ``p`` (ns-3 ``NistErrorRateModel::CalculatePe``: distance spectra for rates 1/2,
    2/3 and 3/4)."""
    d = math.sqrt(4.0 * p * (1.0 - p))
    if code == 1:
        coeffs = (36, 211, 1404, 11633, 77433, 502690, 3322763, 21292910, 134365911)
        return 0.5 * sum(c * d ** (10 + 2 * k) for k, c in enumerate(coeffs))
    if code == 2:
        coeffs = (3, 70, 285, 1276, 6160, 27128, 117019, 498860, 2103891, 8784123)
        return sum(c * d ** (6 + k) for k, c in enumerate(coeffs)) / 4.0
    if code == 3:
        coeffs = (42, 201, 1492, 10469, 62935, 379644, 2253373, 13073811, 75152755, 428005675)
        return sum(c * d ** (5 + k) for k, c in enumerate(coeffs)) / 6.0
    raise ValueError(f"unknown code rate index {code}")


def _uncoded_ber(modulation: str, snr: float) -> float:
    if modulation == "bpsk":
        return 0.5 * math.erfc(math.sqrt(snr))
    if modulation == "qpsk":
        return 0.5 * math.erfc(math.sqrt(snr / 2.0))
    if modulation == "qam16":
        return 0.375 * math.erfc(math.sqrt(snr / 10.0))
    if modulation == "qam64":
        return 7.0 / 24.0 * math.erfc(math.sqrt(snr / 42.0))
    raise ValueError(modulation)


def log_success_per_bit(m: Mode, sinr: float) -> float:
    """ln of the probability that one bit of ``m`` survives at linear SINR ``sinr``
    (for CCK: the symbol success spread over the symbol's bits)."""
    if m.ofdm:
        ber = _uncoded_ber(m.modulation, sinr)
        if ber == 0.0:
            return 0.0
        pe = min(_coded_pe(ber, m.code), 1.0)
        return math.log1p(-pe) if pe < 1.0 else -math.inf
    if m.modulation == "dbpsk":
        ber = 0.5 * math.exp(-sinr * DSSS_BANDWIDTH_HZ / 1e6)
        return math.log1p(-ber)
    if m.modulation == "dqpsk":
        x = sinr * DSSS_BANDWIDTH_HZ / 2e6
        ber = min(0.5, _DQPSK_K / math.sqrt(x) * math.exp(-(2.0 - math.sqrt(2.0)) * x))
        return math.log1p(-ber)
    if m.modulation == "cck16":
        sep = cck_symbol_error(8.0 * sinr)
        return math.log1p(-sep) / 4.0 if sep < 1.0 else -math.inf
    if m.modulation == "cck256":
        sep = cck_symbol_error(4.0 * sinr)
        return math.log1p(-sep) / 4.0 if sep < 1.0 else -math.inf
    raise ValueError(m.modulation)


def _erfc(x: np.ndarray) -> np.ndarray:
    """Complementary error function of every element, fractional error < 1.2e-7
    (the Chebyshev fit of Numerical Recipes in C, 2nd ed., section 6.2, ``erfcc``):
    numpy has no erfc, and a table of CCK symbol errors needs millions of values."""
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = (
        -z * z
        - 1.26551223
        + t
        * (
            1.00002368
            + t
            * (
                0.37409196
                + t
                * (
                    0.09678418
                    + t
                    * (
                        -0.18628806
                        + t
                        * (
                            0.27886807
                            + t
                            * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))
                        )
                    )
                )
            )
        )
    )
    r = t * np.exp(poly)
    return np.where(x >= 0, r, 2.0 - r)


def cck_symbol_errors(e: np.ndarray, points: int = 401) -> np.ndarray:
    """:func:`cck_symbol_error` for every element of ``e`` at once (Simpson's rule on
    ``points`` nodes per value, the tail function from :func:`_erfc`)."""
    b = np.sqrt(2.0 * np.asarray(e, dtype=float))
    lo = np.maximum(-b, -9.0)
    u = np.linspace(0.0, 1.0, points)
    x = lo[:, None] + (9.0 - lo)[:, None] * u[None, :]
    two_q = _erfc((x + b[:, None]) / math.sqrt(2.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        miss = -np.expm1(7.0 * np.log1p(-np.minimum(two_q, 1.0)))
    f = miss * np.exp(-x * x / 2.0) / math.sqrt(2.0 * math.pi)
    w = np.ones(points)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    integral = (f @ w) * (9.0 - lo) / (points - 1) / 3.0
    tail = 0.5 * _erfc(b / math.sqrt(2.0))
    sep = np.where(lo >= 9.0, 0.0, tail + integral)
    return np.minimum(sep, 1.0)


GRID = np.arange(round(MIN_SINR_DB * GRID_PER_DB), round(MAX_SINR_DB * GRID_PER_DB) + 1)
GRID_START = int(GRID[0])  # the grid index of MIN_SINR_DB, in 0.01 dB steps


def lpb_grid(m: Mode) -> list[float]:
    """:func:`log_success_per_bit` on the whole SINR grid (MIN..MAX_SINR_DB, 0.01 dB),
    index 0 at MIN_SINR_DB; CCK vectorised, the others point by point (exact)."""
    sinr = 10.0 ** (GRID / (10.0 * GRID_PER_DB))
    if m.modulation in ("cck16", "cck256"):
        e = (8.0 if m.modulation == "cck16" else 4.0) * sinr
        sep = cck_symbol_errors(e)
        with np.errstate(divide="ignore"):
            return (np.log1p(-sep) / 4.0).tolist()
    return [log_success_per_bit(m, v) for v in sinr.tolist()]


class BitErrorTable:
    """:func:`log_success_per_bit` on a 0.01 dB grid of SINR, per mode, computed for the
    whole grid on a mode's first use (:meth:`warm` does it ahead: a medium warms its
    rates when it is built, so no frame waits for a table). One shared instance,
    :data:`SHARED_TABLE`, serves every medium of a process."""

    __slots__ = ("_grids",)

    def __init__(self) -> None:
        self._grids: dict[float, list[float]] = {}

    def warm(self, rates: Iterable[float]) -> None:
        for r in rates:
            self.grid(mode(r))

    def grid(self, m: Mode) -> list[float]:
        g = self._grids.get(m.rate_mbps)
        if g is None:
            g = self._grids[m.rate_mbps] = lpb_grid(m)
        return g

    def lpb_db(self, m: Mode, sinr_db: float) -> float:
        if sinr_db <= MIN_SINR_DB:
            return -math.inf
        if sinr_db >= MAX_SINR_DB:
            return 0.0
        g = self._grids.get(m.rate_mbps) or self.grid(m)
        return g[round(sinr_db * GRID_PER_DB) - GRID_START]

    def lpb(self, m: Mode, sinr: float) -> float:
        return self.lpb_db(m, 10.0 * math.log10(sinr) if sinr > 0 else -math.inf)


SHARED_TABLE = BitErrorTable()


# --- a frame's PHY layout ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FrameLayout:
    """Where a PPDU's error-checked sections lie (microseconds from its start), their
    modes and bit rates (bits per microsecond)."""

    header_start_us: float
    header_end_us: float
    header_mode: Mode
    header_bits_per_us: float
    payload_mode: Mode
    payload_bits_per_us: float
    end_us: float

    @property
    def header_bits(self) -> float:
        return (self.header_end_us - self.header_start_us) * self.header_bits_per_us

    @property
    def payload_bits(self) -> float:
        return (self.end_us - self.header_end_us) * self.payload_bits_per_us


def frame_layout(mpdu_bytes: int, rate_mbps: float, short_preamble: bool = False) -> FrameLayout:
    """The PPDU of ``mpdu_bytes`` at ``rate_mbps``: DSSS long preamble 144 us + 48 us
    header at 1 Mbit/s, short 72 us + 24 us at 2 Mbit/s (IEEE 802.11-2020 16.2.2; never
    short at 1 Mbit/s); OFDM 16 us preamble + 4 us SIGNAL at 6 Mbit/s, then 4 us
    symbols (17.3.2). The payload's bits are its duration times its bit rate (OFDM:
    service, tail and pad bits included, as ns-3 counts them)."""
    m = mode(rate_mbps)
    end = ppdu_us(mpdu_bytes, rate_mbps, short_preamble)
    if m.ofdm:
        return FrameLayout(16.0, 20.0, MODES[6.0], 6.0, m, rate_mbps, end)
    if short_preamble and rate_mbps != 1.0:
        return FrameLayout(72.0, 96.0, MODES[2.0], 2.0, m, rate_mbps, end)
    return FrameLayout(144.0, 192.0, MODES[1.0], 1.0, m, rate_mbps, end)


def frame_success(table: BitErrorTable, layout: FrameLayout, sinr_db: float) -> float:
    """Probability that a whole frame survives a constant SINR (no interference change)."""
    lp = layout.header_bits * table.lpb_db(layout.header_mode, sinr_db) + (
        layout.payload_bits * table.lpb_db(layout.payload_mode, sinr_db)
    )
    return math.exp(lp) if lp > -745.0 else 0.0


def sinr_for_success(
    table: BitErrorTable, layout: FrameLayout, success: float, lo: float = -20.0, hi: float = 50.0
) -> float:
    """The SINR (dB) at which :func:`frame_success` reaches ``success`` (bisection to
    0.01 dB; the curve is monotonic)."""
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if frame_success(table, layout, mid) >= success:
            hi = mid
        else:
            lo = mid
        if hi - lo < 0.005:
            break
    return round(hi, 2)


__all__ = [
    "DSSS_RATES",
    "OFDM_RATES",
    "Mode",
    "MODES",
    "mode",
    "BitErrorTable",
    "FrameLayout",
    "frame_layout",
    "frame_success",
    "sinr_for_success",
    "log_success_per_bit",
    "cck_symbol_error",
]
