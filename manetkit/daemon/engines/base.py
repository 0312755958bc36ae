"""The API between a routing engine and the daemon's asyncio shell: the core contract
of docs/style.md (aioquic's shape).

An engine never touches a socket or a clock. The shell feeds it inputs stamped with
``now`` (seconds, monotonic), then drains :meth:`RoutingEngine.next_event` until it
returns None, and re-arms one timer at :meth:`RoutingEngine.get_timer`.

Inputs
  receive_frame(now, packet, src_mac, rssi_dbm)  an IPv4 packet that arrived on the radio,
                                                 addressed to our MAC or broadcast/multicast
  overhear_frame(now, packet, src_mac, rssi_dbm) an IPv4 packet another node sent to a third
                                                 node, heard because the radio is promiscuous;
                                                 only for engines with ``wants_overheard``
  send_local(now, packet)                        an IPv4 packet the node's apps sent (TUN)
  link_event(now, event)                         LinkUp / LinkDown / TxFailed / SignalSample /
                                                 BeaconHeard / TxReport
  handle_timer(now)                              the deadline from get_timer() has passed
  rediscover(now, dst)                           optional: ask for a route to ``dst`` now
                                                 (the event socket's ``discover`` command)
Outputs (:data:`Output`, drained with ``next_event()``)
  SendFrame(next_hop, packet)   put a packet on the air to one neighbour (or broadcast)
  Deliver(packet)               hand a packet to the local stack (write to TUN)
  Notify(event)                 a typed event (manetkit.events) for the event socket
  Dropped(reason, packet)       a packet the engine gave up on (counted by reason)

Overheard frames (RFC 4728 8.4.4's "promiscuous receive mode") are for learning only:
an engine must never forward, deliver or answer them as if they were addressed to it;
it may update its caches and send its own control packets (DSR's gratuitous route
reply). The shell turns the radio promiscuous only for an engine whose class sets
``wants_overheard = True``, and otherwise drops such frames (counter ``not_for_us``).

Next hops are mesh IPv4 addresses; the shell maps them to MACs through the shared
:class:`manetkit.daemon.neighbours.NeighbourTable`, which engines fill as they learn
which address sent a frame (e.g. the previous hop of a DSR source route).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import Any

from manetkit.daemon.wire import ipv4
from manetkit.events import Event, fields_of, name_of

# --- counters --------------------------------------------------------------------

# The engines' counters that each count a routing control packet put on the air (sent
# or forwarded), for control-overhead figures (``manetkit experiment``, ``bench smr``,
# ``bench atra``). Disjoint, so they add up: DSR's ``replies-sent`` already includes its
# cache, gratuitous and SMR's extra replies (``cache-replies``, ``grat-replies``,
# ``smr-extra-replies`` say why a reply went out) and ``errors-sent`` Atra's proactive
# errors; AODV's ``rerr-sent`` includes Atra's predicted RERRs.
CONTROL_COUNTERS: tuple[str, ...] = (
    # DSR / SMR (RFC 4728 route request, reply, error; TCP-BuS's ERSN)
    "requests-sent", "requests-forwarded", "replies-sent", "errors-sent",
    "control-forwarded", "ersn-sent",
    # AODV (RFC 3561 RREQ, RREP, RERR, RREP-ACK, HELLO)
    "rreq-sent", "rreq-forwarded", "rrep-sent", "rrep-sent-intermediate",
    "rrep-sent-gratuitous", "rrep-forwarded", "rrep-ack-sent", "rerr-sent", "hello-sent",
)  # fmt: skip


# --- outputs ---------------------------------------------------------------------
# SendFrame and Deliver are made per packet: not frozen, which would cost ~0.3 us more
# per packet (frozen dataclasses set their fields through object.__setattr__).


@dataclass(slots=True)
class SendFrame:
    """Transmit ``packet`` (a whole IPv4 packet) to ``next_hop``; None = link broadcast."""

    next_hop: IPv4Address | None
    packet: bytes


@dataclass(slots=True)
class Deliver:
    """Hand ``packet`` to the local IP stack (it is addressed to this node)."""

    packet: bytes


@dataclass(frozen=True, slots=True)
class Notify:
    """An event for the event socket: one of the typed events of :mod:`manetkit.events`."""

    event: Event

    @property
    def name(self) -> str:
        """The event's wire name (``route-down``, ...)."""
        return name_of(self.event)

    @property
    def fields(self) -> dict[str, Any]:
        """The event's fields as they go on the wire (None fields left out)."""
        return fields_of(self.event)


@dataclass(frozen=True, slots=True)
class Dropped:
    """A packet the engine gave up on; ``reason`` is a short counter name."""

    reason: str
    packet: bytes


Output = SendFrame | Deliver | Notify | Dropped


