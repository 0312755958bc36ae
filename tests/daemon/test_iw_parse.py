"""``iw dev X station dump`` parsing on outputs of several drivers (tests/data/iw/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from manetkit.daemon.linksense.iw import IwParseError, parse_station_dump
from manetkit.macaddr import parse_mac

DATA = Path(__file__).parent.parent / "data" / "iw"


def load(name: str) -> list:
    return parse_station_dump((DATA / name).read_text())


def test_ath10k_ibss_tabs_and_chain_signals():
    a, b = load("ath10k_ibss.txt")
    assert a.info.mac == parse_mac("06:f0:21:31:5b:a1")
    assert a.interface == "adhoc0"
    assert a.info.signal_dbm == -46.0 and a.info.signal_avg_dbm == -46.0
    assert a.chain_signal_dbm == (-93, -46)
    assert (a.info.tx_packets, a.info.tx_retries, a.info.tx_failed) == (5958, 0, 5953)
    assert a.info.rx_packets == 40354 and a.info.inactive_ms == 0
    assert a.fields["MFP"] == "no"  # tab-aligned value with two tabs
    assert b.info.signal_avg_dbm == -48.0 and b.info.inactive_ms == 10


def test_mt7603_ibss_space_aligned():
    rows = load("mt7603_ibss.txt")
    assert [r.info.signal_dbm for r in rows] == [-90.0, -71.0]
    assert [r.info.inactive_ms for r in rows] == [100, 60]
    assert rows[1].fields["connected time"] == "5 seconds"


def test_newer_iw_layout_with_colon_without_space():
    (row,) = load("mt7603_ap_newer_iw.txt")
    assert row.interface == "phy0-ap0"
    assert (row.info.tx_retries, row.info.tx_failed) == (298, 4)
    assert row.fields["beacon interval"] == "100"
    assert row.fields["short slot time"] == "yes"
    assert row.fields["expected throughput"] == "30.211Mbps"


def test_four_chain_ath10k_next_to_ath9k():
    ath9k, ath10k = load("ath9k_and_ath10k_chains.txt")
    assert ath9k.chain_signal_dbm == (-62, -59)
    assert ath10k.chain_signal_dbm == (-67, -77, -95, -95)
    assert ath10k.info.signal_avg_dbm == -74.0 and ath10k.info.tx_failed == 3


def test_verbose_subtables_and_mlo_link_blocks_do_not_shadow_totals():
    (row,) = load("mlo_verbose.txt")
    assert row.info.inactive_ms == 328  # not Link 0's 5324
    assert row.info.signal_dbm == -33.0  # not Link 0's -40
    assert row.info.tx_retries == 3 and row.info.rx_packets == 98
    assert row.fields["last ack signal"] == "-35 dBm"
    assert row.fields["connected time"] == "188 seconds"  # after the sub-tables
    assert "address" not in row.fields


def test_hwsim_recorded_in_the_rig():
    rows = load("hwsim_ibss.txt")
    assert rows, "sample has stations"
    for r in rows:
        assert r.interface and r.interface.startswith("wlan")
        assert r.info.signal_dbm is not None and -100 < r.info.signal_dbm < 0
        assert r.info.mac[:1] == b"\x02"  # hwsim's locally administered addresses


def test_empty_dump_is_no_station():
    assert parse_station_dump("") == []
    assert parse_station_dump("\n\n") == []


@pytest.mark.parametrize(
    "text",
    ["command failed: No such device (-19)", "Station nothere (on wlan0)\n\tsignal: -3 dBm"],
)
def test_error_text_is_refused_naming_the_line(text):
    with pytest.raises(IwParseError, match="line 1"):
        parse_station_dump(text)


def test_missing_fields_default():
    (row,) = parse_station_dump("Station 02:00:00:00:00:01\n\tinactive time:\t5 ms\n")
    assert row.interface is None and row.info.signal_dbm is None and row.info.tx_failed == 0
