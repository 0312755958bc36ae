"""Link sensing from the lab radio's station table (the lab's stand-in for nl80211).

A lab node's radio (served by the lab's medium process, or by a radio process) answers
JSON lines on its control socket (``manetkit.paths.radio_control_socket``):
  ``{"cmd":"subscribe"}`` -> a stream of the typed events of :mod:`manetkit.radioevents`
                            (tx-failed with the frame, station-new, station-gone), read
                            with :func:`manetkit.jsonlines.subscribe`
  ``{"cmd":"stations"}``  -> ``{"ok":true,"stations":[{"mac","signal_dbm",
                            "signal_avg_dbm","inactive_ms","rx_packets",
                            "rx_signal_frames","rx_signal_sum_dbm",...}]}``
Tx failures and new stations arrive as events at once; signal and activity are polled
every ``poll_s`` (200 ms: fast enough for Atra's 3-sample RFP window, cheap enough).
A station counts as heard when its rx_packets grew since the last poll (or it is new),
so a row that lingers in the table without traffic ages out through the hysteresis.
The transmit counters' differences between two polls (``tx_packets``, ``tx_retries``,
``tx_failed``) go out as ``StationTxStats``: link quality's ETX from the data path.

The signal reported for a heard station is the mean power (dBm) of every frame the radio
heard from it since the previous poll: the radio sums each frame's RSSI per station
(``rx_signal_frames``, ``rx_signal_sum_dbm``; overheard unicasts included) and the
backend takes the differences. So every received frame's RSSI reaches Atra's route
failure prediction (RFP, docs/atra.md), as one sample per neighbour per poll: the
predictor's history keeps its time scale, and averaging the frames of an interval damps
per-frame fading instead of taking whichever frame came last. A radio without those
fields (or one that restarted, its counters begun again) gives the last frame's
``signal_dbm``, else ``signal_avg_dbm``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from manetkit import jsonlines, radioevents
from manetkit.daemon.linksense.base import (
    EventSink,
    LinkSenseBackend,
    StationGone,
    StationInfo,
    StationSeen,
    StationTxFailed,
    tx_stats,
)

log = logging.getLogger(__name__)


def station_from_json(row: dict[str, Any]) -> StationInfo:
    return StationInfo.read(row["mac"], row.get)


def _frame_sums(row: dict[str, Any]) -> tuple[int, float] | None:
    """The row's per-frame signal counters (count, sum of dBm); None if the radio lacks them."""
    frames, total = row.get("rx_signal_frames"), row.get("rx_signal_sum_dbm")
    if frames is None or total is None:
        return None
    return int(frames), float(total)


