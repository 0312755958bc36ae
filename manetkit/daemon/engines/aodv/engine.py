"""AODV routing engine, sans-I/O, per RFC 3561 section 6.

The engine never touches a socket or a clock (see ``engines.base``). What it implements:

- 6.1  own sequence number: incremented before a route discovery and, as destination,
       raised to the requested value before a RREP.
- 6.2  route table entries: (dest seq + valid flag, hops, next hop, precursors,
       lifetime, state). An entry is replaced only by fresher information: a newer
       sequence number, the same one with fewer hops, or when the entry's number is
       unknown or the entry is invalid. Data use refreshes the lifetime of the routes to
       the destination, the source and the two next hops.
- 6.3/6.4  RREQ origination with the expanding ring search (TTL_START, +TTL_INCREMENT,
       beyond TTL_THRESHOLD NET_DIAMETER), RING_TRAVERSAL_TIME waits, then RREQ_RETRIES
       network-wide attempts with binary exponential backoff; RREQ_RATELIMIT.
- 6.5  RREQ processing: route to the previous hop, duplicate suppression by
       (originator, RREQ ID) for PATH_DISCOVERY_TIME, reverse route, rebroadcast.
- 6.6  RREP by the destination, by an intermediate node with a fresh enough route, and
       the gratuitous RREP to the destination when the G flag is set.
- 6.7  RREP processing: forward route, precursor lists, forwarding to the originator.
- 6.8  RREP-ACK (optional A flag) and the blacklist of unidirectional neighbours.
- 6.9  Hello messages (RREP, TTL 1) and neighbour loss after
       ALLOWED_HELLO_LOSS * HELLO_INTERVAL.
- 6.11 RERR on link break, on data without a route, and on a received RERR, to the
       precursors (unicast to a single one, else broadcast TTL 1); RERR_RATELIMIT.
- 6.12 local repair when the break is within MAX_REPAIR_TTL hops of the destination
       (packets buffered meanwhile; RERR with N when the new route is longer).

Choices RFC 3561 leaves open, made for real Linux laptops:

- Control messages are re-originated at every hop (as AODV-UU does): IP source = the
  transmitting node, so ``ip.src`` names the neighbour that sent a control packet, and
  every control packet teaches the shared NeighbourTable the neighbour's MAC.
- Any invalidation (break or lifetime expiry) increments the destination sequence
  number (6.1 allows it "when the path expires or breaks"), so a node whose route
  expired never accepts a route back through an upstream node that still holds the old
  number: no loop (AODV-UU does the same).
- A unicast frame that 802.11 gave up on (``TxFailed``) is a link break, like
  ``LinkDown``; the failed packet is re-buffered when this node is its source (TCP then
  sees a delay instead of a loss), buffered when the route is being repaired, and
  otherwise dropped as ``link-break``.
- Route lifetime expiry is silent (no route-down): an idle route is not a break, and
  the proxy must not freeze a flow because of it.

The data path (``receive_frame``/``send_local`` for non-control packets) reads only the
destination bytes, does one dict lookup keyed by the 4-byte address, refreshes the
lifetimes and decrements the TTL in a bytearray: no parsing.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from typing import Any

from pydantic import ConfigDict, Field, model_validator

from manetkit import events as ev
from manetkit.daemon.engines.aodv.atra import AodvAtraHooks
from manetkit.daemon.engines.aodv.routes import (
    REPAIRING,
    VALID,
    Route,
    RouteState,
    RouteTable,
    seq_newer,
    seq_next,
)
from manetkit.daemon.engines.atra.config import AtraConfig
from manetkit.daemon.engines.atra.state import AtraState
from manetkit.daemon.engines.base import (
    Deliver,
    Dropped,
    LinkDown,
    LinkEvent,
    Notify,
    RoutingEngine,
    SendFrame,
    SignalSample,
    TxFailed,
    failed_packet_fields,
)
from manetkit.daemon.engines.shared.bus import (
    BusSettings,
    BusState,
    flow_from_fields,
    flow_key,
    tcp_fields,
)
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.sendbuffer import SendBuffer, SendBufferSettings
from manetkit.daemon.wire import aodv, ipv4
from manetkit.daemon.wire import manet_ext as mx

_BCAST_B = b"\xff\xff\xff\xff"
_INF = float("inf")
_CONTROL_TTL = 64  # unicast control travels one hop but is an ordinary IP packet
_K = 5  # RFC 3561 section 10: DELETE_PERIOD = K * max(ACTIVE_ROUTE_TIMEOUT, HELLO_INTERVAL)

# SendBuffer's reasons -> the engine's Dropped reasons.
_BUFFER_REASONS = {
    "timeout": "send-buffer-timeout",
    "full": "send-buffer-full",
    "full-destination": "send-buffer-full-destination",
}


class AodvConfig(SendBufferSettings, BusSettings):
    """AODV settings (YAML ``aodv:``). Defaults: RFC 3561 section 10. Times in ms."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    atra: AtraConfig = Field(
        default_factory=AtraConfig,
        description="Atra RFP (docs/atra.md); the daemon's top-level atra:",
    )

    active_route_timeout_ms: int = Field(
        3000, gt=0, description="an unused route stays valid this long (ACTIVE_ROUTE_TIMEOUT)"
    )
    allowed_hello_loss: int = Field(
        2, ge=1, le=100, description="hello intervals without a packet before a neighbour is lost"
    )
    hello_interval_ms: int = Field(
        1000, gt=0, description="period of Hello messages (HELLO_INTERVAL)"
    )
    net_diameter: int = Field(
        35, ge=1, le=255, description="max hops between two nodes; TTL of network-wide RREQs"
    )
    node_traversal_time_ms: int = Field(
        40, gt=0, description="estimated one-hop traversal time (NODE_TRAVERSAL_TIME)"
    )
    rreq_retries: int = Field(
        2, ge=0, le=16, description="network-wide RREQ retries before giving up (RREQ_RETRIES)"
    )
    rreq_ratelimit: int = Field(
        10, ge=1, description="max RREQs this node originates per second (RREQ_RATELIMIT)"
    )
    rerr_ratelimit: int = Field(
        10, ge=1, description="max RERRs this node sends per second (RERR_RATELIMIT)"
    )
    ttl_start: int = Field(1, ge=1, le=255, description="TTL of the first RREQ (TTL_START)")
    ttl_increment: int = Field(
        2, ge=1, le=255, description="TTL added per expanding-ring step (TTL_INCREMENT)"
    )
    ttl_threshold: int = Field(
        7, ge=1, le=255, description="beyond this TTL a RREQ goes network-wide (TTL_THRESHOLD)"
    )
    local_add_ttl: int = Field(
        2, ge=0, le=255, description="extra TTL of a local-repair RREQ (LOCAL_ADD_TTL)"
    )
    timeout_buffer: int = Field(
        2, ge=0, le=255, description="slack in RING_TRAVERSAL_TIME for congestion (TIMEOUT_BUFFER)"
    )
    hellos: bool = Field(
        True,
        description="send Hellos while on an active route and declare neighbours lost without them (6.9)",
    )
    local_repair: bool = Field(
        True, description="repair a break near the destination instead of reporting it (6.12)"
    )
    rrep_ack: bool = Field(
        False,
        description="ask for RREP-ACKs and blacklist neighbours that do not answer (6.8)",
    )
    gratuitous_rrep: bool = Field(
        False, description="set G in our RREQs: intermediate repliers also tell the destination"
    )
    destination_only: bool = Field(
        False, description="set D in our RREQs: only the destination may reply"
    )
    route_table_size: int = Field(
        1024,
        ge=1,
        le=1_000_000,
        description="route table entries; an invalid, else the soonest-expiring, is evicted",
    )
    rreq_seen_size: int = Field(
        4096,
        ge=1,
        le=1_000_000,
        description="(originator, RREQ ID) pairs remembered for duplicate detection (6.5)",
    )

    @model_validator(mode="after")
    def _ring(self) -> AodvConfig:
        if self.ttl_start > self.net_diameter:
            raise ValueError(f"ttl_start {self.ttl_start} exceeds net_diameter {self.net_diameter}")
        if self.ttl_threshold > self.net_diameter:
            raise ValueError(
                f"ttl_threshold {self.ttl_threshold} exceeds net_diameter {self.net_diameter}"
            )
        return self

    # -- derived values (RFC 3561 section 10), in ms
    @property
    def net_traversal_time_ms(self) -> int:
        return 2 * self.node_traversal_time_ms * self.net_diameter

    @property
    def path_discovery_time_ms(self) -> int:
        return 2 * self.net_traversal_time_ms

    @property
    def my_route_timeout_ms(self) -> int:
        return 2 * self.active_route_timeout_ms

    @property
    def delete_period_ms(self) -> int:
        return _K * max(self.active_route_timeout_ms, self.hello_interval_ms)

    @property
    def blacklist_timeout_ms(self) -> int:
        return self.rreq_retries * self.net_traversal_time_ms

    @property
    def next_hop_wait_ms(self) -> int:
        return self.node_traversal_time_ms + 10

    @property
    def max_repair_ttl(self) -> int:
        return int(0.3 * self.net_diameter)

    def ring_traversal_time_ms(self, ttl: int) -> int:
        return 2 * self.node_traversal_time_ms * (ttl + self.timeout_buffer)


