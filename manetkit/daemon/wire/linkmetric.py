"""Link-quality costs carried in route discovery: a DSR option and an AODV extension.

Pack and parse only (docs/linkquality.md "On the air").

**DSR: LINK METRICS, option type 53** (high-order bits ``00``: a node that does not know
it skips it and forwards the packet unchanged, RFC 4728 6.1; IANA assigned none of
48-63), as LQSR carries its link metrics in DSR's Route Request and Route Reply
(Draves, Padhye & Zill, MobiCom 2004, section 3). It rides beside a Route Request or a
Route Reply and lists one cost per link of the route, in order:

- Route Request: the links from the initiator (the IP source) through the route
  record's addresses; each node that forwards the request appends the cost of the link
  it received it over (measured at its end). A node that forwarded it without
  appending (one that does not know the option) leaves a gap: the next node that knows
  it fills the gap with UNKNOWN before appending, so costs stay aligned with links;
- Route Reply: the links from the reply's IP destination (the initiator) through the
  reply's addresses to the target.

Body, after manetkit's 2-byte shim ``00 len(body)`` (so Wireshark's DSR dissector reads
the body as one PadN, as for the ELFN options: :mod:`manetkit.daemon.wire.manet_ext`)::

    kind u8 (1 = ETX) | reserved u8 (0) | cost u16 * n    (network byte order)

A cost is ETX x 100 (1.00 .. 655.34); ``0xFFFF`` = unknown.

**AODV: PATH METRIC, extension type 247** (RFC 3561 section 9's format: type, length,
data; RFC 3561 defines only type 1, manetkit's own take 248-253 from the top of the
space, this one the next below), after a RREQ or a RREP, as the AODV-ETX proposals
carry an accumulated metric::

    kind u8 (1 = ETX) | counted u8 | cost u32

``cost`` (ETX x 100) is the path's cost from the message's originator (RREQ) or
destination (RREP) to the node that sent it; ``counted`` is how many of the message's
hops it covers: a node that forwarded the message without adding its link (one that
does not know the extension) leaves ``counted`` below the hop count, and the next node
adds the unknown cost for each missing hop. An AODV node ignores extensions it does
not know (RFC 3561 section 9).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from manetkit.daemon.wire.dsr import UnknownOption

DSR_OPT_LINK_METRICS = 53
AODV_EXT_PATH_METRIC = 247
KIND_ETX = 1
UNKNOWN = 0xFFFF
SCALE = 100  # costs on the air are ETX x 100
MAX_WIRE_COST = (UNKNOWN - 1) / SCALE

_DSR_HEAD = struct.Struct("!BB")
_COST = struct.Struct("!H")
_AODV = struct.Struct("!BBI")


class MalformedMetric(ValueError):
    """A LINK METRICS option or PATH METRIC extension of the wrong length or kind."""


def _to_wire(cost: float) -> int:
    return max(SCALE, min(UNKNOWN - 1, round(cost * SCALE)))


@dataclass(frozen=True, slots=True)
class LinkMetrics:
    """One cost per link of a DSR route (None: unknown)."""

    costs: tuple[float | None, ...]
    kind: int = KIND_ETX

    def pack(self) -> bytes:
        body = _DSR_HEAD.pack(self.kind, 0)
        return body + b"".join(
            _COST.pack(UNKNOWN if c is None else _to_wire(c)) for c in self.costs
        )

    @classmethod
    def parse(cls, body: bytes) -> LinkMetrics:
        if len(body) < _DSR_HEAD.size or (len(body) - _DSR_HEAD.size) % _COST.size:
            raise MalformedMetric(f"LINK METRICS body of {len(body)} bytes")
        kind, _ = _DSR_HEAD.unpack_from(body)
        if kind != KIND_ETX:
            raise MalformedMetric(f"LINK METRICS of unknown kind {kind}")
        raw = [_COST.unpack_from(body, i)[0] for i in range(_DSR_HEAD.size, len(body), _COST.size)]
        return cls(tuple(None if v == UNKNOWN else v / SCALE for v in raw), kind)

    def aligned(self, links: int) -> tuple[float | None, ...]:
        """The costs of the first ``links`` links: padded with unknown when a node on
        the way did not append its own, cut when the list is longer than the route."""
        c = self.costs[:links]
        return c + (None,) * (links - len(c))


def dsr_option(metrics: LinkMetrics) -> UnknownOption:
    """LINK METRICS as a DSR option (type, length, the 2-byte shim, the body)."""
    body = metrics.pack()
    return UnknownOption(DSR_OPT_LINK_METRICS, bytes((0, len(body))) + body)


def from_dsr(data: bytes) -> LinkMetrics:
    """The option's data (shim included) as :class:`LinkMetrics`."""
    if len(data) < 2 or data[0] != 0 or data[1] != len(data) - 2:
        raise MalformedMetric("LINK METRICS without its 2-byte shim")
    return LinkMetrics.parse(data[2:])


def find_dsr(options: Sequence[object]) -> LinkMetrics | None:
    """The LINK METRICS among a DSR header's options (parsed), if any."""
    for opt in options:
        if isinstance(opt, UnknownOption) and opt.type == DSR_OPT_LINK_METRICS:
            return from_dsr(opt.data)
    return None


@dataclass(frozen=True, slots=True)
class PathMetric:
    """An AODV message's accumulated path cost over ``counted`` of its hops."""

    cost: float
    counted: int
    kind: int = KIND_ETX

    def pack(self) -> bytes:
        return _AODV.pack(self.kind, min(self.counted, 255), round(self.cost * SCALE))

    @classmethod
    def parse(cls, data: bytes) -> PathMetric:
        if len(data) != _AODV.size:
            raise MalformedMetric(f"PATH METRIC body of {len(data)} bytes, expected 6")
        kind, counted, cost = _AODV.unpack(data)
        if kind != KIND_ETX:
            raise MalformedMetric(f"PATH METRIC of unknown kind {kind}")
        return cls(cost / SCALE, counted, kind)


def aodv_extension(metric: PathMetric) -> tuple[int, bytes]:
    """``(type, data)`` for an AODV message's ``extensions`` list."""
    return AODV_EXT_PATH_METRIC, metric.pack()


def find_aodv(extensions: Sequence[tuple[int, bytes]]) -> PathMetric | None:
    for t, data in extensions:
        if t == AODV_EXT_PATH_METRIC:
            return PathMetric.parse(data)
    return None


def without_aodv(extensions: Sequence[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """The extensions without PATH METRIC (to append an updated one)."""
    return [(t, d) for t, d in extensions if t != AODV_EXT_PATH_METRIC]