class LabBackend(LinkSenseBackend):
    name = "lab"

    def __init__(
        self,
        interface: str,
        sink: EventSink,
        control_socket: Path,
        clock: Callable[[], float],
        poll_s: float = 0.2,
    ) -> None:
        super().__init__(interface, sink)
        self.control_socket = control_socket
        self.poll_s = poll_s
        self._clock = clock
        self._table: list[StationInfo] = []
        self._rx_seen: dict[bytes, int] = {}
        self._rows: dict[bytes, StationInfo] = {}  # the previous poll's rows (tx deltas)
        # per MAC: (rx_signal_frames, rx_signal_sum_dbm) at the previous poll
        self._signal_seen: dict[bytes, tuple[int, float]] = {}
        self.malformed = 0
        self._sub: jsonlines.Subscription | None = None

    @property
    def connected(self) -> bool:
        """Subscribed to the radio's events (the radio confirmed)."""
        return self._sub is not None and self._sub.subscribed

    async def run(self) -> None:
        await asyncio.gather(self._subscribe_loop(), self._poll_loop())

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        warned = False
        while True:
            try:
                return await asyncio.open_unix_connection(str(self.control_socket))
            except OSError as exc:
                if not warned:
                    log.warning(
                        "lab radio control socket %s: %s; retrying", self.control_socket, exc
                    )
                    warned = True
                await asyncio.sleep(0.5)

    async def _subscribe_loop(self) -> None:
        warned = False
        while True:
            self._sub = sub = jsonlines.subscribe(self.control_socket)
            try:
                async for obj in sub:
                    self.on_event(obj)
                log.warning("lab radio subscription ended (the radio went away)")
            except OSError as exc:
                if not warned:
                    log.warning(
                        "lab radio control socket %s: %s; retrying", self.control_socket, exc
                    )
                    warned = True
            await asyncio.sleep(0.5)

    def on_event(self, obj: dict[str, Any]) -> None:
        """One event object from the radio (tests call it with a fake clock)."""
        try:
            ev = radioevents.from_wire(obj)
        except radioevents.RadioEventError as exc:
            self.malformed += 1
            log.debug("radio event skipped: %s", exc)
            return
        now = self._clock()
        if type(ev) is radioevents.TxFailed:
            self.sink(now, StationTxFailed(ev.mac, ev.frame))
        elif type(ev) is radioevents.StationGone:
            # The radio's own expiry (60 s silent, as mac80211 IBSS): firm evidence.
            self.sink(now, StationGone(ev.mac, ev.reason))
        else:
            self.sink(now, StationSeen(ev.mac, ev.signal_dbm))

    async def _poll_loop(self) -> None:
        while True:
            reader, writer = await self._connect()
            try:
                while True:
                    writer.write(b'{"cmd":"stations"}\n')
                    await writer.drain()
                    line = await reader.readline()
                    if not line:
                        break
                    self.on_table(line)
                    await asyncio.sleep(self.poll_s)
            except OSError as exc:
                log.warning("lab radio station poll failed: %s", exc)
            finally:
                writer.close()
            await asyncio.sleep(0.5)

    def on_table(self, line: bytes) -> None:
        """One reply to ``{"cmd":"stations"}``: heard stations go to the sink (tests call it
        with a fake clock)."""
        try:
            msg = json.loads(line)
            raw = msg["stations"]
            rows = [station_from_json(r) for r in raw]
            sums = [_frame_sums(r) for r in raw]
        except (ValueError, KeyError, TypeError, AttributeError):
            self.malformed += 1
            return
        self._table = rows
        now = self._clock()
        # Forget MACs gone from the radio's table (bounded by the table, not by history).
        for mac in self._rx_seen.keys() - {st.mac for st in rows}:
            del self._rx_seen[mac]
            self._signal_seen.pop(mac, None)
        before_rows, self._rows = self._rows, {st.mac: st for st in rows}
        for st in rows:
            sent = tx_stats(before_rows.get(st.mac), st)
            if sent is not None:
                self.sink(now, sent)
        for st, frame_sums in zip(rows, sums, strict=True):
            before = self._rx_seen.get(st.mac)
            self._rx_seen[st.mac] = st.rx_packets
            mean = self._frames_mean(st.mac, frame_sums)
            if before is not None and st.rx_packets <= before:
                continue  # nothing heard since the last poll
            signal = mean
            if signal is None:
                signal = st.signal_dbm if st.signal_dbm is not None else st.signal_avg_dbm
            self.sink(now, StationSeen(st.mac, signal))

    def _frames_mean(self, mac: bytes, sums: tuple[int, float] | None) -> float | None:
        """Mean dBm of the frames heard from ``mac`` since the previous poll, or None."""
        if sums is None:
            return None
        prev = self._signal_seen.get(mac)
        self._signal_seen[mac] = sums
        frames, total = sums
        if prev is not None:
            if frames < prev[0]:
                return None  # the radio restarted: counters began again
            frames, total = frames - prev[0], total - prev[1]
        return round(total / frames, 2) if frames > 0 else None

    def stations(self) -> list[StationInfo]:
        return list(self._table)


async def lab_request(path: Path, cmd: dict[str, Any], timeout: float = 2.0) -> dict[str, Any]:
    """One request/reply on a lab control socket (used by status and tests)."""
    reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(path)), timeout)
    try:
        writer.write(json.dumps(cmd).encode() + b"\n")
        await writer.drain()
        return json.loads(await asyncio.wait_for(reader.readline(), timeout))
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