@dataclass(slots=True)
class _Discovery:
    """A pending route discovery (6.4) or local repair (6.12) for one destination."""

    dst: IPv4Address
    ttl: int
    deadline: float
    retries: int = 0  # network-wide (TTL = NET_DIAMETER) attempts made after the first
    repair: bool = False
    old_hops: int = 0  # local repair: hop count of the broken route
    started: float = 0.0
    ttls: list[int] = field(default_factory=list)  # TTLs of the RREQs sent, for status
    waiting_ratelimit: bool = False


class AodvEngine(AodvAtraHooks, RoutingEngine):
    name = "aodv"
    is_control_frame = staticmethod(aodv.is_control)  # UDP/654

    def __init__(
        self, address: IPv4Address, config: AodvConfig, neighbours: NeighbourTable
    ) -> None:
        super().__init__()
        self.address = address
        self.config = c = config
        self.neighbours = neighbours
        self._me_b = address.packed
        self.seq = 1  # own sequence number (6.1); 0 would mean "unknown"
        self._rreq_id = 0
        self._routes = RouteTable(c.route_table_size)
        self.send_buffer = SendBuffer.from_settings(c)
        self._discoveries: dict[IPv4Address, _Discovery] = {}
        self._seen: dict[tuple[IPv4Address, int], float] = {}  # (orig, RREQ ID) -> expiry
        self._blacklist: dict[IPv4Address, float] = {}
        self._ack_wait: dict[IPv4Address, float] = {}
        self._hello_from: dict[IPv4Address, tuple[float, float]] = {}  # last heard, window
        self._rreq_times: deque[float] = deque()
        self._rerr_times: deque[float] = deque()
        self._last_bcast = -_INF
        self._last_data = -_INF
        self.counters: Counter[str] = Counter()
        # Data-path counters as plain ints (cheaper than Counter on the hot path).
        self._forwarded = 0
        self._delivered = 0
        self._originated = 0
        # Times in seconds.
        self._art = c.active_route_timeout_ms / 1000
        self._ntt = c.net_traversal_time_ms / 1000
        self._pdt = c.path_discovery_time_ms / 1000
        self._delete = c.delete_period_ms / 1000
        self._blacklist_t = c.blacklist_timeout_ms / 1000
        self._hello_iv = c.hello_interval_ms / 1000
        self._nht = c.next_hop_wait_ms / 1000
        self._node_tt = c.node_traversal_time_ms / 1000
        self._next_hello = _INF if not c.hellos else 0.0
        # A lower bound of the earliest deadline; handle_timer recomputes it exactly.
        # Refreshing a lifetime only postpones a deadline, so the hot path never has to
        # touch it.
        self._deadline = self._next_hello
        self._now = 0.0  # time of the latest input, for status()
        # TCP-BuS (docs/elfn-bus.md): notices are understood, acknowledged and relayed
        # even with bus off; holding and pivot repair only with ``bus``.
        self._bus = BusState(c)
        self._bus_on = c.bus
        # Atra (docs/atra.md): hooks run only with a mechanism on.
        self._atra = AtraState(c.atra, address)
        self._atra_on = c.atra.enabled

    # ------------------------------------------------------------------ inputs
    def receive_frame(
        self, now: float, packet: bytes, src_mac: bytes | None = None, rssi_dbm: float | None = None
    ) -> None:
        self._now = now
        if len(packet) < 20 or packet[0] >> 4 != 4:
            self._malformed(packet, "not an IPv4 packet")
            return
        if packet[ipv4.PROTOCOL] == ipv4.PROTO_UDP and aodv.is_control(
            packet
        ):  # UDP first: data is mostly TCP
            dst = packet[ipv4.DST]
            if dst == self._me_b or dst == _BCAST_B:
                self._receive_control(now, packet, src_mac, rssi_dbm)
                return
        if src_mac is not None and self._hello_from:
            # 6.9: any packet from a neighbour counts as hearing it.
            nb = self.neighbours.address_of(src_mac)
            h = self._hello_from.get(nb) if nb is not None else None
            if h is not None:
                self._hello_from[nb] = (now, h[1])  # type: ignore[index]
        self._data(now, packet, True, src_mac)

    def send_local(self, now: float, packet: bytes) -> None:
        self._now = now
        if len(packet) < 20 or packet[0] >> 4 != 4:
            self._malformed(packet, "not an IPv4 packet")
            return
        self._originated += 1
        if self._atra_on:
            self._atra.sent_to(now, IPv4Address(packet[ipv4.DST]))
        self._data(now, packet, False, None)

    def link_event(self, now: float, event: LinkEvent) -> None:
        self._now = now
        if isinstance(event, LinkDown):
            self._link_break(now, event.neighbour, event.reason, None)
        elif isinstance(event, TxFailed):
            if event.packet is not None and aodv.is_control(event.packet):
                self._control_tx_failed(now, event.neighbour, event.packet)
            self._link_break(now, event.neighbour, "tx-failed", event.packet)
        elif isinstance(event, SignalSample) and self._atra_on:
            self._atra.handle_timer(now)  # scores predictions that timed out
            self._atra_signal(now, event.neighbour, event.signal_dbm)
        # LinkUp teaches nothing AODV can use (no sequence number).
        if self._atra_on and isinstance(event, LinkDown | TxFailed):
            self._atra.link_failed(now, event.neighbour)

    def handle_timer(self, now: float) -> None:
        self._now = now
        if now < self._deadline:
            return
        self._expire_routes(now)
        for d in [d for d in self._discoveries.values() if d.deadline <= now]:
            self._discovery_timeout(now, d)
        for nb, t in list(self._ack_wait.items()):
            if t <= now:
                # 6.8: no RREP-ACK: the link towards nb is (probably) unidirectional.
                del self._ack_wait[nb]
                self._blacklist[nb] = now + self._blacklist_t
                self.counters["blacklisted"] += 1
        for nb, (last, window) in list(self._hello_from.items()):
            if last + window <= now:
                del self._hello_from[nb]
                self.counters["hello-loss"] += 1
                mac = self.neighbours.mac_of(nb)
                self._emit(
                    Notify(
                        ev.NeighbourDown(
                            neighbour=str(nb),
                            mac=mac.hex(":") if mac else None,
                            reason="hello-loss",
                        )
                    )
                )
                self._link_break(now, nb, "hello-loss", None)
        if now >= self._next_hello:
            self._hello_tick(now)
        if self.send_buffer.expire(now):
            self._drain_buffer_drops()
        if self._bus.pending or self._bus.holds:
            for nh, pkt in self._bus.due(now):
                self._emit(SendFrame(nh, pkt))
            for pkt in self._bus.expired(now):
                self.counters["drop-bus-hold-timeout"] += 1
                self._emit(Dropped("bus-hold-timeout", pkt))
        self._purge(now)
        self._deadline = self._compute_deadline()

    def get_timer(self) -> float | None:
        return None if self._deadline == _INF else self._deadline

    def rediscover(self, now: float, dst: IPv4Address) -> bool:
        """6.3: originate a new RREQ (new RREQ ID) for ``dst`` now, e.g. for an ELFN probe.

        Only when a discovery is pending or there is no valid route, and only within
        RREQ_RATELIMIT: a request over the limit is refused (False), never queued, so the
        pending discovery's own schedule stays as it was. The ring TTL and the retry
        count are kept and the next scheduled step is never postponed: a probing sender
        does not use up RREQ_RETRIES faster.
        """
        self._now = now
        if dst == self.address:
            return False
        d = self._discoveries.get(dst)
        r = self._routes.get(dst.packed)
        if d is None and r is not None and r.state == VALID:
            return False
        while self._rreq_times and self._rreq_times[0] + 1.0 <= now:
            self._rreq_times.popleft()
        if (d is not None and d.waiting_ratelimit) or len(
            self._rreq_times
        ) >= self.config.rreq_ratelimit:
            self.counters["rediscover-ratelimited"] += 1
            return False
        self.counters["rediscover-rreqs"] += 1
        if d is None:
            self._start_discovery(now, dst)
        else:
            due = d.deadline
            self._send_rreq(now, d)
            # An extra RREQ: it never postpones the discovery's own next step.
            if now < due < d.deadline:
                d.deadline = due
                self._deadline = self._compute_deadline()
        return True

    # ------------------------------------------------------------------ data path
    def _data(self, now: float, packet: bytes, from_radio: bool, src_mac: bytes | None) -> None:
        """Deliver, forward by next hop (6.2), buffer and discover, or report (6.11 ii)."""
        dst = packet[ipv4.DST]
        if dst == self._me_b:
            self._delivered += 1
            self._last_data = now
            self._actions.append(Deliver(packet))
            return
        if dst[0] >= 224 or dst == _BCAST_B:
            # Multicast/broadcast data: one hop only (no flooding in AODV).
            if from_radio:
                self._emit(Deliver(packet))
            else:
                self._emit(SendFrame(None, packet))
            return
        if from_radio:
            if packet[ipv4.TTL] <= 1:
                self.counters["drop-ttl-expired"] += 1
                self._emit(Dropped("ttl-expired", packet))
                return
            buf = bytearray(packet)
            ipv4.decrement_ttl(buf)
            packet = bytes(buf)
        if self._bus_on and self._bus_data(packet):
            return
        r = self._routes.get(dst)
        if r is not None and r.state is VALID:
            self._send_on(now, r, packet)
            return
        if (
            not from_radio
            or packet[ipv4.SRC] == self._me_b
            or (r is not None and r.state is REPAIRING)
        ):
            # Our own packet, or one waiting for a local repair: buffer it (6.3, 6.12).
            self._buffer(now, IPv4Address(dst), packet)
            return
        # 6.11 (ii): a data packet for which we have no active route.
        self.counters["drop-no-route"] += 1
        self._emit(Dropped("no-route", packet))
        seq = 0
        if r is not None:
            if r.valid_seq:
                r.seq = seq_next(r.seq)
            seq = r.seq
        prev = self.neighbours.address_of(src_mac) if src_mac is not None else None
        self._send_rerr(now, [(IPv4Address(dst), seq)], {prev} if prev else set(), False)

    def _send_on(self, now: float, r: Route, packet: bytes) -> None:
        """Forward over a valid route, refreshing the lifetimes 6.2 names."""
        t = now + self._art
        if r.expires < t:
            r.expires = t
        routes = self._routes
        nh = routes.get(r.next_hop_b)
        if nh is not None and nh.state is VALID and nh.expires < t:
            nh.expires = t
        back = routes.get(packet[ipv4.SRC])
        if back is not None and back.state is VALID:
            if back.expires < t:
                back.expires = t
            prev = routes.get(back.next_hop_b)
            if prev is not None and prev.state is VALID and prev.expires < t:
                prev.expires = t
        self._last_data = now
        self._forwarded += 1
        self._actions.append(SendFrame(r.next_hop, packet))

    def _buffer(self, now: float, dst: IPv4Address, packet: bytes) -> None:
        if self.send_buffer.add(now, dst, packet):
            exp = now + self.send_buffer.timeout
            if exp < self._deadline:
                self._deadline = exp
        self._drain_buffer_drops()
        if dst not in self._discoveries:
            self._start_discovery(now, dst)

    def _release(self, now: float, r: Route) -> None:
        """Packets waiting for ``r.dst`` go out in arrival order (the route just came)."""
        for p in self.send_buffer.release(r.dst):
            self._send_on(now, r, p)

    def _drain_buffer_drops(self) -> None:
        for reason, _dst, p in self.send_buffer.take_dropped():
            reason = _BUFFER_REASONS.get(reason, reason)
            self.counters[f"drop-{reason}"] += 1
            self._emit(Dropped(reason, p))

    # ------------------------------------------------------------------ route table
    @property
    def route_table(self) -> RouteTable:
        """Every entry, any state (status, tests)."""
        return self._routes

    def route(self, dst: IPv4Address) -> Route | None:
        """The route table entry for ``dst`` (any state), for status and tests."""
        return self._routes.get(dst.packed)

    def _update_route(
        self,
        now: float,
        dst: IPv4Address,
        next_hop: IPv4Address,
        hops: int,
        seq: int,
        lifetime: float,
    ) -> tuple[Route, bool]:
        """Create or update the route to ``dst`` if the information is fresher (6.2, 6.7;
        the rule is :meth:`RouteTable.update`). Returns (entry, changed)."""
        got = self._routes.update(now, dst, next_hop, hops, seq, lifetime)
        if got is None:
            return self._routes.get(dst.packed), False  # type: ignore[return-value]
        r, was = got
        self._became_valid(now, r, was)
        return r, True

    def _touch_neighbour(self, now: float, nb: IPv4Address) -> Route:
        """6.5/6.7: a route to the neighbour that sent a control packet (1 hop)."""
        r, was = self._routes.touch_neighbour(now, nb, self._art)
        self._became_valid(now, r, was)
        return r

    def _became_valid(self, now: float, r: Route, was: RouteState | None) -> None:
        if r.expires < self._deadline:
            self._deadline = r.expires
        if was is VALID:
            return
        self._emit(
            Notify(ev.RouteUp(dst=str(r.dst), next_hop=str(r.next_hop), hops=r.hops, seq=r.seq))
        )
        d = self._discoveries.pop(r.dst, None)
        if d is not None and not d.repair:
            # Route discovery latency (issue 10): first RREQ (6.3) to a valid route.
            self.counters["discoveries-completed"] += 1
            self.counters["discovery-latency-ms"] += round((now - d.started) * 1000)
        if d is not None and d.repair:
            self.counters["local-repairs"] += 1
            if r.hops > d.old_hops and r.precursors:
                # 6.12: the repaired route is longer: tell the sources (N: keep the route).
                self._send_rerr(now, [(r.dst, r.seq)], set(r.precursors), True)
        if self._bus.holds:
            self._bus_repaired(now, r)
        self._release(now, r)

    def _invalidate(self, now: float, r: Route, reason: str, notify: dict | None = None) -> None:
        """Mark ``r`` invalid, deleted after DELETE_PERIOD (6.11)."""
        self._routes.invalidate(r, now + self._delete)
        if r.expires < self._deadline:
            self._deadline = r.expires
        fields: dict[str, Any] = {"dst": str(r.dst), "next_hop": str(r.next_hop), "reason": reason}
        if notify:
            fields.update(notify)
        self._emit(Notify(ev.RouteDown(**fields)))

    def _expire_routes(self, now: float) -> None:
        # Lifetime over (6.11 "expires"): invalid with the number bumped (6.1), then gone.
        expired = self._routes.expire(now, self._delete)
        if expired:
            self.counters["routes-expired"] += expired

    # ------------------------------------------------------------------ discovery (6.3, 6.4)
    def _start_discovery(
        self, now: float, dst: IPv4Address, repair: bool = False, ttl: int | None = None
    ) -> None:
        c = self.config
        if ttl is None:
            r = self._routes.get(dst.packed)
            # 6.4: start from the last known hop count when there is one.
            ttl = min(r.hops + c.ttl_increment, c.net_diameter) if r is not None else c.ttl_start
        d = _Discovery(dst, ttl, now, repair=repair, started=now)
        if repair:
            old = self._routes.get(dst.packed)
            assert old is not None  # a repair starts from the broken entry
            d.old_hops = old.hops
        self._discoveries[dst] = d
        self._send_rreq(now, d)

    def _send_rreq(self, now: float, d: _Discovery) -> None:
        c = self.config
        # The same expression as the deadline below, so the two never disagree by a
        # rounding error (which would spin the timer).
        while self._rreq_times and self._rreq_times[0] + 1.0 <= now:
            self._rreq_times.popleft()
        if len(self._rreq_times) >= c.rreq_ratelimit:
            # RREQ_RATELIMIT: wait until the oldest of the last second ages out.
            d.waiting_ratelimit = True
            d.deadline = self._rreq_times[0] + 1.0
            self.counters["rreq-ratelimited"] += 1
            self._set_deadline(d.deadline)
            return
        d.waiting_ratelimit = False
        self._rreq_times.append(now)
        self.seq = seq_next(self.seq)  # 6.1: before originating a route discovery
        self._rreq_id = (self._rreq_id + 1) & 0xFFFFFFFF
        self._seen[(self.address, self._rreq_id)] = now + self._pdt
        r = self._routes.get(d.dst.packed)
        known = r is not None and (r.valid_seq or r.seq != 0)
        msg = aodv.RREQ(
            hop_count=0,
            rreq_id=self._rreq_id,
            dest=d.dst,
            dest_seq=r.seq if known and r is not None else 0,
            orig=self.address,
            orig_seq=self.seq,
            gratuitous=c.gratuitous_rrep,
            dest_only=c.destination_only,
            unknown_seq=not known,
        )
        if d.ttl >= c.net_diameter:
            wait = self._ntt * (2**d.retries)  # 6.4: binary exponential backoff
        else:
            wait = c.ring_traversal_time_ms(d.ttl) / 1000
        d.deadline = now + wait
        d.ttls.append(d.ttl)
        self._set_deadline(d.deadline)
        self.counters["rreq-sent"] += 1
        self._broadcast(now, msg, d.ttl)

    def _discovery_timeout(self, now: float, d: _Discovery) -> None:
        c = self.config
        if d.waiting_ratelimit:
            self._send_rreq(now, d)
            return
        if d.repair:
            self._repair_failed(now, d)
            return
        if d.ttl < c.net_diameter:
            d.ttl += c.ttl_increment
            if d.ttl > c.ttl_threshold:
                d.ttl = c.net_diameter
            self._send_rreq(now, d)
            return
        if d.retries < c.rreq_retries:
            d.retries += 1
            self._send_rreq(now, d)
            return
        # 6.3: give up: the packets waiting for this destination are dropped.
        del self._discoveries[d.dst]
        self.counters["discoveries-failed"] += 1
        self.send_buffer.discard(d.dst, "no-route")
        self._drain_buffer_drops()
        self._emit(Notify(ev.RouteDown(dst=str(d.dst), reason="no-route")))

    # ------------------------------------------------------------------ control plane
    def _receive_control(
        self, now: float, packet: bytes, src_mac: bytes | None, rssi: float | None
    ) -> None:
        try:
            hdr, msg = aodv.parse_control(packet)
        except aodv.MalformedAodv as e:
            self._malformed(packet, str(e))
            return
        sender = hdr.src
        if sender == self.address:
            return  # our own broadcast echoed back
        if src_mac is not None:
            self.neighbours.learn(now, sender, src_mac, rssi)
        h = self._hello_from.get(sender)
        if h is not None:
            self._hello_from[sender] = (now, h[1])
        if isinstance(msg, aodv.RREQ):
            self._on_rreq(now, hdr, msg)
        elif isinstance(msg, aodv.RREP):
            if hdr.dst.packed == _BCAST_B and msg.dest == sender:
                self._on_hello(now, sender, msg)
            else:
                self._on_rrep(now, sender, msg)
                if self._atra_on and self._atra.waiting:
                    self._atra_rrep(now)
        elif isinstance(msg, aodv.RERR):
            self._on_rerr(now, sender, msg)
        else:
            acks = [i for i in self._notices(msg) if isinstance(i, mx.BusAck)]
            if acks:
                for a in acks:
                    self._bus.acked(a.key, sender)
                return
            self.counters["rrep-ack-received"] += 1
            self._ack_wait.pop(sender, None)

    def _on_rreq(self, now: float, hdr: ipv4.IPv4Header, m: aodv.RREQ) -> None:
        sender = hdr.src
        self.counters["rreq-received"] += 1
        until = self._blacklist.get(sender)
        if until is not None:
            if until > now:
                self.counters["rreq-blacklisted"] += 1
                return  # 6.8: ignore RREQs from blacklisted neighbours
            del self._blacklist[sender]
        if self._atra_on and self._atra.suppress_request(now, sender):
            return  # Atra: not over a link predicted to fail
        self._touch_neighbour(now, sender)
        if m.orig == self.address:
            return
        key = (m.orig, m.rreq_id)
        seen = self._seen.get(key)
        if seen is not None and seen > now:
            self.counters["rreq-duplicate"] += 1
            return  # 6.5: already processed within PATH_DISCOVERY_TIME
        if len(self._seen) >= self.config.rreq_seen_size:
            self._bound_seen(now)
        self._seen[key] = now + self._pdt
        hops = m.hop_count + 1
        if hops > 255:
            self.counters["rreq-hop-overflow"] += 1
            return
        # 6.5: reverse route to the originator.
        min_life = 2 * self._ntt - 2 * hops * self._node_tt
        rev, _ = self._update_route(now, m.orig, sender, hops, m.orig_seq, max(min_life, 0))
        if rev.state is not VALID:
            # Our (invalid) entry holds a newer number than the RREQ: the originator
            # will ask again with a higher one; answering now could point backwards.
            self.counters["rreq-stale-reverse"] += 1
            return
        if rev.expires < now + min_life:
            rev.expires = now + min_life
        if m.dest == self.address:
            # 6.6.1: the destination replies; its number is at least the requested one.
            if not m.unknown_seq and seq_newer(m.dest_seq, self.seq):
                self.seq = m.dest_seq
            rrep = aodv.RREP(0, self.address, self.seq, m.orig, self.config.my_route_timeout_ms)
            self.counters["rrep-sent"] += 1
            self._send_rrep(now, rrep, rev)
            return
        fwd = self._routes.get(m.dest.packed)
        if (
            not m.dest_only
            and fwd is not None
            and fwd.state is VALID
            and fwd.valid_seq
            and (m.unknown_seq or not seq_newer(m.dest_seq, fwd.seq))
            and fwd.next_hop != sender  # never answer with a route through the asker
        ):
            # 6.6.2: an intermediate node with a fresh enough route replies.
            fwd.precursors.add(rev.next_hop)
            rev.precursors.add(fwd.next_hop)
            life = max(int((fwd.expires - now) * 1000), 0)
            rrep = aodv.RREP(fwd.hops, m.dest, fwd.seq, m.orig, life)
            self.counters["rrep-sent-intermediate"] += 1
            self._send_rrep(now, rrep, rev)
            if m.gratuitous:
                # 6.6.3: tell the destination the route to the originator.
                glife = max(int((rev.expires - now) * 1000), 0)
                g = aodv.RREP(rev.hops, m.orig, m.orig_seq, m.dest, glife)
                self.counters["rrep-sent-gratuitous"] += 1
                self._send_rrep(now, g, fwd)
            return
        if hdr.ttl <= 1:
            return
        # 6.5: rebroadcast with the larger of the two destination numbers.
        dest_seq, unknown = m.dest_seq, m.unknown_seq
        if fwd is not None and fwd.valid_seq and (unknown or seq_newer(fwd.seq, dest_seq)):
            dest_seq, unknown = fwd.seq, False
        out = aodv.RREQ(
            hops,
            m.rreq_id,
            m.dest,
            dest_seq,
            m.orig,
            m.orig_seq,
            join=m.join,
            repair=m.repair,
            gratuitous=m.gratuitous,
            dest_only=m.dest_only,
            unknown_seq=unknown,
            extensions=m.extensions,
        )
        self.counters["rreq-forwarded"] += 1
        self._broadcast(now, out, hdr.ttl - 1)

    def _on_rrep(self, now: float, sender: IPv4Address, m: aodv.RREP) -> None:
        self.counters["rrep-received"] += 1
        nbr = self._touch_neighbour(now, sender)
        if m.ack_required:
            self.counters["rrep-ack-sent"] += 1
            self._unicast(now, aodv.RREPAck(), sender)
        if m.dest == self.address:
            return
        hops = m.hop_count + 1
        if hops > 255:
            self.counters["rrep-hop-overflow"] += 1
            return
        fwd, changed = self._update_route(
            now, m.dest, sender, hops, m.dest_seq, m.lifetime_ms / 1000
        )
        if not changed:
            if not (
                fwd.state is VALID
                and fwd.seq == m.dest_seq
                and fwd.hops == hops
                and fwd.next_hop == sender
            ):
                self.counters["rrep-stale"] += 1
                return  # 6.7: forwarded only if it created or updated the route
            # The RREP confirms the route we hold (a second discovery for the same
            # destination): that is an update of its lifetime, so it goes on.
            t = now + m.lifetime_ms / 1000
            if fwd.expires < t:
                fwd.expires = t
        if m.orig == self.address:
            return  # our discovery is complete (route-up and the buffer: _became_valid)
        rev = self._routes.get(m.orig.packed)
        if rev is None or rev.state is not VALID:
            self.counters["rrep-no-reverse"] += 1
            return
        # 6.7: precursors, so a later break reaches everybody using the route.
        fwd.precursors.add(rev.next_hop)
        nbr.precursors.add(rev.next_hop)
        rev.precursors.add(fwd.next_hop)
        t = now + self._art
        if rev.expires < t:
            rev.expires = t
        out = aodv.RREP(
            hops,
            m.dest,
            m.dest_seq,
            m.orig,
            m.lifetime_ms,
            repair=m.repair,
            prefix_size=m.prefix_size,
            extensions=m.extensions,
        )
        self.counters["rrep-forwarded"] += 1
        self._send_rrep(now, out, rev)

    def _send_rrep(self, now: float, m: aodv.RREP, towards: Route) -> None:
        if self.config.rrep_ack:
            m.ack_required = True
            self._ack_wait[towards.next_hop] = now + self._nht
            self._set_deadline(now + self._nht)
        self._unicast(now, m, towards.next_hop)

    def _on_hello(self, now: float, sender: IPv4Address, m: aodv.RREP) -> None:
        """6.9: a Hello keeps (or creates) a one-hop route with the neighbour's number."""
        self.counters["hello-received"] += 1
        iv = aodv.hello_interval_ms(m)
        window = self.config.allowed_hello_loss * ((iv / 1000) if iv else self._hello_iv)
        if self.config.hellos:
            if sender not in self._hello_from and len(self._hello_from) >= self.neighbours.capacity:
                # Bounded like the neighbour table: the one heard least recently goes.
                del self._hello_from[min(self._hello_from, key=lambda n: self._hello_from[n][0])]
                self.counters["hello-evicted"] += 1
            self._hello_from[sender] = (now, window)
            self._set_deadline(now + window)
        r, _ = self._update_route(now, sender, sender, 1, m.dest_seq, window)
        if r.next_hop == sender and r.expires < now + window:
            r.expires = now + window

    def _on_rerr(self, now: float, sender: IPv4Address, m: aodv.RERR) -> None:
        """6.11 (iii): routes through ``sender`` to the listed destinations are gone."""
        self.counters["rerr-received"] += 1
        items = self._notices(m)
        pred = next((i for i in items if isinstance(i, mx.Predicted)), None)
        if pred is not None and self._atra_on:
            self._atra_rerr(now, sender, m, pred)  # Atra: the link still works
            return
        notices = [i for i in items if isinstance(i, mx.Notice)]
        if notices:
            # An ERDN/ERSN (N set: plain nodes keep their routes): relayed towards the
            # flow's source by the BuS path, not to the precursors.
            self._bus_rerr(now, sender, m, notices)
            return
        elfn = [i for i in items if isinstance(i, mx.Flow)]
        out: list[tuple[IPv4Address, int]] = []
        to: set[IPv4Address] = set()
        for dst, seq in m.dests:
            r = self._routes.get(dst.packed)
            if r is None or r.state is not VALID or r.next_hop != sender:
                continue
            if m.no_delete:
                # 6.12: a repair is under way downstream: keep the route, pass it on.
                if r.precursors:
                    out.append((dst, r.seq))
                    to |= r.precursors
                continue
            if not r.valid_seq or seq_newer(seq, r.seq):
                r.seq = seq
            extra: dict[str, Any] = {"broken_by": str(sender)}
            for f in elfn:
                if f.dst != dst:
                    continue
                if f.src == self.address:
                    # Holland & Vaidya 6: the source learns which packet hit the break.
                    extra.update(_elfn_fields(f))
                    self.counters["elfn-received"] += 1
                else:
                    up = self._upstream(f.src.packed)
                    if up is not None:
                        r.precursors.add(up)  # the flow's source must hear of it
            if r.precursors:
                out.append((dst, r.seq))
                to |= r.precursors
            r.precursors = set()
            self._invalidate(now, r, "rerr", extra)
        if out:
            exts = [mx.aodv_extension(f) for f in elfn if any(f.dst == d for d, _ in out)]
            self._send_rerr(now, out, to, m.no_delete, exts)

    # ------------------------------------------------------------------ maintenance (6.11, 6.12)
    def _link_break(self, now: float, nb: IPv4Address, reason: str, packet: bytes | None) -> None:
        """The link to neighbour ``nb`` is gone: repair or report every route over it."""
        self._hello_from.pop(nb, None)
        failed = (
            failed_packet_fields(packet)
            if packet is not None and not aodv.is_control(packet)
            else {}
        )
        flow = flow_from_fields(failed) if failed else None
        if flow is not None and flow.src == self.address:
            flow = None  # our own packet: re-buffered here, nobody upstream to tell
        out: list[tuple[IPv4Address, int]] = []
        to: set[IPv4Address] = set()
        exts: list[tuple[int, bytes]] = []
        for r in self._routes:
            if r.state is not VALID or r.next_hop != nb:
                continue
            if r.valid_seq:
                r.seq = seq_next(r.seq)
            extra: dict[str, Any] = {"broken_link": (str(self.address), str(nb))}
            mine = flow is not None and flow.dst == r.dst
            if failed and failed.get("dst") == str(r.dst):
                extra.update(failed)
            bus = mine and self._bus_on and flow is not None and flow.proto == ipv4.PROTO_TCP
            if bus or (
                self.config.local_repair
                and r.precursors
                and r.hops <= self.config.max_repair_ttl
                and r.dst != nb
            ):
                # TCP-BuS (Kim, Toh & Choi IV): the pivot always tries a local repair
                # for a TCP flow and tells the source with an ERDN.
                self._start_repair(now, r, packet)
                if bus and flow is not None:
                    self._bus_pivot(now, flow, r)
                fields = {
                    "dst": str(r.dst),
                    "next_hop": str(nb),
                    "reason": reason,
                    "repairing": True,
                }
                self._emit(Notify(ev.RouteDown(**(fields | extra))))
                continue
            if mine and flow is not None:
                # ELFN (Holland & Vaidya 6): the failed packet's flow rides along, and
                # its source hears the error even when it is not a listed precursor.
                up = self._upstream(flow.src.packed)
                if up is not None:
                    r.precursors.add(up)
                exts = [mx.aodv_extension(flow)]
            if r.precursors:
                out.append((r.dst, r.seq))
                to |= r.precursors
            r.precursors = set()
            self._invalidate(now, r, reason, extra)
        if out:
            self._send_rerr(now, out, to, False, exts)
        if packet is not None and not aodv.is_control(packet) and len(packet) >= 20:
            self._reroute_failed(now, packet)

    def _start_repair(self, now: float, r: Route, packet: bytes | None) -> None:
        """6.12: rediscover ``r.dst`` from here; data for it waits in the buffer."""
        c = self.config
        r.state = REPAIRING
        back = 0
        if packet is not None and len(packet) >= 20:
            src = self._routes.get(packet[ipv4.SRC])
            back = src.hops if src is not None else 0
        ttl = min(max(r.hops, back // 2) + c.local_add_ttl, c.net_diameter)
        self._discoveries.pop(r.dst, None)
        self.counters["local-repairs-started"] += 1
        self._start_discovery(now, r.dst, repair=True, ttl=ttl)

    def _repair_failed(self, now: float, d: _Discovery) -> None:
        del self._discoveries[d.dst]
        self.counters["local-repairs-failed"] += 1
        r = self._routes.get(d.dst.packed)
        exts = []
        for key in self._bus.pivot_keys(d.dst.packed):
            # TCP-BuS: the repair failed; the source gets a plain RERR with ELFN.
            h = self._bus.holds.pop(key)
            f = mx.Flow(IPv4Address(key[0]), d.dst, key[2], key[3], h.head_seq)
            exts.append(mx.aodv_extension(f))
            up = self._upstream(key[0])
            if r is not None and up is not None:
                r.precursors.add(up)
        if r is not None and r.state is REPAIRING:
            if r.precursors:
                self._send_rerr(now, [(r.dst, r.seq)], set(r.precursors), False, exts)
            r.precursors = set()
            self._invalidate(now, r, "repair-failed")
        self.send_buffer.discard(d.dst, "no-route")
        self._drain_buffer_drops()

    def _reroute_failed(self, now: float, packet: bytes) -> None:
        """The packet 802.11 gave up on: re-buffer ours, wait for a repair, else drop."""
        dst = packet[ipv4.DST]
        r = self._routes.get(dst)
        if r is not None and r.state is VALID:
            self._send_on(now, r, packet)  # a route appeared meanwhile (TTL already done)
        elif packet[ipv4.SRC] == self._me_b or (r is not None and r.state is REPAIRING):
            self._buffer(now, IPv4Address(dst), packet)
        else:
            self.counters["drop-link-break"] += 1
            self._emit(Dropped("link-break", packet))

    def _control_tx_failed(self, now: float, nb: IPv4Address, packet: bytes) -> None:
        """6.8: a RREP that could not be delivered marks ``nb`` as unidirectional."""
        try:
            _, msg = aodv.parse_control(packet)
        except aodv.MalformedAodv:
            return
        if isinstance(msg, aodv.RREP):
            self._blacklist[nb] = now + self._blacklist_t
            self.counters["blacklisted"] += 1

    def _send_rerr(
        self,
        now: float,
        dests: list[tuple[IPv4Address, int]],
        to: set[IPv4Address],
        no_delete: bool,
        extensions: list[tuple[int, bytes]] | None = None,
    ) -> None:
        """Unicast to a single precursor, else broadcast with TTL 1 (6.11); rate-limited."""
        while self._rerr_times and self._rerr_times[0] + 1.0 <= now:
            self._rerr_times.popleft()
        if len(self._rerr_times) >= self.config.rerr_ratelimit:
            self.counters["rerr-ratelimited"] += 1
            return
        self._rerr_times.append(now)
        self.counters["rerr-sent"] += 1
        for i in range(0, len(dests), 255):
            msg = aodv.RERR(dests[i : i + 255], no_delete, list(extensions or []))
            if len(to) == 1:
                self._unicast(now, msg, next(iter(to)))
            else:
                self._broadcast(now, msg, 1)

    # ------------------------------------------------------------------ ELFN / TCP-BuS
    def _notices(self, msg: aodv.Message) -> list[mx.Item]:
        """manetkit's extensions on ``msg`` (docs/elfn-bus.md); malformed ones counted."""
        out: list[mx.Item] = []
        for t, data in msg.extensions:
            try:
                item = mx.from_aodv(t, data)
            except mx.MalformedNotice:
                self.counters["malformed-extension"] += 1
                continue
            if item is not None:
                out.append(item)
        return out

    def _upstream(self, src: bytes) -> IPv4Address | None:
        """The next hop towards ``src`` (a flow's source), if we have a valid route."""
        r = self._routes.get(src)
        return r.next_hop if r is not None and r.state is VALID else None

    def _bus_data(self, packet: bytes) -> bool:
        """A data packet about to be forwarded (bus on): note its ACK number for
        Last_ACK, and keep it if its flow is held here (Kim, Toh & Choi IV-C). The
        pivot's own packets wait in the send buffer of the repair (6.12) instead."""
        ihl = (packet[0] & 0x0F) * 4
        tcp = tcp_fields(packet, packet[ipv4.PROTOCOL], ihl)
        if tcp is None:
            return False
        self._bus.observe(packet[ipv4.SRC], packet[ipv4.DST], tcp)
        if not self._bus.holds:
            return False
        key = (packet[ipv4.SRC], packet[ipv4.DST], tcp[0], tcp[1])
        h = self._bus.holds.get(key)
        if h is None or h.pivot:
            return False
        old = self._bus.hold(key, packet)
        if old is not None:
            self.counters["drop-bus-hold-full"] += 1
            self._emit(Dropped("bus-hold-full", old))  # type: ignore[arg-type]
        return True

    def _bus_send(self, now: float, notice: mx.Notice, msg: aodv.RERR) -> None:
        """Unicast an ERDN/ERSN RERR towards the flow's source; retransmitted until
        the next hop acknowledges it (BUS-ACK in a RREP-ACK)."""
        up = self._upstream(notice.flow.src.packed)
        if up is None:
            self.counters["bus-notice-unroutable"] += 1
            return
        pkt = aodv.control_packet(msg, self.address, up, _CONTROL_TTL)
        self._emit(SendFrame(up, pkt))
        self._bus.sent(now, notice.key, up, pkt, flow_key(notice.flow))
        self._set_deadline(now + self._bus.rexmt)

    def _bus_pivot(self, now: float, flow: mx.Flow, r: Route) -> None:
        """This node is the pivot of ``flow`` (its route to ``r.dst`` broke): ERDN
        with the sequence at the head of its queue; the repair is under way."""
        key = flow_key(flow)
        h = self._bus.start(now, key, pivot=True)
        h.head_seq = flow.seq
        self._set_deadline(now + self._bus.settings.bus_hold_s)
        self.counters["bus-pivot"] += 1
        n = mx.Notice(mx.KIND_ERDN, self._bus.next_ident(), self.address, flow)
        exts = [mx.aodv_extension(flow), mx.aodv_extension(n)]
        self._bus_send(now, n, aodv.RERR([(r.dst, r.seq)], True, exts))

    def _bus_repaired(self, now: float, r: Route) -> None:
        """The local repair found a route: ERSN to every held flow (the pivot's own
        packets wait in the repair's send buffer, so the hold itself is empty)."""
        for key in self._bus.pivot_keys(r.dst_b):
            n = self._bus.ersn_for(key, r.dst, self.address)
            self._bus.holds.pop(key)
            self._bus_send(now, n, aodv.RERR([(r.dst, r.seq)], True, [mx.aodv_extension(n)]))

    def _bus_rerr(
        self, now: float, sender: IPv4Address, m: aodv.RERR, notices: list[mx.Notice]
    ) -> None:
        """An ERDN/ERSN from ``sender``: acknowledge it, act on it once, relay it."""
        for n in notices:
            ack = mx.BusAck(n.kind, n.ident, n.pivot)
            self._unicast(now, aodv.RREPAck([mx.aodv_extension(ack)]), sender)
            if not self._bus.first_time(now, n.key):
                continue
            out = self._bus.on_notice(now, n, self.address, self._bus_on)
            if out.event is None and out.relay and n.kind == mx.KIND_ERDN and self._bus_on:
                self._set_deadline(now + self._bus.settings.bus_hold_s)
            for p in out.released:
                r = self._routes.get(p[ipv4.DST])
                if r is not None and r.state is VALID:
                    self._send_on(now, r, p)
                else:
                    self._buffer(now, IPv4Address(p[ipv4.DST]), p)
            if out.event is not None:
                self._emit(Notify(out.event))
            elif out.relay:
                self._bus_send(now, n, aodv.RERR(list(m.dests), m.no_delete, list(m.extensions)))

    # ------------------------------------------------------------------ hellos (6.9)
    def _hello_tick(self, now: float) -> None:
        active = now - self._last_data < self._art
        if active and now - self._last_bcast >= self._hello_iv:
            life = self.config.allowed_hello_loss * self.config.hello_interval_ms
            ext = (aodv.EXT_HELLO_INTERVAL, self.config.hello_interval_ms.to_bytes(4, "big"))
            hello = aodv.RREP(0, self.address, self.seq, self.address, life, extensions=[ext])
            self.counters["hello-sent"] += 1
            self._broadcast(now, hello, 1)
        self._next_hello = max(self._last_bcast + self._hello_iv, now + self._hello_iv / 2)
        if not active:
            self._next_hello = now + self._hello_iv

    # ------------------------------------------------------------------ output helpers
    def _broadcast(self, now: float, msg: aodv.Message, ttl: int) -> None:
        self._last_bcast = now
        self._emit(SendFrame(None, aodv.control_packet(msg, self.address, aodv.BROADCAST, ttl)))

    def _unicast(self, now: float, msg: aodv.Message, to: IPv4Address) -> None:
        self._emit(SendFrame(to, aodv.control_packet(msg, self.address, to, _CONTROL_TTL)))

    def _malformed(self, packet: bytes, why: str) -> None:
        self.counters["malformed"] += 1
        self.last_malformed = why
        self._emit(Dropped("malformed", packet))

    def _set_deadline(self, t: float) -> None:
        if t < self._deadline:
            self._deadline = t

    def _compute_deadline(self) -> float:
        t = self._next_hello
        for r in self._routes:
            if r.expires < t and r.state is not REPAIRING:
                t = r.expires
        for d in self._discoveries.values():
            t = min(t, d.deadline)
        for v in self._ack_wait.values():
            t = min(t, v)
        for last, window in self._hello_from.values():
            t = min(t, last + window)
        b = self.send_buffer.next_expiry()
        if b is not None:
            t = min(t, b)
        b = self._bus.next_timer()
        if b is not None:
            t = min(t, b)
        return t

    def _bound_seen(self, now: float) -> None:
        """The duplicate table is full: forget expired pairs, else the oldest (the
        dict is in insertion order, so expiry order: all share PATH_DISCOVERY_TIME)."""
        self._seen = {k: v for k, v in self._seen.items() if v > now}
        while len(self._seen) >= self.config.rreq_seen_size:
            del self._seen[next(iter(self._seen))]
            self.counters["rreq-seen-evicted"] += 1

    def bounds(self) -> dict[str, dict[str, int]]:
        """Every table: entries, bound and evictions (docs/security.md "Bounded state")."""
        c, sb, rt = self.counters, self.send_buffer, self._routes
        return {
            "route_table": {"size": len(rt), "limit": rt.capacity, "evicted": rt.evicted},
            "rreq_seen": {
                "size": len(self._seen), "limit": self.config.rreq_seen_size,
                "evicted": c["rreq-seen-evicted"],
            },
            "neighbours": {
                "size": len(self.neighbours), "limit": self.neighbours.capacity,
                "evicted": self.neighbours.evicted,
            },
            "hello_from": {
                "size": len(self._hello_from), "limit": self.neighbours.capacity,
                "evicted": c["hello-evicted"],
            },
            "send_buffer": {
                "size": len(sb), "limit": sb.max_packets,
                "evicted": sb.drops["full"] + sb.drops["full-destination"],
            },
            **self._bus.bounds(),
        }  # fmt: skip

    def _purge(self, now: float) -> None:
        if len(self._seen) > 64:
            self._seen = {k: v for k, v in self._seen.items() if v > now}
        for nb in [nb for nb, t in self._blacklist.items() if t <= now]:
            del self._blacklist[nb]

    # ------------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        """Routes, discoveries, send buffer and counters (``manetkit status``, JSON-able)."""
        now = self._now
        routes = []
        for r in sorted(self._routes, key=lambda r: int(r.dst)):
            routes.append(
                {
                    "dst": str(r.dst),
                    "next_hop": str(r.next_hop),
                    "hops": r.hops,
                    "seq": r.seq if r.valid_seq else None,
                    "state": r.state.value,
                    "lifetime_s": round(r.expires - now, 3),
                    "precursors": sorted(str(p) for p in r.precursors),
                }
            )
        counters = dict(self.counters)
        counters.update(
            {
                "data-forwarded": self._forwarded,
                "data-delivered": self._delivered,
                "data-originated": self._originated,
            }
        )
        return {
            "protocol": "aodv",
            "address": str(self.address),
            "seq": self.seq,
            "routes": routes,
            "discoveries": [
                {
                    "target": str(d.dst),
                    "ttls": list(d.ttls),
                    "retries": d.retries,
                    "repair": d.repair,
                    "since_s": round(now - d.started, 3),
                    "next_in_s": round(d.deadline - now, 3),
                }
                for d in self._discoveries.values()
            ],
            "blacklist": sorted(str(n) for n in self._blacklist),
            "send_buffer": {
                str(d): self.send_buffer.waiting(d) for d in self.send_buffer.destinations()
            },
            "send_buffer_drops": dict(self.send_buffer.drops),
            "counters": counters,
            "bounds": self.bounds(),
            "bus": self._bus.status(),
            **({"atra": self._atra_status()} if self._atra_on else {}),
        }


def _elfn_fields(f: mx.Flow) -> dict[str, Any]:
    """route-down fields at the source from a received ELFN extension."""
    out: dict[str, Any] = f.fields() | {"elfn": True}
    if f.proto == ipv4.PROTO_TCP:
        out["seq"] = f.seq
    return out
