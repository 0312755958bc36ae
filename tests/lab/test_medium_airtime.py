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
