"""802.11 frame timings (IEEE 802.11-2020 clauses 15 (DSSS/HR-DSSS) and 17 (OFDM)).

A frame the lab radio reads from its TAP is an Ethernet frame; on the air its 14-byte
Ethernet header is replaced by the 802.11 data header (24 bytes), an LLC/SNAP header
(8 bytes) and the FCS (4 bytes), so the MPDU is ``len(frame) - 14 + 36`` bytes.

    DSSS (1, 2, 5.5, 11 Mbps):  t = preamble+PLCP header + 8*bytes/rate
        preamble+PLCP = 192 us (long) or 96 us (short; never at 1 Mbps)
        slot 20 us, SIFS 10 us, DIFS = SIFS + 2*slot = 50 us, CWmin 31, CWmax 1023
    OFDM (6..54 Mbps):          t = 20 us + 4 us * ceil((16 + 6 + 8*bytes) / (4*rate))
        (preamble + SIGNAL = 20 us, 4 us symbols of 4*rate data bits, 16 service bits,
        6 tail bits), slot 9 us, SIFS 16 us, DIFS 34 us, CWmin 15, CWmax 1023

An ACK is 14 bytes sent at the basic rate. A unicast exchange costs
``DIFS + backoff + data + SIFS + ACK``; a broadcast ``DIFS + backoff + data``.

RTS/CTS (clause 10.3.2.6, ``dot11RTSThreshold``; ns-2's ``RTSThreshold_``, iw's ``rts``):
a unicast whose MPDU is longer than ``rts_threshold`` bytes is preceded by an RTS
(20 bytes) and a CTS (14 bytes), both at the basic rate, each followed by SIFS:
``DIFS + backoff + RTS + SIFS + CTS + SIFS + data + SIFS + ACK``. When no CTS comes (the
destination is absent) an attempt costs ``RTS + SIFS + CTS`` (the CTS timeout, as in
ns-2) and the data is not sent. The default threshold 2347 (larger than any MPDU) means
off, as on real cards; 0 protects every unicast, as Holland & Vaidya's ns-2 runs did.
Times are in microseconds (floats: 5.5 and 11 Mbps give fractional microseconds; the
exact value is kept rather than the PLCP LENGTH rounding, a < 1 us difference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DSSS_RATES = (1.0, 2.0, 5.5, 11.0)
OFDM_RATES = (6.0, 9.0, 12.0, 18.0, 24.0, 36.0, 48.0, 54.0)
ETHERNET_HEADER = 14
WIFI_OVERHEAD = 24 + 8 + 4  # 802.11 data header + LLC/SNAP + FCS
ACK_BYTES = 14
RTS_BYTES = 20
CTS_BYTES = 14
RTS_OFF = 2347  # dot11RTSThreshold's maximum: no MPDU is longer, so RTS/CTS is never used


@dataclass(frozen=True, slots=True)
class PhyTiming:
    slot_us: float
    sifs_us: float
    cw_min: int
    cw_max: int

    @property
    def difs_us(self) -> float:
        return self.sifs_us + 2 * self.slot_us


DSSS = PhyTiming(slot_us=20.0, sifs_us=10.0, cw_min=31, cw_max=1023)
OFDM = PhyTiming(slot_us=9.0, sifs_us=16.0, cw_min=15, cw_max=1023)


def is_ofdm(rate_mbps: float) -> bool:
    if rate_mbps in OFDM_RATES:
        return True
    if rate_mbps in DSSS_RATES:
        return False
    raise ValueError(f"{rate_mbps} Mbps is not an 802.11b/a/g rate")


def default_basic_rate(rate_mbps: float) -> float:
    """ACK rate when none is configured: the lowest mandatory rate of the PHY."""
    return 6.0 if is_ofdm(rate_mbps) else 1.0


def mpdu_bytes(ethernet_len: int) -> int:
    """On-air MPDU size of an Ethernet frame from the TAP."""
    return ethernet_len - ETHERNET_HEADER + WIFI_OVERHEAD


def ppdu_us(n_bytes: int, rate_mbps: float, short_preamble: bool = False) -> float:
    """Duration of a PPDU carrying ``n_bytes`` of MPDU at ``rate_mbps``."""
    if is_ofdm(rate_mbps):
        bits_per_symbol = 4 * rate_mbps
        return 20.0 + 4.0 * math.ceil((16 + 6 + 8 * n_bytes) / bits_per_symbol)
    preamble = 96.0 if short_preamble and rate_mbps != 1.0 else 192.0
    return preamble + 8 * n_bytes / rate_mbps


@dataclass(frozen=True, slots=True)
class Airtime:
    """Timings of one radio configuration (``radio:`` in a scenario)."""

    rate_mbps: float = 2.0
    basic_rate_mbps: float | None = None
    short_preamble: bool = False
    rts_threshold: int = RTS_OFF

    @property
    def phy(self) -> PhyTiming:
        return OFDM if is_ofdm(self.rate_mbps) else DSSS

    @property
    def basic(self) -> float:
        return self.basic_rate_mbps or default_basic_rate(self.rate_mbps)

    def data_us(self, ethernet_len: int) -> float:
        return ppdu_us(mpdu_bytes(ethernet_len), self.rate_mbps, self.short_preamble)

    def ack_us(self) -> float:
        return ppdu_us(ACK_BYTES, self.basic, self.short_preamble)

    def uses_rts(self, ethernet_len: int) -> bool:
        """Whether a unicast of this frame is preceded by RTS/CTS (MPDU > threshold)."""
        return mpdu_bytes(ethernet_len) > self.rts_threshold

    def rts_cts_us(self) -> float:
        """RTS + SIFS + CTS: also what an attempt costs when no CTS comes back."""
        return (
            ppdu_us(RTS_BYTES, self.basic, self.short_preamble)
            + self.phy.sifs_us
            + ppdu_us(CTS_BYTES, self.basic, self.short_preamble)
        )

    def unicast_us(self, ethernet_len: int) -> float:
        """One unicast attempt without the contention: [RTS + SIFS + CTS + SIFS +]
        data + SIFS + ACK."""
        t = self.data_us(ethernet_len) + self.phy.sifs_us + self.ack_us()
        if self.uses_rts(ethernet_len):
            t += self.rts_cts_us() + self.phy.sifs_us
        return t

    def mean_exchange_us(self, ethernet_len: int, unicast: bool = True) -> float:
        """A lone sender's mean time per frame: DIFS + CWmin/2 slots + the attempt."""
        phy = self.phy
        body = self.unicast_us(ethernet_len) if unicast else self.data_us(ethernet_len)
        return phy.difs_us + phy.cw_min / 2 * phy.slot_us + body