class Outbox:
    """One engine's outputs, in the order its components produced them, until the shell
    drains them. Every component of an engine writes to the same outbox, so the order
    of outputs is the order of the protocol's decisions."""

    __slots__ = ("queue", "counters")

    def __init__(self, counters: Counter[str]) -> None:
        self.queue: deque[Output] = deque()
        self.counters = counters  # the engine's counters (``drop-<reason>``)

    def send(self, next_hop: IPv4Address | None, packet: bytes) -> None:
        self.queue.append(SendFrame(next_hop, packet))

    def deliver(self, packet: bytes) -> None:
        self.queue.append(Deliver(packet))

    def notify(self, event: Event) -> None:
        self.queue.append(Notify(event))

    def drop(self, reason: str, packet: bytes | bytearray | memoryview) -> None:
        """Give up on ``packet``: counted as ``drop-<reason>``."""
        self.counters[f"drop-{reason}"] += 1
        self.queue.append(Dropped(reason, bytes(packet)))

    def sent_since(self, mark: int) -> list[SendFrame]:
        """The frames sent since the queue held ``mark`` outputs (``len(queue)``)."""
        return [a for a in list(self.queue)[mark:] if isinstance(a, SendFrame)]

    def next_event(self) -> Output | None:
        return self.queue.popleft() if self.queue else None


# --- link-sensing inputs ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LinkUp:
    neighbour: IPv4Address
    signal_dbm: float | None = None


@dataclass(frozen=True, slots=True)
class LinkDown:
    """The link sensing backend lost the neighbour (after its hysteresis)."""

    neighbour: IPv4Address
    reason: str = "lost"


@dataclass(frozen=True, slots=True)
class TxFailed:
    """The MAC gave up on a unicast frame to ``neighbour`` (802.11 retry limit).

    ``packet`` is the IPv4 packet that failed when the backend can return it (the lab
    radio does), so DSR can salvage it (RFC 4728 8.4.3) and ELFN can report it.
    """

    neighbour: IPv4Address
    packet: bytes | None = None


@dataclass(frozen=True, slots=True)
class SignalSample:
    neighbour: IPv4Address
    signal_dbm: float
    at: float


@dataclass(frozen=True, slots=True)
class BeaconHeard:
    """A neighbour beacon (``daemon/linksense/hello.py``) came from ``neighbour``: its
    sequence number and the interval it announces (link quality's hello history)."""

    neighbour: IPv4Address
    seq: int
    interval_s: float


@dataclass(frozen=True, slots=True)
class TxReport:
    """The station table's transmit counters for ``neighbour`` between two polls:
    802.11 attempts (first tries and retries) and frames delivered (ACKed)."""

    neighbour: IPv4Address
    attempts: int
    delivered: int


LinkEvent = LinkUp | LinkDown | TxFailed | SignalSample | BeaconHeard | TxReport


class RoutingEngine(ABC):
    """Base class: keeps the outputs (:class:`Outbox`) and the counters; subclasses
    implement the protocol."""

    name: str = "?"
    # True: the shell makes the radio promiscuous and feeds overhear_frame.
    wants_overheard: bool = False
    # True: the shell feeds BeaconHeard and TxReport (link quality's observations).
    wants_link_reports: bool = False
    # Which of this engine's frames are routing control (its wire's test), for the
    # shell's control-bytes counters; None: the engine sends no control of its own.
    is_control_frame: Callable[[bytes], bool] | None = None

    def __init__(self) -> None:
        self.counters: Counter[str] = Counter()
        self.out = Outbox(self.counters)

    # -- output side
    def next_event(self) -> Output | None:
        """The next output, oldest first; None when all were taken."""
        return self.out.next_event()

    # -- input side
    @abstractmethod
    def receive_frame(
        self, now: float, packet: bytes, src_mac: bytes | None = None, rssi_dbm: float | None = None
    ) -> None: ...

    def overhear_frame(  # noqa: B027 - an optional input: the default ignores it
        self, now: float, packet: bytes, src_mac: bytes | None = None, rssi_dbm: float | None = None
    ) -> None:
        """A unicast between two other nodes that the radio overheard: learn, never relay.

        Called only when ``wants_overheard`` is True; the default ignores it.
        """

    @abstractmethod
    def send_local(self, now: float, packet: bytes) -> None: ...

    @abstractmethod
    def link_event(self, now: float, event: LinkEvent) -> None: ...

    @abstractmethod
    def handle_timer(self, now: float) -> None: ...

    def rediscover(self, now: float, dst: IPv4Address) -> bool:
        """Send a fresh route request for ``dst`` now, if a discovery is pending or no
        route exists (rate-limited); True if one went out.

        An ELFN probe calls this through the event socket (Holland & Vaidya section 6:
        a probe tests, and so re-finds, the route). The default does nothing.
        """
        return False

    @abstractmethod
    def get_timer(self) -> float | None:
        """The earliest time handle_timer must be called, or None."""

    @abstractmethod
    def status(self) -> dict[str, Any]:
        """Routes / cached paths and counters, JSON-serialisable, for ``manetkit status``."""


def failed_packet_fields(packet: bytes) -> dict[str, Any]:
    """ELFN fields of the packet that hit a break (Holland & Vaidya section 4).

    src/dst always; sport/dport/seq when the packet is TCP.
    """
    try:
        h = ipv4.parse(packet)
    except ipv4.MalformedPacket:
        return {}
    out: dict[str, Any] = {"src": str(h.src), "dst": str(h.dst), "proto": h.protocol}
    if h.protocol == ipv4.PROTO_TCP:
        pss = ipv4.tcp_ports_seq(packet[h.ihl :])
        if pss:
            out["sport"], out["dport"], out["seq"] = pss
    return out
