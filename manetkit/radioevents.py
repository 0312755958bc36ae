"""The lab radio's events: what a node's radio tells the node's software about its stations.

The lab radio (``manetkit.lab.radioport``: one per node, served by the medium process or
by a radio process) streams these on its control socket to every subscriber
(``{"cmd": "subscribe"}``, :func:`manetkit.jsonlines.subscribe`); the daemon's ``lab``
link-sensing backend (``daemon/linksense/lab.py``) reads them back. They play the part of
mac80211's nl80211 notifications on a laptop (a station added or removed, a frame not
acknowledged after the retry limit). Like :mod:`manetkit.events`, each is a small frozen
dataclass written once with :func:`to_wire` and read with :func:`from_wire`; nothing else
spells the schema out.

On the wire an event is one JSON object ``{"event": NAME, ...fields}``: MACs as
``aa:bb:cc:dd:ee:ff``, a failed frame as hex. Readers ignore fields they do not know
(``missed``, the server's count of lines a slow subscriber lost, among them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from manetkit.macaddr import format_mac, parse_mac


class RadioEventError(ValueError):
    """An event object that does not follow the schema (the message says why)."""


@dataclass(frozen=True, slots=True)
class TxFailed:
    """A unicast to ``mac`` was not acknowledged after ``retries`` retries (the 802.11
    retry limit): the tx-failure notice routing uses as link-layer feedback (RFC 4728
    section 8.3.3). ``frame`` is the frame that failed, so routing can salvage it."""

    mac: bytes
    retries: int
    frame: bytes | None = None


@dataclass(frozen=True, slots=True)
class StationNew:
    """A first frame from ``mac`` (mac80211 adds an IBSS station when it hears one)."""

    mac: bytes
    signal_dbm: float | None = None


@dataclass(frozen=True, slots=True)
class StationGone:
    """``mac`` left the station table (``reason`` ``inactive``: silent for the expiry)."""

    mac: bytes
    reason: str = "gone"


RadioEvent = TxFailed | StationNew | StationGone


def to_wire(ev: RadioEvent) -> dict[str, Any]:
    """The JSON-lines object for ``ev``."""
    if type(ev) is TxFailed:
        out: dict[str, Any] = {"event": "tx-failed", "mac": format_mac(ev.mac)}
        out["retries"] = ev.retries
        if ev.frame is not None:
            out["frame"] = ev.frame.hex()
        return out
    if type(ev) is StationNew:
        return {"event": "station-new", "mac": format_mac(ev.mac), "signal_dbm": ev.signal_dbm}
    if type(ev) is StationGone:
        return {"event": "station-gone", "mac": format_mac(ev.mac), "reason": ev.reason}
    raise TypeError(f"not a radio event: {ev!r}")


def _field(obj: Mapping[str, Any], name: str, kind: type | tuple[type, ...], event: str) -> Any:
    v = obj.get(name)
    if not isinstance(v, kind) or isinstance(v, bool):
        raise RadioEventError(f"{event}: {name}: expected {getattr(kind, '__name__', kind)}")
    return v


def _mac(obj: Mapping[str, Any], event: str) -> bytes:
    try:
        return parse_mac(_field(obj, "mac", str, event))
    except ValueError as exc:
        raise RadioEventError(f"{event}: mac: {exc}") from None


def from_wire(obj: Mapping[str, Any]) -> RadioEvent:
    """Parse one event object; :class:`RadioEventError` names the event and the field."""
    if not isinstance(obj, Mapping):
        raise RadioEventError(f"an event is a JSON object, not {type(obj).__name__}")
    name = obj.get("event")
    if name == "tx-failed":
        frame = obj.get("frame")
        try:
            raw = bytes.fromhex(frame) if frame else None
        except (TypeError, ValueError):
            raise RadioEventError("tx-failed: frame: expected hex") from None
        retries = obj.get("retries", 0)
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise RadioEventError("tx-failed: retries: expected an integer >= 0")
        return TxFailed(_mac(obj, name), retries, raw)
    if name == "station-new":
        signal = obj.get("signal_dbm")
        if signal is not None:
            signal = float(_field(obj, "signal_dbm", (int, float), name))
        return StationNew(_mac(obj, name), signal)
    if name == "station-gone":
        reason = obj.get("reason", "gone")
        if not isinstance(reason, str):
            raise RadioEventError("station-gone: reason: expected str")
        return StationGone(_mac(obj, name), reason)
    raise RadioEventError(f"unknown radio event {name!r}")
