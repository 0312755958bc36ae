"""What every link-sensing backend reports, in terms of MAC addresses.

Backends observe the radio (a station table, nl80211, hello messages) and report raw
observations; the daemon's shell maps MACs to mesh addresses (``NeighbourTable``),
applies hysteresis, and turns them into the engines' ``LinkUp``/``LinkDown``/
``TxFailed``/``SignalSample`` inputs (``manetkit.daemon.engines.base``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from manetkit.macaddr import parse_mac


@dataclass(frozen=True, slots=True)
class StationInfo:
    """One row of a station table (``iw dev wlan0 station dump`` / ``lab stations``)."""

    mac: bytes
    signal_dbm: float | None = None
    signal_avg_dbm: float | None = None
    inactive_ms: int | None = None
    rx_packets: int = 0
    tx_packets: int = 0
    tx_retries: int = 0
    tx_failed: int = 0

    @classmethod
    def read(cls, mac: str, get: Callable[[str], Any]) -> StationInfo:
        """A row from any station table: ``get(field)`` answers this class's field names
        (None when the source lacks one). Signals become float, counters int."""
        signal, signal_avg, inactive = get("signal_dbm"), get("signal_avg_dbm"), get("inactive_ms")
        return cls(
            mac=parse_mac(mac),
            signal_dbm=None if signal is None else float(signal),
            signal_avg_dbm=None if signal_avg is None else float(signal_avg),
            inactive_ms=None if inactive is None else int(inactive),
            **{
                k: int(get(k) or 0) for k in ("rx_packets", "tx_packets", "tx_retries", "tx_failed")
            },
        )


@dataclass(frozen=True, slots=True)
class StationSeen:
    """A station is present (first sighting or a fresh sample); ``signal_dbm`` if known."""

    mac: bytes
    signal_dbm: float | None = None


@dataclass(frozen=True, slots=True)
class StationGone:
    """The backend's own evidence that a station left ("no such station", inactivity)."""

    mac: bytes
    reason: str


@dataclass(frozen=True, slots=True)
class StationTxFailed:
    """A unicast frame to ``mac`` failed after the MAC's retries; ``frame`` if returned."""

    mac: bytes
    frame: bytes | None = None


@dataclass(frozen=True, slots=True)
class StationTxStats:
    """Transmit counters to ``mac`` between two polls: 802.11 attempts (first tries plus
    retries) and frames delivered (sent minus failed), for link quality's ETX."""

    mac: bytes
    attempts: int
    delivered: int


def tx_stats(before: StationInfo | None, row: StationInfo) -> StationTxStats | None:
    """What was transmitted to ``row``'s station since ``before`` (the previous poll's
    row), or None: nothing, no previous row, or counters that went back (a restart)."""
    if before is None:
        return None
    frames = row.tx_packets - before.tx_packets
    retries = row.tx_retries - before.tx_retries
    failed = row.tx_failed - before.tx_failed
    if frames < 0 or retries < 0 or failed < 0 or frames + retries == 0:
        return None
    return StationTxStats(row.mac, frames + retries, max(frames - failed, 0))


StationEvent = StationSeen | StationGone | StationTxFailed | StationTxStats
# Callback the shell gives a backend: (now, event). ``now`` is the loop's monotonic time.
EventSink = Callable[[float, StationEvent], None]


class LinkSenseBackend(ABC):
    """An asyncio-side observer of one radio interface."""

    name: str = "?"

    def __init__(self, interface: str, sink: EventSink) -> None:
        self.interface = interface
        self.sink = sink

    @abstractmethod
    async def run(self) -> None:
        """Observe until cancelled, calling ``self.sink`` for each observation."""

    @abstractmethod
    def stations(self) -> list[StationInfo]:
        """The latest station table (for ``manetkit status``)."""
