"""The nl80211 link-sensing backend against recorded station messages and a fake socket.

The real socket is exercised in the mac80211_hwsim rig (tests/field/test_vmrig.py).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.nl80211 import NL80211_NAMES, nl80211cmd

from manetkit.daemon.linksense.base import StationGone, StationSeen, StationTxFailed
from manetkit.daemon.linksense.iw import parse_station_dump
from manetkit.daemon.linksense.nl80211 import (
    Nl80211Backend,
    StationTracker,
    station_from_message,
)
from manetkit.macaddr import parse_mac

DATA = Path(__file__).parent.parent / "data"
A = parse_mac("02:00:00:00:01:00")
B = parse_mac("02:00:00:00:02:00")


def wire_message(attrs: dict) -> nl80211cmd:
    """Encode a NEW_STATION message and decode it back, as the kernel's reply would be."""
    msg = nl80211cmd()
    msg["cmd"] = NL80211_NAMES["NL80211_CMD_NEW_STATION"]
    msg["attrs"] = [
        [k, {"attrs": list(v.items())}] if isinstance(v, dict) else [k, v] for k, v in attrs.items()
    ]
    msg.encode()
    out = nl80211cmd(msg.data)
    out.decode()
    return out


def station(mac: str, **info) -> nl80211cmd:
    return wire_message(
        {
            "NL80211_ATTR_IFINDEX": 4,
            "NL80211_ATTR_MAC": mac,
            "NL80211_ATTR_STA_INFO": {f"NL80211_STA_INFO_{k.upper()}": v for k, v in info.items()},
        }
    )


def test_recorded_attributes_match_the_iw_view_of_the_same_station():
    recorded = json.loads((DATA / "nl80211" / "ath10k_ibss_attrs.json").read_text())
    rows = [station_from_message(wire_message(a)) for a in recorded["stations"]]
    iw_rows = [s.info for s in parse_station_dump((DATA / "iw" / "ath10k_ibss.txt").read_text())]
    assert rows == iw_rows


def test_kernel_bytes_recorded_in_the_hwsim_rig():
    """Raw NEW_STATION replies a 6.1 kernel sent for mac80211_hwsim IBSS peers."""
    recorded = json.loads((DATA / "nl80211" / "hwsim_station_dump.json").read_text())
    assert recorded["messages"]
    for hexdata in recorded["messages"]:
        msg = nl80211cmd(bytes.fromhex(hexdata))
        msg.decode()
        row = station_from_message(msg)
        assert row is not None and row.mac[:1] == b"\x02"
        assert row.signal_dbm is not None and -100 < row.signal_dbm < 0
        assert row.inactive_ms is not None and row.rx_packets > 0


def test_message_without_station_info_is_not_a_row():
    assert station_from_message(wire_message({"NL80211_ATTR_IFINDEX": 4})) is None


def test_missing_counters_read_as_zero_and_signal_as_unknown():
    row = station_from_message(station("02:00:00:00:01:00", inactive_time=7))
    assert row.signal_dbm is None and row.tx_failed == 0 and row.inactive_ms == 7


def rows(*msgs):
    return [station_from_message(m) for m in msgs]


def test_tracker_seen_txfailed_inactive_and_gone():
    t = StationTracker(inactive_limit_ms=1000)
    ev = t.update(rows(station("02:00:00:00:01:00", signal=-40, tx_failed=2)))
    assert ev == [StationSeen(A, -40.0)]
    # tx failed grew: one TxFailed plus the fresh sample
    ev = t.update(rows(station("02:00:00:00:01:00", signal=-41, tx_failed=5)))
    assert ev == [StationTxFailed(A), StationSeen(A, -41.0)]
    # counter unchanged: no TxFailed
    ev = t.update(rows(station("02:00:00:00:01:00", signal=-41, tx_failed=5)))
    assert ev == [StationSeen(A, -41.0)]
    # silent beyond the limit: gone once, not on every poll
    silent = station("02:00:00:00:01:00", signal=-41, tx_failed=5, inactive_time=1500)
    assert t.update(rows(silent)) == [StationGone(A, "inactive 1500 ms")]
    assert t.update(rows(silent)) == []
    # then it drops out of the table: already reported, no second Gone
    assert t.update([]) == []
    # heard again, and another station appears and disappears
    ev = t.update(rows(station("02:00:00:00:01:00", signal=-50), station("02:00:00:00:02:00")))
    assert ev == [StationSeen(A, -50.0), StationSeen(B, None)]
    ev = t.update(rows(station("02:00:00:00:01:00", signal=-50)))
    assert ev == [StationSeen(A, -50.0), StationGone(B, "no such station")]
    assert [s.mac for s in t.table.values()] == [A]


def test_backend_polls_the_fake_socket_and_reports_to_the_sink():
    dumps = [
        [station("02:00:00:00:01:00", signal=-40, tx_failed=0)],
        NetlinkError(19, "No such device"),  # interface being reconfigured: keep going
        [station("02:00:00:00:01:00", signal=-60, tx_failed=1)],
        [],
    ]
    asked: list[int] = []

    async def fake_dump(ifindex: int):
        asked.append(ifindex)
        if not dumps:
            raise asyncio.CancelledError
        item = dumps.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    got: list = []
    backend = Nl80211Backend(
        "wlan9", lambda now, ev: got.append(ev), poll_interval=0, dumper=fake_dump, ifindex=4
    )

    async def main():
        with pytest.raises(asyncio.CancelledError):
            await backend.run()

    asyncio.run(main())
    assert set(asked) == {4}
    assert got == [
        StationSeen(A, -40.0),
        StationTxFailed(A),
        StationSeen(A, -60.0),
        StationGone(A, "no such station"),
    ]
    assert backend.errors == 1
    assert backend.stations() == []


def test_backend_reports_latest_table():
    backend = Nl80211Backend("wlan9", lambda now, ev: None, dumper=None, ifindex=4)

    async def one(ifindex):
        return [station("02:00:00:00:02:00", signal=-70, tx_retries=9)]

    backend._dumper = one
    asyncio.run(backend.poll_once())
    (row,) = backend.stations()
    assert row.mac == B and row.signal_dbm == -70.0 and row.tx_retries == 9


def test_real_dumper_works_on_uvloop():
    """The daemon runs on uvloop, which refuses pyroute2's AF_NETLINK datagram endpoint
    ("invalid family 16"); the dumper's own loop thread keeps it working. Without Wi-Fi
    the kernel answers (an empty dump, or an error for lo / a missing nl80211 family)."""
    import socket

    uvloop = pytest.importorskip("uvloop")
    from manetkit.daemon.linksense.nl80211 import pyroute2_dumper

    async def once() -> object:
        dump, close = pyroute2_dumper()
        try:
            return await dump(socket.if_nametoindex("lo"))
        except NetlinkError as exc:
            return exc
        finally:
            close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        got = runner.run(once())
    assert isinstance(got, (list, NetlinkError)), got
