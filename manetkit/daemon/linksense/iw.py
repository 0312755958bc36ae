"""Parser of ``iw dev IF station dump`` text into ``StationInfo`` rows.

The daemon reads stations through nl80211 (``nl80211.py``); this parser serves the
field-test kit (``field-tests/collect`` and ``report`` read recorded dumps) and tests that
compare both views. iw prints one block per station::

    Station 02:00:00:00:01:00 (on wlan0)
    \tinactive time:\t40 ms
    \tsignal:  \t-46 [-93, -46] dBm

The layout differs between iw versions and drivers (tabs or spaces, ``key:value`` with no
space as in ``beacon interval:100``, per-chain signals in brackets, ``-v`` sub-tables
such as ``MSDU:`` and MLO ``Link 0:`` blocks), so the parser keys on the first colon of
each indented line and keeps every field it does not map as text in ``fields``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from manetkit.daemon.linksense.base import StationInfo

_STATION = re.compile(r"^Station\s+([0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5})\s*(?:\(on\s+([^)]+)\))?")
_LEADING_INT = re.compile(r"^\s*(-?\d+)")


class IwParseError(ValueError):
    """The text is not an ``iw station dump`` (names the line that broke the parse)."""


@dataclass(frozen=True, slots=True)
class IwStation:
    """One station block: the common ``StationInfo`` plus every other field as text."""

    info: StationInfo
    interface: str | None
    fields: dict[str, str] = field(default_factory=dict)
    chain_signal_dbm: tuple[int, ...] = ()


def _leading_int(value: str) -> int | None:
    m = _LEADING_INT.match(value)
    return int(m.group(1)) if m else None


def _chains(value: str) -> tuple[int, ...]:
    """Per-chain signals: ``-46 [-93, -46] dBm`` -> (-93, -46)."""
    m = re.search(r"\[([^\]]*)\]", value)
    if not m:
        return ()
    return tuple(int(x) for x in re.findall(r"-?\d+", m.group(1)))


# StationInfo field -> the line of ``iw station dump`` that gives it.
_IW_FIELDS = {
    "signal_dbm": "signal", "signal_avg_dbm": "signal avg", "inactive_ms": "inactive time",
    "rx_packets": "rx packets", "tx_packets": "tx packets", "tx_retries": "tx retries",
    "tx_failed": "tx failed",
}  # fmt: skip


def _block_to_station(mac: str, interface: str | None, raw: dict[str, str]) -> IwStation:
    def num(key: str) -> int | None:
        return _leading_int(raw[key]) if key in raw else None

    info = StationInfo.read(mac, lambda name: num(_IW_FIELDS[name]))
    return IwStation(
        info=info,
        interface=interface,
        fields=raw,
        chain_signal_dbm=_chains(raw.get("signal", "")),
    )


def parse_station_dump(text: str) -> list[IwStation]:
    """Every station block in ``text``, in order.

    Lines before the first ``Station`` line are refused (``IwParseError``) unless blank,
    so an error message (``command failed: No such device (-19)``) is not mistaken for an
    empty table. Only the station's own top-level fields are kept: the rows of ``-v``
    sub-tables (``MSDU:``, ``TXQs:``) have no colon and are skipped, and MLO per-link
    blocks (``Link N:``) repeat field names with per-link values that would otherwise
    shadow the station's totals.
    """
    stations: list[IwStation] = []
    mac: str | None = None
    interface: str | None = None
    raw: dict[str, str] = {}
    in_link_block = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _STATION.match(line)
        if m:
            if mac is not None:
                stations.append(_block_to_station(mac, interface, raw))
            mac, interface, raw, in_link_block = m.group(1).lower(), m.group(2), {}, False
            continue
        if mac is None:
            raise IwParseError(f"line {lineno}: expected 'Station <mac> (on <if>)', got {line!r}")
        key, sep, value = line.strip().partition(":")
        key = key.strip()
        if not sep:
            continue  # a row of a sub-table (``0 88 3 0 0``)
        if not value.strip() and key.startswith("Link "):
            in_link_block = True  # MLO per-link stats follow, up to the next station
            continue
        if in_link_block or not value.strip():
            continue  # per-link values, or a sub-table's title (``MSDU:``, ``TXQs:``)
        raw.setdefault(key, value.strip())
    if mac is not None:
        stations.append(_block_to_station(mac, interface, raw))
    return stations
