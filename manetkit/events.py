"""The one event schema shared by the daemon (which emits) and the proxy (which reacts).

Each event is a small frozen dataclass (aioquic's ``quic/events.py``): engines emit them
inside :class:`manetkit.daemon.engines.base.Notify`, the daemon's event socket writes
them as JSON lines with :func:`to_wire`, and the proxy reads them back with
:func:`from_wire`. Nothing else spells the schema out: the README and docs point here.

On the wire an event is one JSON object: ``{"event": NAME, "time": UNIX_TIME, ...fields}``;
fields that are None are left out (e.g. ``sport`` of a route-down whose failed packet was
not TCP). Readers ignore fields they do not know, so adding one never breaks a client.

Addresses are the mesh IPv4 addresses as strings, as they appear on the wire.
"""

from __future__ import annotations

import dataclasses
import time as _time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError


class EventError(ValueError):
    """An event object that does not follow the schema (the message says why)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteUp:
    """A route to ``dst`` exists (again). DSR gives the whole ``path``; AODV its ``seq``.

    ``primary``: with several paths per destination (SMR), False for a backup path.
    """

    dst: str
    next_hop: str
    hops: int | None = None
    path: tuple[str, ...] | None = None
    seq: int | None = None
    primary: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteDown:
    """No route to ``dst`` any more (or it is being repaired: ``repairing``).

    For ELFN (Holland & Vaidya section 4) a route-down caused by a failed packet carries
    that packet's ``src``, ``sport``, ``dport``, ``seq`` (TCP) and ``proto``; ``elfn`` is
    True when they came from another node's Route Error / RERR extension.
    ``predicted``: Atra's predicted route failure (the route still works for now).
    """

    dst: str
    reason: str
    next_hop: str | None = None
    broken_link: tuple[str, str] | None = None
    broken_by: str | None = None
    src: str | None = None
    sport: int | None = None
    dport: int | None = None
    seq: int | None = None
    proto: int | None = None
    elfn: bool | None = None
    repairing: bool | None = None
    predicted: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NeighbourUp:
    neighbour: str
    mac: str | None = None
    signal_dbm: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NeighbourDown:
    """``silent_s``: how long before this the neighbour was last heard (link sensing
    declares a silent neighbour down seconds after it stopped working)."""

    neighbour: str
    mac: str | None = None
    reason: str | None = None
    silent_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictedFailure:
    """Atra RFP (Anantharaman et al. section III-B): the link to ``neighbour`` is
    expected to fail in ``eta_s`` seconds, its power falling ``slope_db_per_s``."""

    neighbour: str
    signal_dbm: float
    slope_db_per_s: float
    eta_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Erdn:
    """TCP-BuS (Kim, Toh & Choi IV-B), at the source: the route of this flow broke at
    ``pivot``; ``seq`` is the sequence number at the head of the pivot's queue."""

    dst: str
    src: str
    sport: int
    dport: int
    seq: int
    pivot: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Ersn:
    """TCP-BuS (Kim, Toh & Choi IV-C), at the source: ``pivot`` repaired the route;
    ``last_ack`` is the receiver's last acknowledgement the pivot saw."""

    dst: str
    src: str
    sport: int
    dport: int
    last_ack: int
    pivot: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PathSwitch:
    """SMR backup paths (Lim, Xu & Gerla section 3): traffic to ``dst`` moved from one
    path to another for ``reason`` (link-broken, predicted-failure, shorter-reply)."""

    dst: str
    from_path: tuple[str, ...] | None
    to_path: tuple[str, ...]
    reason: str


Event = (
    RouteUp | RouteDown | NeighbourUp | NeighbourDown | PredictedFailure | Erdn | Ersn | PathSwitch
)

# The wire name of each event type.
NAMES: dict[type, str] = {
    RouteUp: "route-up",
    RouteDown: "route-down",
    NeighbourUp: "neighbour-up",
    NeighbourDown: "neighbour-down",
    PredictedFailure: "predicted-failure",
    Erdn: "erdn",
    Ersn: "ersn",
    PathSwitch: "path-switch",
}
TYPES: dict[str, type] = {v: k for k, v in NAMES.items()}


def name_of(ev: Event) -> str:
    return NAMES[type(ev)]


def fields_of(ev: Event) -> dict[str, Any]:
    """The event's fields without the ones that are None (tuples become lists)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(ev):  # type: ignore[arg-type]
        v = getattr(ev, f.name)
        if v is not None:
            out[f.name] = list(v) if isinstance(v, tuple) else v
    return out


def to_wire(ev: Event, time: float | None = None) -> dict[str, Any]:
    """The JSON-lines object for ``ev``, stamped with ``time`` (default: now, unix)."""
    return {"event": name_of(ev), "time": _time.time() if time is None else time} | fields_of(ev)


@cache
def _adapter(cls: type) -> TypeAdapter:
    return TypeAdapter(cls)


def from_wire(obj: Mapping[str, Any]) -> Event:
    """Parse one event object; unknown fields (and ``time``, ``missed``) are ignored.

    Raises :class:`EventError` naming the event and the field that is wrong.
    """
    if not isinstance(obj, Mapping):
        raise EventError(f"an event is a JSON object, not {type(obj).__name__}")
    name = obj.get("event")
    cls = TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise EventError(f"unknown event {name!r}")
    known = {f.name for f in dataclasses.fields(cls)}
    try:
        return _adapter(cls).validate_python({k: v for k, v in obj.items() if k in known})
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "?"
        raise EventError(f"{name}: {where}: {err['msg']}") from None
