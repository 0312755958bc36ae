"""The daemon's status: its typed model, its wire form, and the one client that reads it.

A daemon answers ``{"cmd": "status"}`` on its event socket (docs/daemon.md, "Event
socket") with ``{"ok": true, "status": {...}}``; ``manetkit status`` prints it, and the
benches, the experiment plug-ins, the lab map and the tests read it. The daemon builds a
:class:`DaemonStatus` and writes it with :meth:`~DaemonStatus.to_wire`; every reader gets
one back from :func:`fetch_status` (or, on a connection it already holds, from
:func:`parse_reply`) and reads attributes, never nested dicts.

The JSON field names are the attribute names (external tools read them); counters keep
their own names as dict keys (``data-forwarded``, ``rx_overheard``). The engine's part
(:data:`EngineStatus`) is chosen by its ``protocol``: :class:`DsrStatus`,
:class:`SmrStatus`, :class:`AodvStatus` or :class:`StaticStatus`. A field a reader does
not know is kept (``model_extra``) and written back by ``to_wire``, so an older reader
still reads a newer daemon; :func:`undeclared` lists such fields, and the tests require
none in what today's daemon writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from manetkit.jsonlines import request

Counts = dict[str, int]


class StatusError(ValueError):
    """No status could be read: nobody answers on the socket, the daemon refused, or the
    reply does not follow the model (the message names the socket and the reason). A
    ValueError, so a daemon whose engine broke the model answers ``status`` with that
    error (``{"ok": false, "error": ...}``) rather than dropping the connection."""


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


# --- the daemon's own parts ------------------------------------------------------------


class Neighbour(_Wire):
    """One row of the neighbour table, with what link sensing says of it."""

    address: str
    mac: str
    up: bool
    signal_dbm: float | None = None
    last_heard_s: float | None = None  # None: never heard (a configured neighbour)
    tx_failed: int | None = None  # the radio's station table; None without one


class SendBufferStatus(_Wire):
    """The packets waiting for a route (the engine's send buffer, RFC 4728 8.2.1)."""

    packets: int
    limit: int
    timeout_s: float | None = None
    destinations: Counts = Field(default_factory=dict)  # destination -> packets waiting
    drops: Counts = Field(default_factory=dict)  # reason -> packets dropped


class Flows(_Wire):
    """Per address ``(packets, bytes)``: what the node's apps sent to it through
    ``mesh0`` (``originated``) and what the node delivered from it (``delivered``)."""

    originated: dict[str, tuple[int, int]] = Field(default_factory=dict)
    delivered: dict[str, tuple[int, int]] = Field(default_factory=dict)


class DaemonCounters(_Wire):
    dataplane: Counts = Field(default_factory=dict)  # frames and bytes, malformed, not for us
    drops: Counts = Field(default_factory=dict)  # the shell's drops by reason
    shell: Counts = Field(default_factory=dict)  # control frames/bytes sent, hellos ...
    events: Counts = Field(default_factory=dict)  # the event socket's server
    beacons_sent: int = 0
    links_evicted: int = 0
    hello_stations_evicted: int = 0
    static_neighbour_remaps_refused: int = 0
    auth: Counts | None = None  # None: authentication off


# --- the engines' parts ----------------------------------------------------------------


class Bound(_Wire):
    """A bounded table (docs/security.md, "Bounded state"): entries, bound, evictions."""

    size: int
    limit: int
    evicted: int


class BusStatus(_Wire):
    """TCP-BuS (Kim, Toh & Choi): packets held at pivots, notices not yet echoed."""

    holds: int
    held_packets: int
    pending_notices: int
    counters: Counts = Field(default_factory=dict)


class AtraStatus(_Wire):
    """Atra (Anantharaman et al.): which mechanisms are on, the failure predictor's
    scoring, the route errors it sent and the flows SRP pinned."""

    rfp: bool
    pre: bool
    srp: bool
    predictions: int = 0
    hits: int = 0
    false_alarms: int = 0
    breaks_not_predicted: int = 0
    predicted_errors_sent: int = 0
    proactive_errors_sent: int = 0
    rreq_suppressed: int = 0
    predicted_switches: int = 0
    rediscoveries: int = 0
    rediscoveries_expired: int = 0
    pinned_flows: int = 0
    pinned_acks: int = 0
    open_predictions: list[str] = Field(default_factory=list)  # neighbours
    avoided_links: list[tuple[str, str]] = Field(default_factory=list)


class LinkQualityLink(_Wire):
    neighbour: str
    signal_dbm: float | None = None  # smoothed
    slope_db_per_s: float | None = None
    admitted: bool | None = None
    etx: float | None = None
    beacons: tuple[int, int] | None = None  # (heard, expected) in the hello window
    failures: int = 0


class LinkQualityStatus(_Wire):
    """Link quality (when the engine measures it): admission, the path metric, the veto, and
    what the estimator holds per link."""

    admission: bool
    metric: str
    veto: bool
    links: list[LinkQualityLink] = Field(default_factory=list)
    bounds: dict[str, Bound] = Field(default_factory=dict)
    learnt_costs: int | None = None


class _EngineStatus(_Wire):
    protocol: str
    counters: Counts = Field(default_factory=dict)

    def routed(self) -> set[str]:
        """The destinations the engine holds a usable route to now."""
        raise NotImplementedError

    def has_route(self, dst: str) -> bool:
        return dst in self.routed()


class StaticRoute(_Wire):
    dst: str
    next_hop: str
    up: bool


class StaticStatus(_EngineStatus):
    protocol: Literal["static"]
    routes: list[StaticRoute] = Field(default_factory=list)

    def routed(self) -> set[str]:
        return {r.dst for r in self.routes if r.up}


class OnDemandStatus(_EngineStatus):
    """What DSR, SMR and AODV all report."""

    address: str
    send_buffer: Counts = Field(default_factory=dict)  # destination -> packets waiting
    send_buffer_drops: Counts = Field(default_factory=dict)
    bounds: dict[str, Bound] = Field(default_factory=dict)
    bus: BusStatus
    atra: AtraStatus | None = None  # None: Atra off
    link_quality: LinkQualityStatus | None = None  # None: link quality off


class DsrPath(_Wire):
    """A route cache entry (RFC 4728 4.1): the whole source route, this node first."""

    dst: str
    next_hop: str
    hops: int
    path: list[str]
    age_s: float
    idle_s: float


class DsrDiscovery(_Wire):
    """A route discovery under way (RFC 4728 8.2.1: attempts and back-off)."""

    target: str
    attempts: int
    since_s: float
    next_in_s: float


class SourceRouteStatus(OnDemandStatus):
    """DSR's parts, which SMR shares."""

    paths: list[DsrPath] = Field(default_factory=list)
    discoveries: list[DsrDiscovery] = Field(default_factory=list)
    request_table: dict[str, list[int]] = Field(default_factory=dict)  # initiator -> ids

    def routed(self) -> set[str]:
        return {p.dst for p in self.paths}

    def path_to(self, dst: str) -> list[str] | None:
        """The source route to ``dst`` that would be used (the shortest cached)."""
        return next((p.path for p in self.paths if p.dst == dst), None)


class DsrStatus(SourceRouteStatus):
    protocol: Literal["dsr"]


class SmrSettings(_Wire):
    mode: str
    paths: int
    rediscover: str
    max_path_age_s: float | None = None
    after_all_broken: str


class SmrRoute(_Wire):
    """One path of a destination's SMR path set (Lee & Gerla): the primary or a backup."""

    dst: str
    role: Literal["primary", "backup"]
    hops: int
    age_s: float
    path: list[str]


class SmrStatus(SourceRouteStatus):
    protocol: Literal["smr"]
    smr: SmrSettings
    multipath: list[SmrRoute] = Field(default_factory=list)

    def routed(self) -> set[str]:
        return {r.dst for r in self.multipath} | super().routed()

    def path_to(self, dst: str) -> list[str] | None:
        """The primary path of ``dst``'s path set, else DSR's cached route."""
        prim = next((r.path for r in self.multipath if r.dst == dst and r.role == "primary"), None)
        return prim or super().path_to(dst)


class AodvRoute(_Wire):
    """A route table entry (RFC 3561 section 2)."""

    dst: str
    next_hop: str
    hops: int
    seq: int | None = None  # None: no valid destination sequence number
    state: Literal["valid", "invalid", "repairing"]
    lifetime_s: float
    precursors: list[str] = Field(default_factory=list)


class AodvDiscovery(_Wire):
    """An expanding ring search under way (RFC 3561 6.4)."""

    target: str
    ttls: list[int]
    retries: int
    repair: bool
    since_s: float
    next_in_s: float


class AodvStatus(OnDemandStatus):
    protocol: Literal["aodv"]
    seq: int
    routes: list[AodvRoute] = Field(default_factory=list)
    discoveries: list[AodvDiscovery] = Field(default_factory=list)
    blacklist: list[str] = Field(default_factory=list)

    def routed(self) -> set[str]:
        """RFC 3561 section 2: valid routes only."""
        return {r.dst for r in self.routes if r.state == "valid"}

    def next_hop(self, dst: str) -> str | None:
        """The next hop of the valid route to ``dst``."""
        return next((r.next_hop for r in self.routes if r.dst == dst and r.state == "valid"), None)


EngineStatus = Annotated[
    DsrStatus | SmrStatus | AodvStatus | StaticStatus, Field(discriminator="protocol")
]
_ENGINE = TypeAdapter(EngineStatus)


class DaemonStatus(_Wire):
    """A daemon's whole status (``{"cmd": "status"}``'s ``status``)."""

    address: str
    protocol: str
    tun: str
    radio_interface: str
    link_sensing: str
    uptime_s: float
    neighbours: list[Neighbour] = Field(default_factory=list)
    engine: EngineStatus
    send_buffer: SendBufferStatus
    flows: Flows = Field(default_factory=Flows)
    counters: DaemonCounters = Field(default_factory=DaemonCounters)

    @classmethod
    def from_wire(cls, obj: Any) -> DaemonStatus:
        """Parse the wire form; ``StatusError`` names the first field that is wrong."""
        try:
            return cls.model_validate(obj)
        except ValidationError as exc:
            raise StatusError(f"daemon status: {_first_error(exc)}") from None

    def to_wire(self) -> dict[str, Any]:
        """The JSON object: the fields that were given, unknown ones included."""
        return self.model_dump(mode="json", exclude_unset=True)

    def neighbour(self, address: str) -> Neighbour | None:
        return next((n for n in self.neighbours if n.address == address), None)

    def up_neighbours(self) -> set[str]:
        """The addresses of the neighbours whose link is up."""
        return {n.address for n in self.neighbours if n.up}

    @property
    def atra(self) -> AtraStatus | None:
        """The engine's Atra part (None: Atra off, or a static engine)."""
        return self.engine.atra if isinstance(self.engine, OnDemandStatus) else None


def engine_status(obj: Any) -> EngineStatus:
    """An engine's ``status()`` as its typed model (the daemon validates it this way)."""
    try:
        return _ENGINE.validate_python(obj)
    except ValidationError as exc:
        raise StatusError(f"engine status: {_first_error(exc)}") from None


def parse_reply(reply: dict[str, Any], socket: str | Path = "the event socket") -> DaemonStatus:
    """The status in a daemon's reply to ``{"cmd": "status"}``."""
    if not reply.get("ok"):
        raise StatusError(f"the daemon on {socket} refused status: {reply.get('error')}")
    try:
        return DaemonStatus.from_wire(reply.get("status"))
    except StatusError as exc:
        raise StatusError(f"{socket}: {exc}") from None


def fetch_status(socket: str | Path, timeout: float = 3.0) -> DaemonStatus:
    """Ask the daemon on ``socket`` (its event socket) for its status.

    Raises :class:`StatusError` when nobody answers within ``timeout`` s, the daemon
    refuses, or the reply does not follow the model."""
    try:
        reply = request(socket, {"cmd": "status"}, timeout)
    except (OSError, ValueError) as exc:  # ConnectionError is an OSError
        raise StatusError(f"no daemon answers on {socket}: {exc}") from None
    return parse_reply(reply, socket)


def undeclared(model: BaseModel, at: str = "") -> list[str]:
    """The fields of ``model`` and its parts that the model does not declare (kept in
    ``model_extra``), as dotted paths: what a reader would have to index by hand."""
    out = [f"{at}{k}" for k in (model.model_extra or {})]
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, dict):
            parts = [(f"{name}[{k!r}]", v) for k, v in value.items()]
        elif isinstance(value, list):
            parts = [(f"{name}[{i}]", v) for i, v in enumerate(value)]
        else:
            parts = [(name, value)]
        for where, v in parts:
            if isinstance(v, BaseModel):
                out += undeclared(v, f"{at}{where}.")
    return out


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(the object)"
    return f"{where}: {err['msg']}"
