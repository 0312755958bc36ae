"""The lab radio's typed events: one wire form, written by to_wire, read by from_wire."""

from __future__ import annotations

import pytest

from manetkit.radioevents import (
    RadioEventError,
    StationGone,
    StationNew,
    TxFailed,
    from_wire,
    to_wire,
)

M2 = bytes.fromhex("026d6b000002")


def test_events_round_trip_in_the_documented_wire_form():
    failed = TxFailed(M2, 7, b"\x01\x02")
    assert to_wire(failed) == {
        "event": "tx-failed",
        "mac": "02:6d:6b:00:00:02",
        "retries": 7,
        "frame": "0102",
    }
    for ev in (failed, TxFailed(M2, 0), StationNew(M2, -61.5), StationNew(M2), StationGone(M2)):
        assert from_wire(to_wire(ev)) == ev
    # Fields a reader does not know (the server's "missed" count) are ignored.
    assert from_wire({**to_wire(StationGone(M2, "inactive")), "missed": 3}) == StationGone(
        M2, "inactive"
    )


@pytest.mark.parametrize(
    ("obj", "why"),
    [
        ({"event": "tx-failed", "mac": "nonsense"}, "tx-failed: mac"),
        ({"event": "tx-failed", "mac": "02:6d:6b:00:00:02", "frame": "zz"}, "frame"),
        ({"event": "tx-failed", "mac": "02:6d:6b:00:00:02", "retries": -1}, "retries"),
        ({"event": "station-new", "mac": "02:6d:6b:00:00:02", "signal_dbm": "x"}, "signal"),
        ({"event": "station-gone", "mac": 5}, "station-gone: mac"),
        ({"event": "reboot"}, "unknown radio event"),
        (["tx-failed"], "JSON object"),
    ],
)
def test_malformed_events_are_refused_naming_the_field(obj, why):
    with pytest.raises(RadioEventError, match=why):
        from_wire(obj)
