"""802.11 frame durations (DSSS and OFDM) against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from manetkit.lab.medium.airtime import DSSS, OFDM, Airtime, mpdu_bytes, ppdu_us

ETH_1500 = 1514  # a 1500-byte IP packet in an Ethernet frame from the TAP


def test_mpdu_replaces_ethernet_header():
    assert mpdu_bytes(ETH_1500) == 1536


def test_2mbps_long_preamble():
    assert Airtime(2).data_us(ETH_1500) == pytest.approx(192 + 1536 * 8 / 2)  # 6336 us
    assert Airtime(2).data_us(ETH_1500) == pytest.approx(6336.0)
    assert Airtime(2).ack_us() == pytest.approx(192 + 14 * 8 / 1)  # ACK at 1 Mbps


def test_short_preamble_not_at_1mbps():
    assert Airtime(11, short_preamble=True).data_us(ETH_1500) == pytest.approx(96 + 1536 * 8 / 11)
    assert ppdu_us(14, 1.0, short_preamble=True) == pytest.approx(192 + 112)


def test_54mbps_ofdm():
    a = Airtime(54)
    assert a.data_us(ETH_1500) == 20 + 4 * math.ceil((16 + 6 + 8 * 1536) / 216)  # 248 us
    assert a.ack_us() == 20 + 4 * math.ceil((16 + 6 + 8 * 14) / 24)  # 44 us at 6 Mbps
    assert a.unicast_us(ETH_1500) == 248 + 16 + 44


def test_phy_parameters():
    assert (DSSS.slot_us, DSSS.sifs_us, DSSS.difs_us, DSSS.cw_min, DSSS.cw_max) == (
        20,
        10,
        50,
        31,
        1023,
    )
    assert (OFDM.slot_us, OFDM.sifs_us, OFDM.difs_us, OFDM.cw_min) == (9, 16, 34, 15)


def test_mean_exchange():
    # DIFS + CWmin/2 slots + data + SIFS + ACK at 2 Mbps
    assert Airtime(2).mean_exchange_us(ETH_1500) == pytest.approx(50 + 15.5 * 20 + 6336 + 10 + 304)


def test_unknown_rate_refused():
    with pytest.raises(ValueError):
        Airtime(3).data_us(100)


def test_rts_cts_at_2mbps():
    # RTS 20 bytes and CTS 14 bytes at the 1 Mbps basic rate, long preamble.
    a = Airtime(2, rts_threshold=0)
    assert a.rts_cts_us() == pytest.approx((192 + 20 * 8) + 10 + (192 + 14 * 8))  # 666 us
    assert a.unicast_us(ETH_1500) == pytest.approx(666 + 10 + 6336 + 10 + 304)  # 7326 us
    assert a.mean_exchange_us(ETH_1500) == pytest.approx(50 + 15.5 * 20 + 7326)
    # broadcast never uses RTS/CTS
    assert a.mean_exchange_us(ETH_1500, unicast=False) == pytest.approx(50 + 310 + 6336)


def test_rts_cts_at_54mbps():
    a = Airtime(54, rts_threshold=0)
    rts = 20 + 4 * math.ceil((16 + 6 + 8 * 20) / 24)  # 52 us at 6 Mbps
    cts = 20 + 4 * math.ceil((16 + 6 + 8 * 14) / 24)  # 44 us
    assert a.rts_cts_us() == rts + 16 + cts == 112
    assert a.unicast_us(ETH_1500) == 112 + 16 + 248 + 16 + 44


def test_rts_threshold_compares_the_mpdu():
    # A 1514-byte Ethernet frame is a 1536-byte MPDU: RTS only if 1536 > threshold.
    assert Airtime(2, rts_threshold=1535).uses_rts(ETH_1500)
    assert not Airtime(2, rts_threshold=1536).uses_rts(ETH_1500)
    assert not Airtime(2).uses_rts(ETH_1500)  # default 2347: off, as on real cards
    assert Airtime(2).unicast_us(ETH_1500) == pytest.approx(6336 + 10 + 304)
