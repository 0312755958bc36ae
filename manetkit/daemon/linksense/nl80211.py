"""Link sensing on real Wi-Fi: per-station info from the kernel through nl80211.

mac80211 keeps a station entry per IBSS peer it hears, with the signal of the last frame
(and an average), the time since anything was heard from it, and counters of unicast
retries and failures (a failure = the MAC's retry limit was hit without an ACK: the
802.11 link-layer feedback Holland & Vaidya and Atra build on). ``Nl80211Backend`` dumps
that table (``NL80211_CMD_GET_STATION`` with ``NLM_F_DUMP``, as ``iw dev X station dump``
does) every ``poll_interval`` seconds through pyroute2 and reports:

- ``StationSeen(mac, signal)`` for every station heard recently (a fresh signal sample
  for Atra's RFP and the neighbour table);
- ``StationTxFailed(mac)`` when the station's ``tx failed`` counter grew since the last
  poll;
- ``StationGone(mac, reason)`` when the station dropped out of the dump (mac80211
  expired it: "no such station") or has been silent for more than ``inactive_limit_ms``.
  IBSS peers beacon every ~100 ms, so silence for seconds means the peer is out of
  range; mac80211's own IBSS expiry (60 s) is far too slow for routing.

Polling, not nl80211 multicast events: mac80211 sends NEW_STATION/DEL_STATION only on
entry creation and expiry, never for signal or counters, so a poll is needed anyway.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from pyroute2.netlink.exceptions import NetlinkError

from manetkit.daemon.linksense.base import (
    EventSink,
    LinkSenseBackend,
    StationEvent,
    StationGone,
    StationInfo,
    StationSeen,
    StationTxFailed,
    tx_stats,
)

log = logging.getLogger(__name__)

# Dumps the station table of one interface index: pyroute2 nl80211 messages.
StationDumper = Callable[[int], Awaitable[Iterable[Any]]]


# StationInfo field -> the NL80211_STA_INFO_* attribute that gives it (nl80211.h).
_NL80211_FIELDS = {
    "signal_dbm": "SIGNAL", "signal_avg_dbm": "SIGNAL_AVG", "inactive_ms": "INACTIVE_TIME",
    "rx_packets": "RX_PACKETS", "tx_packets": "TX_PACKETS", "tx_retries": "TX_RETRIES",
    "tx_failed": "TX_FAILED",
}  # fmt: skip


def station_from_message(msg: Any) -> StationInfo | None:
    """A pyroute2 ``nl80211cmd`` (NEW_STATION reply) -> ``StationInfo``.

    Returns ``None`` for a message without a MAC or without ``NL80211_ATTR_STA_INFO``
    (not a station row). Missing counters read as 0, missing signal as ``None``: drivers
    fill different subsets (``struct station_info.filled``).
    """
    mac = msg.get_attr("NL80211_ATTR_MAC")
    info = msg.get_attr("NL80211_ATTR_STA_INFO")
    if not mac or info is None:
        return None

    def attr(name: str) -> Any:
        return info.get_attr(f"NL80211_STA_INFO_{name}")

    return StationInfo.read(mac, lambda name: attr(_NL80211_FIELDS[name]))


def pyroute2_dumper() -> tuple[StationDumper, Callable[[], None]]:
    """A dumper on a real nl80211 socket (in the calling process's network namespace)
    and the function that closes it.

    pyroute2 reads netlink through ``loop.create_datagram_endpoint``, which uvloop (the
    daemon's loop) refuses for AF_NETLINK ("cannot open a UDP handle, invalid family
    16"). So the socket lives on a plain asyncio loop in a helper thread (pyroute2 keeps
    its transport thread-local: it is created, used and closed there) and each dump is
    handed over to that loop.
    """
    import threading

    from pyroute2.iwutil import AsyncIW

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="nl80211", daemon=True)
    thread.start()
    iw: AsyncIW | None = None

    async def dump_there(ifindex: int) -> list[Any]:
        nonlocal iw
        if iw is None:
            iw = AsyncIW()
            await iw.setup_endpoint()
        return [m async for m in await iw.get_stations(ifindex)]

    async def dump(ifindex: int) -> list[Any]:
        return await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(dump_there(ifindex), loop)
        )

    async def close_there() -> None:
        if iw is not None:
            iw.close()

    def close() -> None:
        try:
            asyncio.run_coroutine_threadsafe(close_there(), loop).result(timeout=5)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            if not thread.is_alive():
                loop.close()

    return dump, close


class StationTracker:
    """Sans-I/O core of the backend: station dumps in, station events out.

    Kept apart from the polling loop so tests feed dumps and times directly.
    """

    def __init__(self, inactive_limit_ms: int = 3000) -> None:
        self.inactive_limit_ms = inactive_limit_ms
        self.table: dict[bytes, StationInfo] = {}
        self._silent: set[bytes] = set()  # reported gone for inactivity, still listed

    def update(self, rows: Iterable[StationInfo]) -> list[StationEvent]:
        """Compare a fresh dump with the previous one; return the events it implies
        (transmit counter differences as ``StationTxStats``, for link quality)."""
        events: list[StationEvent] = []
        fresh = {row.mac: row for row in rows}
        for mac, row in fresh.items():
            before = self.table.get(mac)
            if before is not None and row.tx_failed > before.tx_failed:
                events.append(StationTxFailed(mac))
            sent = tx_stats(before, row)
            if sent is not None:
                events.append(sent)
            inactive = row.inactive_ms if row.inactive_ms is not None else 0
            if inactive > self.inactive_limit_ms:
                if mac not in self._silent:
                    self._silent.add(mac)
                    events.append(StationGone(mac, f"inactive {inactive} ms"))
            else:
                self._silent.discard(mac)
                events.append(StationSeen(mac, row.signal_dbm))
        for mac in self.table.keys() - fresh.keys():
            if mac not in self._silent:
                events.append(StationGone(mac, "no such station"))
            self._silent.discard(mac)
        self.table = fresh
        return events


class Nl80211Backend(LinkSenseBackend):
    """Polls ``interface``'s nl80211 station table (config ``link_sensing: nl80211``)."""

    name = "nl80211"

    def __init__(
        self,
        interface: str,
        sink: EventSink,
        *,
        poll_interval: float = 0.5,
        inactive_limit_ms: int = 3000,
        dumper: StationDumper | None = None,
        ifindex: int | None = None,
    ) -> None:
        super().__init__(interface, sink)
        self.poll_interval = poll_interval
        self.tracker = StationTracker(inactive_limit_ms)
        self._dumper = dumper
        self._ifindex = ifindex
        self.errors = 0  # failed dumps (interface gone, not a wireless interface, ...)

    def stations(self) -> list[StationInfo]:
        return list(self.tracker.table.values())

    async def poll_once(self) -> None:
        """One dump, its events delivered to the sink."""
        assert self._dumper is not None and self._ifindex is not None
        loop = asyncio.get_running_loop()
        messages = await self._dumper(self._ifindex)
        rows = [s for s in (station_from_message(m) for m in messages) if s is not None]
        now = loop.time()
        for event in self.tracker.update(rows):
            self.sink(now, event)

    async def run(self) -> None:
        close: Callable[[], None] | None = None
        if self._ifindex is None:
            self._ifindex = socket.if_nametoindex(self.interface)
        if self._dumper is None:
            self._dumper, close = pyroute2_dumper()
        try:
            while True:
                try:
                    await self.poll_once()
                except (OSError, NetlinkError, RuntimeError, ValueError) as exc:
                    # Keep sensing: a dump can fail while the interface is being
                    # reconfigured (ibss leave/join); log the first and count the rest.
                    if self.errors == 0:
                        log.warning("nl80211 station dump on %s failed: %s", self.interface, exc)
                    self.errors += 1
                await asyncio.sleep(self.poll_interval)
        finally:
            if close is not None:
                close()
