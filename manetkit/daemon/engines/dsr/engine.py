"""DSR routing engine, sans-I/O (RFC 4728 section 8; Holland & Vaidya section 5).

Inputs and outputs are those of :mod:`manetkit.daemon.engines.base`. What this engine
does, by RFC section:

- 8.1.3 the source looks its Route Cache up and adds a DSR Source Route option; without
  a route the packet waits in the send buffer (4.2) and Route Discovery starts.
- 8.1.4 every hop forwards by the Source Route's next address (Segments Left), in place
  on the packet bytes; the destination strips the DSR header and delivers.
- 8.2.1 discovery: a non-propagating request (IP TTL 1) first, then propagating
  requests with exponential back-off from RequestPeriod capped at MaxRequestPeriod.
- 8.2.2 request processing: duplicate suppression by (initiator, id) in the Route
  Request Table and by this node already being in the route record; forwarding after a
  random BroadcastJitter.
- 8.2.3 cached replies, only when ``cache_replies`` (off by default: Holland & Vaidya
  section 5 found stale cached replies the main cause of TCP's poor DSR results).
- 8.2.4 the target replies with the route record reversed as the Source Route: 802.11
  unicast needs link-layer ACKs, so every link that carried the request works both ways.
- 8.3.1 link failures come from 802.11 feedback (``TxFailed``) or link sensing
  (``LinkDown``); 8.3.4 a Route Error goes to the failed packet's source; 8.3.5 every node
  that handles a Route Error cuts the link from its cache.
- 8.4.3 salvaging with another cached route, up to MaxSalvageCount times.
- 8.2.1 (a node may start a discovery whenever it wants a route) and Holland & Vaidya
  section 5 (stale caches): when this node's own packet loses the route it took (its
  transmission failed, or a Route Error for it came back), it asks for a fresh route at
  once (``rediscover_on_break``) while the packet falls back on another cached route.
  Without it a 20 m/s lab run stalled 24-69 s: each TCP retransmission, one RTO apart
  and doubling, took the next stale cached route and no request went out in between.
- 8.3 (spirit) and Holland & Vaidya section 7 ("negative information"): a link seen
  to fail (``TxFailed``/``LinkDown``, or named by a received Route Error) is *held*:
  no route through it is cached, whatever packet, request or reply carries it, until
  link sensing reports the neighbour up again (``LinkUp``, links where this node is
  the first node) or ``broken_link_hold_s`` passes. Packets the source sent before it
  heard the Route Error still carry the old route; without the hold the node that
  detected the break re-learnt the dead link from them.
- 8.4.4 automatic route shortening: a node that overhears a packet (``wants_overheard``:
  the shell makes the radio promiscuous and passes frames between other nodes to
  :meth:`DsrEngine.overhear_frame`, which never forwards them) and finds itself later in
  the route than the intended receiver sends a gratuitous Route Reply, at most once per
  GratReplyHoldoff per (source, transmitter).
- Route cache fed by discovery, by routes in packets this node forwards or receives,
  and by replies (8.1.4 "add all usable routing information"). Overheard frames feed
  only route shortening (the gratuitous reply teaches both ends the shorter route).

Network-layer acknowledgements (8.3.3, RexmtBufferSize, MaxMaintRexmt) are not used:
802.11 gives link-layer feedback, which RFC 4728 8.3.1 prefers.
"""

from __future__ import annotations

import heapq
import random
import struct
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from manetkit import events as ev
from manetkit.daemon.engines.atra.config import AtraConfig
from manetkit.daemon.engines.atra.state import AtraState
from manetkit.daemon.engines.base import (
    Deliver,
    Dropped,
    LinkDown,
    LinkEvent,
    LinkUp,
    Notify,
    RoutingEngine,
    SendFrame,
    SignalSample,
    TxFailed,
)
from manetkit.daemon.engines.dsr.atra import DsrAtraHooks
from manetkit.daemon.engines.dsr.cache import Path, RouteCache
from manetkit.daemon.engines.shared.bus import (
    BusSettings,
    BusState,
    FlowKey,
    flow_from_fields,
    flow_key,
    tcp_fields,
)
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.sendbuffer import SendBuffer, SendBufferSettings
from manetkit.daemon.wire import dsr, ipv4
from manetkit.daemon.wire import manet_ext as mx

BROADCAST = IPv4Address("255.255.255.255")
_BCAST_PACKED = BROADCAST.packed
_HOT_REFRESH = 0.1  # s: how often one route's neighbour/cache learning is redone
# Bounds of the tables no config field sizes (docs/security.md "Bounded state").
_MAX_HELD = 1024  # held links; at the bound the one whose hold ends first goes
_MAX_DOWN = 1024  # destinations reported down, waiting to be reported up again
_MAX_MEMO = 1024  # per-route memos (_hot, _out, _grat_sent): cleared when over


class DsrConfig(SendBufferSettings, BusSettings):
    """DSR settings (YAML ``dsr:``). Defaults: RFC 4728 section 9; units in the names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    atra: AtraConfig = Field(
        default_factory=AtraConfig,
        description="Atra RFP / PRE / SRP (docs/atra.md); the daemon's top-level atra:",
    )
    discovery_hop_limit: int = Field(
        255, ge=1, le=255, description="IP TTL of propagating Route Requests (DiscoveryHopLimit)"
    )
    broadcast_jitter_ms: float = Field(
        10.0,
        ge=0,
        le=1000,
        description="max random delay before rebroadcasting a request (BroadcastJitter)",
    )
    route_cache_timeout_s: float = Field(
        300.0, gt=0, description="a cached path unused this long is forgotten (RouteCacheTimeout)"
    )
    request_table_size: int = Field(
        64, ge=1, description="initiators remembered in the Route Request Table (RequestTableSize)"
    )
    request_table_ids: int = Field(
        16, ge=1, description="request ids remembered per initiator (RequestTableIds)"
    )
    max_request_rexmt: int = Field(
        16,
        ge=0,
        description="propagating request retransmissions before giving up (MaxRequestRexmt)",
    )
    max_request_period_s: float = Field(
        10.0, gt=0, description="cap of the exponential request back-off (MaxRequestPeriod)"
    )
    request_period_ms: float = Field(
        500.0,
        gt=0,
        description="first back-off interval between propagating requests (RequestPeriod)",
    )
    nonprop_request_timeout_ms: float = Field(
        30.0, gt=0, description="wait for a reply to the ring-0 request (NonpropRequestTimeout)"
    )
    rexmt_buffer_size: int = Field(
        50, ge=1, description="RexmtBufferSize; unused: 802.11 feedback replaces network-layer ACKs"
    )
    max_maint_rexmt: int = Field(
        2, ge=0, description="MaxMaintRexmt; unused: 802.11 feedback replaces network-layer ACKs"
    )
    max_salvage_count: int = Field(
        15,
        ge=0,
        le=15,
        description="times one packet may be salvaged (MaxSalvageCount; 4-bit field)",
    )
    grat_reply_holdoff_s: float = Field(
        1.0,
        ge=0,
        description="min gap between gratuitous replies per (source, transmitter) (GratReplyHoldoff)",
    )
    cache_replies: bool = Field(
        False,
        description="intermediate nodes answer requests from their caches (Holland & Vaidya 5: off)",
    )
    salvage: bool = Field(
        True,
        description="re-route a packet over another cached route when its next link breaks (8.4.3)",
    )
    gratuitous_replies: bool = Field(
        True, description="send gratuitous replies to shorten routes (8.4.4)"
    )
    max_route_length: int = Field(
        16, ge=1, le=63, description="longest route in hops; the TUN MTU leaves room for it"
    )
    route_cache_size: int = Field(
        64, ge=1, description="paths the route cache holds (least recently used evicted)"
    )
    request_forward_ratelimit: int = Field(
        10,
        ge=1,
        le=10_000,
        description="max Route Requests this node rebroadcasts per second, all initiators "
        "(RFC 4728 has no number: RFC 3561 10's RREQ_RATELIMIT)",
    )
    rerr_ratelimit: int = Field(
        10, ge=1, le=10_000, description="max Route Errors this node sends per second (RFC 3561 10)"
    )
    target_replies: Literal["every", "first"] = Field(
        "every",
        description="every: the target answers each copy of a request (8.2.4); first: "
        "only the first, one route per discovery (bench smr's single-reply baseline)",
    )
    rediscover_on_break: bool = Field(
        False,
        description="when this node's own packet loses its route, send a Route Request "
        "at once even if another cached route remains (at most one per RequestPeriod); "
        "off until more than one experiment shows it pays for its requests (docs/dsr.md)",
    )
    broken_link_hold_s: float = Field(
        2.0,
        ge=0,
        le=60,
        description="a link seen to fail is not cached again for this long (or until LinkUp)",
    )
    seed: int | None = Field(
        None, description="seed of the jitter's random generator (tests); None = random"
    )

    @model_validator(mode="after")
    def _periods(self) -> DsrConfig:
        if self.request_period_ms / 1000 > self.max_request_period_s:
            raise ValueError(
                f"request_period_ms {self.request_period_ms} exceeds max_request_period_s "
                f"{self.max_request_period_s}"
            )
        return self


def max_overhead(max_route_length: int) -> int:
    """Worst-case bytes DSR adds to a data packet (see :func:`dsr.max_overhead`)."""
    return dsr.max_overhead(max_route_length)


@dataclass(slots=True)
class _Discovery:
    """Route Discovery state for one target (RFC 4728 8.2.1 back-off)."""

    target: IPv4Address
    started: float
    attempts: int = 0  # propagating requests sent so far (0 = only the ring-0 one)
    next_at: float = 0.0
    last_id: int = 0
    sent_at: float = 0.0  # when the latest request went out


@dataclass(slots=True)
class _HeldLink:
    """A link seen to fail: not cached again until ``until`` (or LinkUp if ``local``)."""

    since: float
    until: float
    local: bool  # this node detected the break (it is the link's first node)


_TIMER_BCAST = 0
_TIMER_DISCOVERY = 1
_TIMER_SEND = 2  # a delayed unicast (cached replies, RFC 4728 8.2.5)


class DsrEngine(DsrAtraHooks, RoutingEngine):
    """One node's DSR: route cache, discovery, send buffer and maintenance (sans-I/O).

    Built by the shell as ``DsrEngine(address, config, neighbours)`` and driven only
    through the :class:`~manetkit.daemon.engines.base.RoutingEngine` API.
    """

    name = "dsr"
    wants_overheard = True  # 8.4.4 route shortening needs promiscuous receive
    is_control_frame = staticmethod(dsr.is_control)  # Next Header 59: nothing but options
    # send_local may reuse the last route per destination for _HOT_REFRESH (a subclass
    # that changes route per packet, SMR's round robin, turns this off).
    memo_routes = True

    def __init__(
        self,
        address: IPv4Address,
        config: DsrConfig | None = None,
        neighbours: NeighbourTable | None = None,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__()
        self.address = address
        self.config = cfg = config or DsrConfig()
        self.neighbours = neighbours if neighbours is not None else NeighbourTable()
        self.cache = RouteCache(address, cfg.route_cache_timeout_s, cfg.route_cache_size)
        self.send_buffer = SendBuffer.from_settings(cfg)
        self.counters: Counter[str] = Counter()
        self._me = address.packed
        # Injected for simulations; else seeded from the config (tests) or the OS.
        self._rng = rng if rng is not None else random.Random(cfg.seed)
        self._timers: list[tuple[float, int, int, Any]] = []
        self._timer_seq = 0
        self._discoveries: dict[IPv4Address, _Discovery] = {}
        self._request_table: OrderedDict[IPv4Address, deque[int]] = OrderedDict()
        # (initiator, id) answered as target (target_replies: first), oldest first
        self._answered_requests: OrderedDict[tuple[IPv4Address, int], None] = OrderedDict()
        self._next_id = self._rng.randrange(0x10000)
        self._grat_sent: dict[tuple[IPv4Address, IPv4Address], float] = {}
        self._refreshed: dict[IPv4Address, float] = {}  # target -> its last fresh request
        self._down: set[IPv4Address] = set()
        self._fwd_times: deque[float] = deque()  # request rebroadcasts in the last second
        self._rerr_times: deque[float] = deque()  # Route Errors sent in the last second
        self._held: dict[frozenset[IPv4Address], _HeldLink] = {}
        self._hot: dict[bytes, tuple[float, IPv4Address | None]] = {}
        self._out: dict[bytes, tuple[int, float, IPv4Address, bytes]] = {}
        self._addr_cache: dict[bytes, IPv4Address] = {}
        self._now = 0.0
        self.last_malformed = ""  # why the last malformed packet was refused (debugging)
        # A conservative deadline for the route cache's expiry: paths only ever expire
        # later than computed (use refreshes them), so get_timer stays O(1).
        self._cache_check: float | None = None
        # TCP-BuS (docs/elfn-bus.md): state always exists (notices are understood and
        # acknowledged even with bus off); holding and repair only with ``bus``.
        self._bus = BusState(cfg)
        self._bus_on = cfg.bus
        # Atra (docs/atra.md): hooks run only with a mechanism on.
        self._atra = AtraState(cfg.atra, address)
        self._atra_on = cfg.atra.enabled

    # ------------------------------------------------------------------ helpers
    def _addr(self, b: bytes) -> IPv4Address:
        a = self._addr_cache.get(b)
        if a is None:
            if len(self._addr_cache) > 4096:
                self._addr_cache.clear()
                self.counters["memo-cleared"] += 1
            a = self._addr_cache[b] = IPv4Address(b)
        return a

    def _drop(self, reason: str, packet: bytes | bytearray | memoryview) -> None:
        self.counters[f"drop-{reason}"] += 1
        self._emit(Dropped(reason, bytes(packet)))

    def _schedule(self, when: float, kind: int, data: Any) -> None:
        self._timer_seq += 1
        heapq.heappush(self._timers, (when, self._timer_seq, kind, data))

    def _drain_buffer_drops(self) -> None:
        for reason, _dst, pkt in self.send_buffer.take_dropped():
            self._drop(reason, pkt)

    @staticmethod
    def _over_limit(now: float, times: deque[float], per_second: int) -> bool:
        """A sliding one-second window (RFC 3561 10's RREQ/RERR_RATELIMIT): False and
        ``now`` noted when fewer than ``per_second`` went out in the last second."""
        while times and times[0] + 1.0 <= now:
            times.popleft()
        if len(times) >= per_second:
            return True
        times.append(now)
        return False

    # ------------------------------------------------------------------ inputs
    def receive_frame(
        self, now: float, packet: bytes, src_mac: bytes | None = None, rssi_dbm: float | None = None
    ) -> None:
        self._now = now
        try:
            # Checks and offsets read in place: this is the per-packet hot path.
            if len(packet) < 20 or packet[0] >> 4 != 4:
                raise ipv4.MalformedPacket("not an IPv4 packet")
            ihl = (packet[0] & 0x0F) * 4
            total = (packet[2] << 8) | packet[3]
            if ihl < 20 or total < ihl + dsr.HEADER_LEN or total > len(packet):
                raise ipv4.MalformedPacket(f"bad IPv4 lengths (ihl {ihl}, total {total})")
            if packet[ipv4.PROTOCOL] != ipv4.PROTO_DSR:
                self._drop("not-dsr", packet)
                return
            o = ihl + dsr.HEADER_LEN
            plen = (packet[ihl + 2] << 8) | packet[ihl + 3]
            if o + plen > total:
                raise dsr.MalformedDsr(f"DSR payload length {plen} runs past the packet")
            if plen >= 4 and packet[o] == dsr.OPT_SRCRT and packet[o + 1] + 2 == plen:
                # A data packet whose only option is the Source Route.
                self._source_routed(now, bytes(packet), ihl, o, total, src_mac, rssi_dbm, False)
            else:
                self._control(now, packet, src_mac, rssi_dbm)
        except (ValueError, IndexError, struct.error) as e:  # MalformedPacket is a ValueError
            self.counters["malformed"] += 1
            self.last_malformed = str(e)
            self._drop("malformed", packet)

    def overhear_frame(
        self, now: float, packet: bytes, src_mac: bytes | None = None, rssi_dbm: float | None = None
    ) -> None:
        """A unicast between two other nodes (promiscuous radio): only 8.4.4 shortening."""
        self._now = now
        try:
            if len(packet) < 20 or packet[0] >> 4 != 4 or packet[ipv4.PROTOCOL] != ipv4.PROTO_DSR:
                self.counters["overheard-ignored"] += 1
                return
            ihl = (packet[0] & 0x0F) * 4
            o = ihl + dsr.HEADER_LEN
            if packet[o] == dsr.OPT_SRCRT and o + 4 <= len(packet):
                sr_at = o  # a data packet: the Source Route comes first
            else:
                sr = dsr.parse(packet)[1].first(dsr.SourceRoute)
                if sr is None:
                    self.counters["overheard-ignored"] += 1
                    return
                sr_at = sr.offset
            olen = packet[sr_at + 1]
            if olen < 2 or (olen - 2) & 3 or (packet[sr_at + 3] & 0x3F) > (olen - 2) >> 2:
                raise dsr.MalformedDsr(f"source route option length {olen}")
            if sr_at + 2 + olen > len(packet):
                raise dsr.MalformedDsr("source route runs past the packet")
            self._overheard(now, packet, sr_at)
        except (ValueError, IndexError, struct.error) as e:
            # Not ours to drop (it was never addressed to us): only counted.
            self.counters["overheard-malformed"] += 1
            self.last_malformed = str(e)

    def send_local(self, now: float, packet: bytes) -> None:
        self._now = now
        if self._atra_on and self._atra.cfg.srp and self._atra_pinned_send(now, packet):
            return
        # Hot path: a destination we sent to within _HOT_REFRESH, cache unchanged since.
        hint = self._out.get(packet[ipv4.DST]) if self.memo_routes else None
        if (
            hint is not None
            and hint[0] == self.cache.generation
            and now - hint[1] < _HOT_REFRESH
            and packet[0] == 0x45
            and ((packet[2] << 8) | packet[3]) <= len(packet)
        ):
            self.counters["data-originated"] += 1
            self._originate(packet, hint[3], hint[2])
            return
        try:
            hdr = ipv4.parse(packet)
        except ipv4.MalformedPacket as e:
            self.counters["malformed"] += 1
            self.last_malformed = str(e)
            self._drop("malformed", packet)
            return
        dst = hdr.dst
        if dst.is_multicast or dst == BROADCAST or dst == self.address:
            self._drop("unroutable", packet)
            return
        self.counters["data-originated"] += 1
        route = self._route_for(now, dst)
        if route is not None:
            sr = self._send_data(packet, route)
            if len(self._out) > _MAX_MEMO:
                self._out.clear()
                self.counters["memo-cleared"] += 1
            self._out[dst.packed] = (self.cache.generation, now, route[1], sr)
            return
        self.send_buffer.add(now, dst, bytes(packet))
        self._drain_buffer_drops()
        if dst not in self._discoveries:
            self._start_discovery(now, dst)

    def link_event(self, now: float, event: LinkEvent) -> None:
        self._now = now
        if isinstance(event, LinkUp):
            # Link sensing saw the neighbour again: the held link may be cached again.
            if self._held.pop(frozenset((self.address, event.neighbour)), None) is not None:
                self.counters["held-link-up"] += 1
            # A neighbour is a one-hop route (RFC 4728 4.1: any usable route info).
            self._learn(now, (self.address, event.neighbour))
            # RFC 4728 8.2.1 lets a node ask again when it believes the topology
            # changed: a discovery waiting out its back-off asks now (ELFN recovery).
            gap = self.config.nonprop_request_timeout_ms / 1000
            for d in self._discoveries.values():
                if d.attempts >= 1 and d.next_at > now and now - d.sent_at >= gap:
                    self.counters["discovery-restarted"] += 1
                    d.next_at = now
                    self._schedule(now, _TIMER_DISCOVERY, d.target)
        elif isinstance(event, LinkDown):
            self._link_broken(now, event.neighbour, None, event.reason)
        elif isinstance(event, TxFailed):
            self._link_broken(now, event.neighbour, event.packet, "tx-failed")
        elif isinstance(event, SignalSample) and self._atra_on:
            self._atra_signal(now, event.neighbour, event.signal_dbm)

    def rediscover(self, now: float, dst: IPv4Address) -> bool:
        """Ask for ``dst`` now instead of waiting out the request back-off.

        RFC 4728 8.2.1 lets a node send a new request early when it has reason to think
        the topology changed (an ELFN probe). At most one request per target per
        NonpropRequestTimeout; the attempt count and the scheduled back-off request stay
        as they were, so a probing sender neither exhausts MaxRequestRexmt faster nor
        delays the discovery's own next request.
        """
        self._now = now
        cfg = self.config
        gap = cfg.nonprop_request_timeout_ms / 1000
        d = self._discoveries.get(dst)
        if d is None:
            if dst == self.address or self._route_for(now, dst) is not None:
                return False
            # No route and nobody asking: a propagating request straight away.
            d = self._discoveries[dst] = _Discovery(dst, now, attempts=1)
        elif now - d.sent_at < gap:
            self.counters["rediscover-ratelimited"] += 1
            return False
        self._extra_request(now, d)
        self.counters["rediscover-requests"] += 1
        return True

    def _extra_request(self, now: float, d: _Discovery) -> None:
        """A propagating request for ``d`` now, outside the back-off schedule (ELFN's
        rediscover, SMR's asks). It never postpones the request the back-off already
        scheduled; a discovery with none pending gets one, so it goes on asking (8.2.1)."""
        cfg = self.config
        self._send_request(now, d, ttl=cfg.discovery_hop_limit)
        interval = cfg.request_period_ms / 1000 * (2 ** max(d.attempts - 1, 0))
        due = now + min(interval, cfg.max_request_period_s)
        if d.next_at <= now or due < d.next_at:
            d.next_at = due
            self._schedule(due, _TIMER_DISCOVERY, d.target)

    def handle_timer(self, now: float) -> None:
        self._now = now
        while self._timers and self._timers[0][0] <= now:
            _, _, kind, data = heapq.heappop(self._timers)
            if kind == _TIMER_BCAST:
                self.counters["requests-forwarded"] += 1
                self._emit(SendFrame(None, data))
            elif kind == _TIMER_SEND:
                self._emit(SendFrame(*data))
            elif kind == _TIMER_DISCOVERY:
                d = self._discoveries.get(data)
                if d is not None and d.next_at <= now:
                    self._discovery_timeout(now, d)
        if self._cache_check is not None and self._cache_check <= now:
            self.cache.expire(now)
            self._cache_check = self.cache.next_expiry()
        if self.send_buffer.expire(now):
            self._drain_buffer_drops()
        if self._bus.pending or self._bus.holds:
            for nh, pkt in self._bus.due(now):
                self._emit(SendFrame(nh, pkt))
            for pkt in self._bus.expired(now):
                self._drop("bus-hold-timeout", pkt)
        for target in [t for t in self._discoveries if not self._wanted(t)]:
            # Nothing waits for this target any more (timed out): stop asking.
            del self._discoveries[target]
        if self._atra_on:
            self._atra.handle_timer(now)

    def get_timer(self) -> float | None:
        t = self._timers[0][0] if self._timers else None
        atra = self._atra.get_timer() if self._atra_on else None
        for e in (self.send_buffer.next_expiry(), self._cache_check, self._bus.next_timer(), atra):
            if e is not None and (t is None or e < t):
                t = e
        return t

    # ------------------------------------------------------------------ receive path
    def _source_routed(
        self,
        now: float,
        packet: bytes,
        ihl: int,
        o: int,
        total: int,
        src_mac: bytes | None,
        rssi: float | None,
        control: bool,
    ) -> None:
        """Forward or deliver by the Source Route option at ``o`` (RFC 4728 8.1.4).

        Reads the few bytes it needs in place; what depends only on the route (the
        next hop, neighbour and cache learning) is memoised per (route, sender MAC) and
        refreshed every ``_HOT_REFRESH`` seconds.
        """
        olen = packet[o + 1]
        n4 = olen - 2
        if n4 < 0 or n4 & 3:
            raise dsr.MalformedDsr(f"source route option length {olen}")
        b3 = packet[o + 3]
        sl = b3 & 0x3F
        if sl > n4 >> 2:
            raise dsr.MalformedDsr(f"segments left {sl} exceeds the {n4 >> 2} addresses")
        a0 = o + 4
        pos = a0 + n4 - 4 * sl  # where this receiver's address sits (a0 + n4: the IP dst)
        if (packet[pos : pos + 4] if sl else packet[ipv4.DST]) != self._me:
            self._overheard(now, packet, o)
            return
        key = packet[12:20] + packet[o + 2 : a0 + n4] + (src_mac or b"")
        hot = self._hot.get(key)
        if hot is None or now - hot[0] >= _HOT_REFRESH:
            hot = self._learn_from_route(now, packet, o, pos, sl, src_mac, rssi)
            if len(self._hot) > _MAX_MEMO:
                self._hot.clear()
                self.counters["memo-cleared"] += 1
            self._hot[key] = hot
        if not sl:
            self._deliver(packet, ihl, total, control)
            if self._atra_on and self._atra.cfg.srp and not control:
                self._atra_pin(now, packet, o)
            return
        if self._bus_on and not control and self._bus_forwarding(now, packet, ihl, o, total):
            return
        buf = bytearray(packet[:total])
        buf[o + 3] = b3 - 1  # Segments Left is the low 6 bits and is >= 1 here
        if ipv4.decrement_ttl(buf) == 0:
            self._drop("ttl-expired", buf)
            return
        self.counters["control-forwarded" if control else "data-forwarded"] += 1
        if self._atra_on and self._atra.track and not control:
            self._atra.pre.used(now, hot[1], self._addr(packet[ipv4.SRC]))
        self._actions.append(SendFrame(hot[1], bytes(buf)))

    def _learn_from_route(
        self,
        now: float,
        packet: bytes,
        o: int,
        pos: int,
        sl: int,
        src_mac: bytes | None,
        rssi: float | None,
    ) -> tuple[float, IPv4Address | None]:
        """Neighbour and route-cache learning from a source-routed packet we received;
        returns (now, next hop)."""
        a0 = o + 4
        n = (packet[o + 1] - 2) >> 2
        salvage = ((packet[o + 2] & 0x03) << 2) | (packet[o + 3] >> 6)
        if pos > a0:
            prev: bytes | None = packet[pos - 4 : pos]
        else:
            prev = packet[ipv4.SRC] if salvage == 0 else None
        if src_mac is not None and prev is not None:
            self.neighbours.learn(now, self._addr(prev), src_mac, rssi)
        addrs = [packet[a0 + 4 * i : a0 + 4 * i + 4] for i in range(n)]
        full = ([packet[ipv4.SRC]] if salvage == 0 else []) + addrs + [packet[ipv4.DST]]
        self._learn_around(now, [self._addr(a) for a in full])
        if not sl:
            return now, None
        return now, self._addr(packet[pos + 4 : pos + 8] if sl > 1 else packet[ipv4.DST])

    def _deliver(self, packet: bytes, ihl: int, total: int, control: bool) -> None:
        """Strip the DSR header and hand the original packet up (RFC 4728 8.1.4)."""
        nh = packet[ihl]
        if nh == dsr.NO_NEXT_HEADER:
            if not control:
                self.counters["empty-delivered"] += 1
            return
        end = ihl + dsr.HEADER_LEN + ((packet[ihl + 2] << 8) | packet[ihl + 3])
        head = bytearray(packet[:ihl])
        length = ihl + total - end
        head[2] = length >> 8
        head[3] = length & 0xFF
        head[ipv4.PROTOCOL] = nh
        head[ipv4.CHECKSUM] = head[ipv4.CHECKSUM + 1] = 0
        c = ipv4.checksum(head)
        head[10] = c >> 8
        head[11] = c & 0xFF
        self.counters["data-delivered"] += 1
        self._actions.append(Deliver(bytes(head) + packet[end:total]))

    def _learn_around(self, now: float, full: list[IPv4Address], fresh: float = -1.0) -> None:
        """Cache both directions from this node along a route it is on (links are
        bidirectional on 802.11, see module docstring)."""
        try:
            p = full.index(self.address)
        except ValueError:
            return
        self._learn(now, tuple(full[p:]), fresh)
        self._learn(now, tuple(reversed(full[: p + 1])), fresh)

    def _hold_link(self, now: float, a: IPv4Address, b: IPv4Address, local: bool) -> None:
        """Remember that link a-b failed (either direction, like the cache's links)."""
        k = frozenset((a, b))
        old = self._held.get(k)
        if old is None and len(self._held) >= _MAX_HELD:
            # Bounded (forged Route Errors name any link): the hold that ends first goes.
            del self._held[min(self._held, key=lambda h: self._held[h].until)]
            self.counters["held-links-evicted"] += 1
        self._held[k] = _HeldLink(
            now,
            now + self.config.broken_link_hold_s,
            local or (old is not None and old.local and now < old.until),
        )

    def _unheld_prefix(self, now: float, path: Path, fresh: float) -> Path:
        """``path`` cut before its first held link. ``fresh``: the route answers a
        request this node sent at that time, so a link held (by another node's Route
        Error) before then has been crossed since and is released; a link this node
        saw fail itself waits for LinkUp or the hold time."""
        held = self._held
        for i in range(len(path) - 1):
            k = frozenset((path[i], path[i + 1]))
            h = held.get(k)
            if h is None:
                continue
            if now >= h.until or (not h.local and h.since < fresh):
                del held[k]
                continue
            self.counters["held-link-refused"] += 1
            return path[: i + 1]
        return path

    def _learn(self, now: float, path: Path, fresh: float = -1.0) -> None:
        if self._held:
            path = self._unheld_prefix(now, path, fresh)
        if len(path) < 2 or len(path) - 1 > self.config.max_route_length:
            return
        if not self.cache.add(now, path):
            return
        if self._atra_on and self._atra.waiting:
            self._atra_learned(now)
        expiry = now + self.config.route_cache_timeout_s
        if self._cache_check is None or expiry < self._cache_check:
            self._cache_check = expiry
        for node in path[1:]:
            if node in self._discoveries or node in self._down or self.send_buffer.waiting(node):
                self._route_up(now, node)

    def _mark_down(self, dst: IPv4Address) -> None:
        """``dst`` was reported down (a route-up follows when it is back); bounded."""
        if dst not in self._down and len(self._down) >= _MAX_DOWN:
            self._down.pop()
            self.counters["down-evicted"] += 1
        self._down.add(dst)

    def _route_up(self, now: float, dst: IPv4Address) -> None:
        route = self._route_for(now, dst)
        if route is None:
            return
        d = self._discoveries.pop(dst, None)
        if d is not None:
            # Route discovery latency (issue 10): first request to a usable route.
            self.counters["discoveries-completed"] += 1
            self.counters["discovery-latency-ms"] += round((now - d.started) * 1000)
        self._down.discard(dst)
        self._emit(
            Notify(
                ev.RouteUp(
                    dst=str(dst),
                    next_hop=str(route[1]),
                    hops=len(route) - 1,
                    path=tuple(str(a) for a in route),
                )
            )
        )
        for pkt in self.send_buffer.release(dst):
            self._send_data(pkt, route)
        if self._bus.holds:
            self._bus_repaired(now, dst)

    # ------------------------------------------------------------------ control path
    def _control(
        self, now: float, packet: bytes, src_mac: bytes | None, rssi: float | None
    ) -> None:
        ip, hdr = dsr.parse(packet)
        rreq = hdr.first(dsr.RouteRequest)
        if rreq is not None:
            self._request(now, packet, ip, rreq.option, src_mac, rssi)
            return
        buf = bytearray(packet)
        keep: list[dsr.ParsedOption] = []
        changed = False
        items: list[mx.Item] = []
        for p in hdr.options:
            opt = p.option
            if isinstance(opt, dsr.UnknownOption) and opt.type in mx.DSR_TYPES:
                item = mx.from_dsr(opt.type, opt.data)
                if item is not None:
                    items.append(item)
            elif isinstance(opt, dsr.UnknownOption):
                action = dsr.unknown_option_action(opt.type)
                self.counters[f"unknown-option-{action}"] += 1
                if action == "drop":
                    self._drop("unknown-option", packet)
                    return
                if action == "remove":
                    changed = True
                    continue
            keep.append(p)
        if changed:
            opts = [p.option for p in keep]
            inner = bytes(packet[hdr.end : ip.total_length])
            buf = bytearray(_with_options(packet, ip, hdr.next_header, opts, inner))
            ip, hdr = dsr.parse(buf)
        elfn = next((i for i in items if isinstance(i, mx.Flow)), None)
        predicted = self._atra_on and any(isinstance(i, mx.Predicted) for i in items)
        for p in hdr.options:
            opt = p.option
            if isinstance(opt, dsr.RouteError) and predicted:
                self._atra_error_seen(now, opt)  # the link still works: not cut
            elif isinstance(opt, dsr.RouteError):
                self._route_error_seen(now, ip, opt, elfn)
            elif isinstance(opt, dsr.RouteReply):
                self.counters["replies-seen"] += 1
                d = self._discoveries.get(opt.addresses[-1]) if opt.addresses else None
                fresh = d.sent_at if d is not None and ip.dst == self.address else -1.0
                if d is None and opt.addresses and ip.dst == self.address:
                    fresh = self._refreshed.get(opt.addresses[-1], -1.0)
                if ip.dst == self.address and opt.addresses:
                    self._reply_received(now, (self.address, *opt.addresses), fresh)
                self._learn_around(now, [ip.dst, *opt.addresses], fresh)
        sr = hdr.first(dsr.SourceRoute)
        relay: list[mx.Notice] = []
        if items:
            relay = self._bus_control(now, ip, sr, buf, src_mac, items)
            if relay is None:
                return  # a duplicate notice: acknowledged again, not relayed again
        if sr is not None:
            mark = len(self._actions)
            self._source_routed(
                now, bytes(buf), ip.ihl, sr.offset, ip.total_length, src_mac, rssi, True
            )
            if relay and self._bus_on:
                # Relayed an ERDN/ERSN: keep it until the next hop acknowledges it.
                sent = [a for a in list(self._actions)[mark:] if isinstance(a, SendFrame)]
                for a in sent[:1]:
                    for n in relay:
                        self._bus.sent(now, n.key, a.next_hop, a.packet, flow_key(n.flow))
            return
        if ip.dst == self.address:
            # A one-hop control packet without a Source Route (other implementations).
            if src_mac is not None:
                self.neighbours.learn(now, ip.src, src_mac, rssi)
            self._learn(now, (self.address, ip.src))
            self._deliver(bytes(buf), ip.ihl, ip.total_length, control=True)
            return
        self._drop("no-source-route", packet)

    def _request(
        self,
        now: float,
        packet: bytes,
        ip: ipv4.IPv4Header,
        rreq: dsr.RouteRequest,
        src_mac: bytes | None,
        rssi: float | None,
    ) -> None:
        """Process a received Route Request (RFC 4728 8.2.2)."""
        init = ip.src
        if init == self.address:
            self.counters["own-request-heard"] += 1
            return
        addrs = rreq.addresses
        prev = addrs[-1] if addrs else init
        if src_mac is not None:
            self.neighbours.learn(now, prev, src_mac, rssi)
        if self.address in addrs:
            self.counters["request-loop"] += 1
            return
        if self._atra_on and self._atra.suppress_request(now, prev):
            return  # Atra: not over a link predicted to fail
        self.counters["requests-received"] += 1
        # The recorded route, reversed, leads back to the initiator.
        self._learn(now, (self.address, *reversed(addrs), init))
        if rreq.target == self.address:
            self._target_request(now, init, rreq.ident, addrs)
            return
        ids = self._request_table.get(init)
        copy = ids is not None and rreq.ident in ids  # SMR forwards some later copies
        if self._request_seen(now, init, rreq.ident, prev, len(addrs)):
            self.counters["request-duplicate"] += 1
            return
        if self.config.cache_replies:
            route = self.cache.lookup(now, rreq.target)
            if route is not None:
                full = (init, *addrs, *route)
                if len(set(full)) == len(full) and len(full) - 1 <= self.config.max_route_length:
                    # 8.2.5: wait H * (h - 1 + r) so that shorter replies from other
                    # caches go first (no reply storm); H is BroadcastJitter here.
                    h = len(full) - 1
                    delay = self.config.broadcast_jitter_ms / 1000 * (h - 1 + self._rng.random())
                    self.counters["cache-replies"] += 1
                    self._reply(now, init, (*addrs, *route), tuple(reversed(addrs)), delay)
                    return
        if ip.ttl <= 1:
            self.counters["request-ttl-end"] += 1  # the ring-0 request stops here
            return
        if len(addrs) + 2 > self.config.max_route_length:
            self.counters["request-too-long"] += 1
            return
        # Distinct requests count against the limit; a later copy SMR forwards does not
        # (SMR bounds those per request).
        if not copy and self._over_limit(
            now, self._fwd_times, self.config.request_forward_ratelimit
        ):
            self.counters["request-ratelimited"] += 1
            return
        fwd = dsr.encapsulate(
            dsr.IPFields(init, BROADCAST, ttl=ip.ttl - 1, tos=ip.tos, ident=ip.ident),
            [dsr.RouteRequest(rreq.ident, rreq.target, (*addrs, self.address))],
            dsr.NO_NEXT_HEADER,
        )
        delay = self._rng.uniform(0, self.config.broadcast_jitter_ms / 1000)
        self._schedule(now + delay, _TIMER_BCAST, fwd)

    # ------------------------------------------------------------------ extension points
    # Small named hooks where a DSR-based protocol (SMR, engines/smr.py) differs; the
    # defaults are RFC 4728's behaviour.
    def _route_for(self, now: float, dst: IPv4Address) -> Path | None:
        """The route this node's own packets to ``dst`` take (8.1.3: the cache)."""
        return self.cache.lookup(now, dst)

    def _request_seen(
        self, now: float, init: IPv4Address, ident: int, prev: IPv4Address, hops: int
    ) -> bool:
        """True if this (initiator, id) request is a duplicate not to be forwarded
        (8.2.2); else remember it. ``prev`` sent this copy, ``hops`` = recorded hops."""
        seen = self._request_table.get(init)
        if seen is not None and ident in seen:
            return True
        self._remember_request(init, ident)
        return False

    def _target_request(
        self, now: float, init: IPv4Address, ident: int, addrs: tuple[IPv4Address, ...]
    ) -> None:
        """Request ``ident`` for this node arrived over ``addrs`` (8.2.4: reply to
        each copy; with ``target_replies: first`` to the first copy only)."""
        if self.config.target_replies == "first":
            key = (init, ident)
            if key in self._answered_requests:
                self.counters["target-copies-unanswered"] += 1
                return
            self._answered_requests[key] = None
            if len(self._answered_requests) > self.config.request_table_size:
                self._answered_requests.popitem(last=False)
        self._reply(now, init, (*addrs, self.address), tuple(reversed(addrs)))

    def _reply_received(self, now: float, route: Path, fresh: float) -> None:
        """A Route Reply addressed to this node brought ``route`` (route[0] is this
        node), before the cache learns it; ``fresh`` as in :meth:`_unheld_prefix`."""

    def _links_cut(self, now: float, a: IPv4Address, b: IPv4Address, reason: str) -> None:
        """Link a-b was cut from the cache (8.3.5; ``reason`` as in RouteDown)."""

    def link_predicted_to_fail(self, now: float, neighbour: IPv4Address) -> bool:
        """A failure prediction (Atra) says the link to ``neighbour`` will break soon.

        Plain DSR has no second route to move to: False (nothing done). SMR moves
        its primaries through ``neighbour`` to their backups and returns True if it did.
        """
        self._now = now
        return False

    def _remember_request(self, init: IPv4Address, ident: int) -> None:
        table = self._request_table
        ids = table.get(init)
        if ids is None:
            ids = table[init] = deque(maxlen=self.config.request_table_ids)
            if len(table) > self.config.request_table_size:
                table.popitem(last=False)  # the initiator heard least recently
                self.counters["request-table-evicted"] += 1
        else:
            table.move_to_end(init)
        ids.append(ident)

    def _reply(
        self,
        now: float,
        to: IPv4Address,
        route: tuple[IPv4Address, ...],
        back: tuple[IPv4Address, ...],
        delay: float = 0.0,
    ) -> None:
        """Send a Route Reply carrying ``route`` to ``to`` via intermediate hops ``back``
        (RFC 4728 8.2.4, 8.2.3, 8.4.4), after ``delay`` seconds if given."""
        pkt = dsr.encapsulate(
            dsr.IPFields(self.address, to, ttl=self.config.discovery_hop_limit),
            [dsr.RouteReply(route), dsr.SourceRoute(back, len(back))],
            dsr.NO_NEXT_HEADER,
        )
        self.counters["replies-sent"] += 1
        if delay > 0:
            self._schedule(now + delay, _TIMER_SEND, (back[0] if back else to, pkt))
        else:
            self._emit(SendFrame(back[0] if back else to, pkt))

    def _overheard(self, now: float, buf: bytes, o: int) -> None:
        """A frame whose source route names another receiver (RFC 4728 8.4.4)."""
        self.counters["overheard"] += 1
        a0 = o + 4
        n = (buf[o + 1] - 2) >> 2
        idx = n - (buf[o + 3] & 0x3F)
        salvage = ((buf[o + 2] & 0x03) << 2) | (buf[o + 3] >> 6)
        if not self.config.gratuitous_replies or salvage:
            return
        addrs = [bytes(buf[a0 + 4 * i : a0 + 4 * i + 4]) for i in range(n)]
        full = [bytes(buf[ipv4.SRC]), *addrs, bytes(buf[ipv4.DST])]
        # full[idx + 1] is the intended receiver, full[idx] the transmitter.
        try:
            j = full.index(self._me, idx + 2)
        except ValueError:
            return  # not later in the route than the next hop: nothing to shorten
        src, transmitter = self._addr(full[0]), self._addr(full[idx])
        last = self._grat_sent.get((src, transmitter))
        if last is not None and now - last < self.config.grat_reply_holdoff_s:
            self.counters["grat-reply-holdoff"] += 1
            return
        if len(self._grat_sent) > _MAX_MEMO:
            self._grat_sent.clear()
            self.counters["memo-cleared"] += 1
        self._grat_sent[(src, transmitter)] = now
        short = [self._addr(a) for a in full[: idx + 1] + full[j:]]
        self._learn_around(now, short)
        self.counters["grat-replies"] += 1
        me_at = idx + 1
        back = tuple(reversed(short[1:me_at]))
        self._reply(now, src, tuple(short[1:]), back)

    # ------------------------------------------------------------------ discovery
    def _start_discovery(self, now: float, target: IPv4Address) -> None:
        d = self._discoveries[target] = _Discovery(target, now)
        self._send_request(now, d, ttl=1)  # ring 0: neighbours only (8.2.1)
        d.next_at = now + self.config.nonprop_request_timeout_ms / 1000
        self._schedule(d.next_at, _TIMER_DISCOVERY, target)

    def _send_request(self, now: float, d: _Discovery, ttl: int) -> None:
        self._next_id = (self._next_id + 1) & 0xFFFF
        d.last_id = self._next_id
        d.sent_at = now
        pkt = dsr.encapsulate(
            dsr.IPFields(self.address, BROADCAST, ttl=ttl),
            [dsr.RouteRequest(d.last_id, d.target)],
            dsr.NO_NEXT_HEADER,
        )
        self.counters["requests-sent"] += 1
        self._emit(SendFrame(None, pkt))

    def _discovery_timeout(self, now: float, d: _Discovery) -> None:
        cfg = self.config
        if not self._wanted(d.target):
            del self._discoveries[d.target]
            return
        if d.attempts > cfg.max_request_rexmt:
            # Gave up (8.2.1): what waits for this target cannot be delivered.
            del self._discoveries[d.target]
            if (
                self._atra_on
                and self._atra.still_waiting(now, d.target)
                and not self.send_buffer.waiting(d.target)
            ):
                # Only RFP was asking: the current route still works; no route-down.
                self._atra.done_waiting(d.target)
                return
            self.counters["discoveries-failed"] += 1
            self.send_buffer.discard(d.target, "no-route")
            self._drain_buffer_drops()
            self._bus_give_up(d.target)
            self._emit(Notify(ev.RouteDown(dst=str(d.target), reason="no-route")))
            return
        self._send_request(now, d, ttl=cfg.discovery_hop_limit)
        backoff = min(cfg.request_period_ms / 1000 * (2**d.attempts), cfg.max_request_period_s)
        d.attempts += 1
        d.next_at = now + backoff
        self._schedule(d.next_at, _TIMER_DISCOVERY, d.target)

    def _refresh_route(self, now: float, dst: IPv4Address) -> None:
        """This node's own packet to ``dst`` lost the route it took: one propagating
        Route Request now, whether or not the cache still has another route.

        RFC 4728 8.2.1 lets a node start a discovery whenever it wants a route; the
        cached alternatives may be stale (Holland & Vaidya section 5): learnt from other
        nodes' requests and routes tens of seconds ago, kept for RouteCacheTimeout (300
        s). Without asking, each retransmission of a TCP flow (one RTO apart, doubling)
        tries the next stale route and the flow stalls although a short route exists.
        A running discovery already asks; else at most one request per target per
        RequestPeriod. The reply's route is newer, so the cache prefers it at equal length.
        """
        cfg = self.config
        if not cfg.rediscover_on_break or dst in self._discoveries or dst == self.address:
            return
        last = self._refreshed.get(dst)
        if last is not None and now - last < cfg.request_period_ms / 1000:
            self.counters["rediscover-on-break-ratelimited"] += 1
            return
        if len(self._refreshed) > _MAX_MEMO:
            self._refreshed.clear()
            self.counters["memo-cleared"] += 1
        self._refreshed[dst] = now
        self._send_request(now, _Discovery(dst, now, attempts=1), ttl=cfg.discovery_hop_limit)
        self.counters["rediscover-on-break"] += 1

    # ------------------------------------------------------------------ sending data
    def _send_data(self, packet: bytes, route: Path, salvage: int = 0) -> bytes:
        """Source a packet along ``route`` (route[0] is this node; RFC 4728 8.1.3).

        With ``salvage`` > 0 this node is the salvager and ``route``'s own first address
        is listed too (8.4.3). Returns the Source Route option's bytes.
        """
        if salvage:
            hops = route[:-1]
            sr = dsr.pack_option(dsr.SourceRoute(hops, len(hops) - 1, salvage))
        else:
            hops = route[1:-1]
            sr = dsr.pack_option(dsr.SourceRoute(hops, len(hops)))
        self._originate(packet, sr, route[1])
        return sr

    def _originate(self, packet: bytes, sr: bytes, next_hop: IPv4Address) -> None:
        """Insert a DSR header with the Source Route option ``sr`` (IP fields kept)."""
        ihl = (packet[0] & 0x0F) * 4
        total = (packet[2] << 8) | packet[3]
        head = bytearray(packet[:ihl])
        length = total + dsr.HEADER_LEN + len(sr)
        head[2] = length >> 8
        head[3] = length & 0xFF
        proto = head[ipv4.PROTOCOL]
        head[ipv4.PROTOCOL] = ipv4.PROTO_DSR
        head[ipv4.CHECKSUM] = head[ipv4.CHECKSUM + 1] = 0
        c = ipv4.checksum(head)
        head[10] = c >> 8
        head[11] = c & 0xFF
        dsr_hdr = bytes((proto, 0, len(sr) >> 8, len(sr) & 0xFF))
        if self._atra_on and self._atra.track:
            self._atra_originated(packet, next_hop)
        self.counters["data-sent"] += 1
        self._actions.append(SendFrame(next_hop, bytes(head) + dsr_hdr + sr + packet[ihl:total]))

    # ------------------------------------------------------------------ maintenance
    def _link_broken(
        self, now: float, neighbour: IPv4Address, packet: bytes | None, reason: str
    ) -> None:
        """The link to ``neighbour`` broke (RFC 4728 8.3.1): purge, report, salvage."""
        failed = None
        if packet is not None:
            try:
                failed = self._failed_packet(packet)
            except (ValueError, IndexError, struct.error):
                self.counters["malformed"] += 1
        elfn = failed[3] if failed is not None else {}
        self._hold_link(now, self.address, neighbour, local=True)
        lost = self._purge_link(now, self.address, neighbour, reason)
        if lost:
            self.counters["link-breaks"] += 1
        for dst in sorted(lost):
            fields: dict[str, Any] = {
                "dst": str(dst),
                "next_hop": str(neighbour),
                "reason": reason,
                "broken_link": (str(self.address), str(neighbour)),
            }
            if elfn.get("dst") == str(dst):
                fields.update(elfn)
            self._mark_down(dst)
            self._emit(Notify(ev.RouteDown(**fields)))
        if failed is not None:
            self._maintain(now, neighbour, packet, failed)
        if self._atra_on:
            self._atra_broken(now, neighbour, packet)

    def _purge_link(
        self, now: float, a: IPv4Address, b: IPv4Address, reason: str = "link-broken"
    ) -> dict[IPv4Address, IPv4Address]:
        """Cut the link a-b from the cache; the destinations left without any route,
        each with the next hop it had."""
        before = self.cache.destinations(now)
        cut = self.cache.remove_link(a, b)
        self._links_cut(now, a, b, reason)
        if self._atra_on and self._atra.cfg.srp:
            self._atra.srp.unpin_link(a, b)  # pinned ACKs must not follow a cut link
        if not cut:
            return {}
        lost = before - self.cache.destinations(now)
        return {dst: p[1] for p in cut for dst in p[1:] if dst in lost}

    def _failed_packet(
        self, packet: bytes
    ) -> tuple[ipv4.IPv4Header, dsr.DsrHeader, bytes, dict] | None:
        ip, hdr = dsr.parse(packet)
        inner = dsr.strip(packet)
        fields: dict[str, Any] = {"src": str(ip.src), "dst": str(ip.dst), "proto": hdr.next_header}
        if hdr.next_header == ipv4.PROTO_TCP:
            iihl = (inner[0] & 0x0F) * 4
            t = ipv4.tcp_ports_seq(inner[iihl:])
            if t is not None:
                fields.update(sport=t[0], dport=t[1], seq=t[2])
        return ip, hdr, inner, fields

    def _maintain(self, now: float, neighbour: IPv4Address, packet: bytes, failed: tuple) -> None:
        ip, hdr, inner, fields = failed
        sr = hdr.first(dsr.SourceRoute)
        salvage = sr.option.salvage if sr is not None else 0
        is_error = bool(hdr.find(dsr.RouteError))
        if ip.src == self.address:
            if hdr.next_header == dsr.NO_NEXT_HEADER:
                self._drop("link-broken", packet)
                return
            # Our own packet: try another route, else wait for a new discovery.
            self.counters["rerouted"] += 1
            self.send_local(now, inner)
            self._refresh_route(now, ip.dst)
            return
        if is_error:
            self._drop("link-broken", packet)  # never a Route Error about a Route Error
            return
        data = hdr.next_header != dsr.NO_NEXT_HEADER
        flow = flow_from_fields(fields) if data else None
        key = None
        if self._bus_on and flow is not None and flow.proto == ipv4.PROTO_TCP:
            key = (flow.src.packed, flow.dst.packed, flow.sport, flow.dport)
            if key in self._bus.holds:
                self._bus_hold(key, packet)  # this flow's break is already being handled
                return
        notices: list[mx.Item] = [flow] if flow is not None else []
        if key is not None and flow is not None:
            notices.append(mx.Notice(mx.KIND_ERDN, self._bus.next_ident(), self.address, flow))
        self._send_error(now, ip.src, neighbour, salvage, notices)
        if not data:
            self._drop("link-broken", packet)
            return
        if key is not None:
            self._bus_pivot(now, key, ip, sr.option if sr is not None else None, packet, flow)
            return
        if self.config.salvage and salvage < self.config.max_salvage_count:
            route = self.cache.lookup(now, ip.dst)
            if route is not None:
                # 8.4.3: this node becomes Address[1] of the new route.
                self.counters["salvaged"] += 1
                self._send_data(inner, route, salvage + 1)
                return
        self._drop("link-broken", packet)

    def _send_error(
        self,
        now: float,
        to: IPv4Address,
        unreachable: IPv4Address,
        salvage: int,
        notices: list[mx.Item] | None = None,
    ) -> None:
        """A NODE_UNREACHABLE Route Error to the failed packet's source (8.3.4), with
        manetkit's ELFN (and ERDN) options in the same DSR header."""
        if self._over_limit(now, self._rerr_times, self.config.rerr_ratelimit):
            self.counters["errors-ratelimited"] += 1
            return
        err = dsr.RouteError.node_unreachable(self.address, to, unreachable, salvage)
        if self._send_control(now, to, [err], notices or []):
            self.counters["errors-sent"] += 1
        else:
            self.counters["errors-unroutable"] += 1

    def _send_control(
        self,
        now: float,
        to: IPv4Address,
        options: list,
        notices: list[mx.Item],
        fallback: tuple[IPv4Address, ...] = (),
    ) -> bool:
        """Source-route ``options`` plus ``notices`` to ``to`` by the cache (else by
        ``fallback``, a path from here to ``to``); ERDN/ERSN are kept for retransmission
        until acknowledged. False when there is no route."""
        route = self.cache.lookup(now, to) or (fallback if len(fallback) >= 2 else None)
        if route is None:
            return False
        hops = route[1:-1]
        pkt = dsr.encapsulate(
            dsr.IPFields(self.address, to, ttl=self.config.discovery_hop_limit),
            [*options, *(mx.dsr_option(n) for n in notices), dsr.SourceRoute(hops, len(hops))],
            dsr.NO_NEXT_HEADER,
        )
        self._emit(SendFrame(route[1], pkt))
        for n in notices:
            if isinstance(n, mx.Notice):
                self._bus.sent(now, n.key, route[1], pkt, flow_key(n.flow))
        return True

    def _route_error_seen(
        self, now: float, ip: ipv4.IPv4Header, err: dsr.RouteError, elfn: mx.Flow | None = None
    ) -> None:
        """Any node handling a Route Error cuts the broken link (RFC 4728 8.3.5).

        At the error's destination (the failed packet's source) an ELFN option adds the
        failed packet's flow to the route-down event (Holland & Vaidya section 6).
        """
        self.counters["errors-seen"] += 1
        bad = err.unreachable
        if bad is None:
            return
        if err.error_src != self.address:
            self._hold_link(now, err.error_src, bad, local=False)
        lost = self._purge_link(now, err.error_src, bad, "rerr")
        if err.error_dst != self.address:
            return
        if elfn is not None and elfn.src == self.address:
            self._refresh_route(now, elfn.dst)  # our packet to elfn.dst was lost
        for dst, next_hop in sorted(lost.items()):
            self._mark_down(dst)
            fields: dict[str, Any] = {
                "dst": str(dst),
                "next_hop": str(next_hop),
                "reason": "rerr",
                "broken_link": (str(err.error_src), str(bad)),
                "broken_by": str(err.error_src),
            }
            if elfn is not None and elfn.dst == dst and elfn.src == self.address:
                fields.update(elfn.fields(), elfn=True)
                if elfn.proto == ipv4.PROTO_TCP:
                    fields["seq"] = elfn.seq
                self.counters["elfn-received"] += 1
            self._emit(Notify(ev.RouteDown(**fields)))

    # ------------------------------------------------------------------ TCP-BuS
    def _wanted(self, target: IPv4Address) -> bool:
        """Something waits for a route to ``target``: our send buffer, a pivot hold, or
        Atra's RFP looking for a way around a predicted link (it keeps asking, with the
        request back-off, until the prediction's horizon: Anantharaman et al. IV-A)."""
        if self.send_buffer.waiting(target):
            return True
        if self._atra_on and self._atra.still_waiting(self._now, target):
            return True
        t = target.packed
        return any(h.pivot and k[1] == t for k, h in self._bus.holds.items())

    def _bus_hold(self, key: FlowKey, packet: bytes) -> None:
        old = self._bus.hold(key, packet)
        if old is not None:
            self._drop("bus-hold-full", old)  # type: ignore[arg-type]

    def _bus_forwarding(self, now: float, packet: bytes, ihl: int, o: int, total: int) -> bool:
        """A data packet about to be forwarded (bus on): note its ACK number for
        Last_ACK, and keep it if its flow is held here (Kim, Toh & Choi IV-C)."""
        end = ihl + dsr.HEADER_LEN + ((packet[ihl + 2] << 8) | packet[ihl + 3])
        tcp = tcp_fields(packet, packet[ihl], end)
        if tcp is None:
            return False
        self._bus.observe(packet[ipv4.SRC], packet[ipv4.DST], tcp)
        key = (packet[ipv4.SRC], packet[ipv4.DST], tcp[0], tcp[1])
        if key not in self._bus.holds:
            return False
        self._bus_hold(key, packet[:total])
        return True

    def _bus_pivot(
        self,
        now: float,
        key: FlowKey,
        ip: ipv4.IPv4Header,
        sr: dsr.SourceRoute | None,
        packet: bytes,
        flow: mx.Flow,
    ) -> None:
        """This node is the pivot of ``flow``: hold its packets and repair locally (a
        cached route at once, else a Route Discovery from here), then ERSN."""
        h = self._bus.start(now, key, pivot=True)
        h.head_seq = flow.seq
        if sr is not None:
            full = ([ip.src] if sr.salvage == 0 else []) + list(sr.addresses) + [ip.dst]
            if self.address in full:
                h.upstream = tuple(full[: full.index(self.address) + 1])
        self._bus_hold(key, packet)
        self.counters["bus-pivot"] += 1
        if self.cache.lookup(now, ip.dst) is not None:
            self._bus_repaired(now, ip.dst)
        elif ip.dst not in self._discoveries:
            self._start_discovery(now, ip.dst)

    def _bus_repaired(self, now: float, dst: IPv4Address) -> None:
        """A route to ``dst`` exists again: every pivot hold for it sends its ERSN
        (with the new full route as a Route Reply, so the source and the nodes on the
        way learn it) and its packets go out in order over the new route."""
        route = self.cache.lookup(now, dst)
        if route is None:
            return
        for key in self._bus.pivot_keys(dst.packed):
            h = self._bus.holds[key]
            ersn = self._bus.ersn_for(key, dst, self.address)
            options: list = []
            full = (*h.upstream, *route[1:])
            src = ersn.flow.src
            if h.upstream and h.upstream[0] == src and len(set(full)) == len(full):
                options.append(dsr.RouteReply(full[1:]))
            back = tuple(reversed(h.upstream))
            self._send_control(now, src, options, [ersn], back)
            for pkt in self._bus.release(key):
                self._bus_resend(now, pkt)

    def _bus_resend(self, now: float, packet: bytes) -> None:
        """Send a held packet on: over this node's route to its destination (salvaged,
        RFC 4728 8.4.3), else along its own source route."""
        try:
            ip, hdr = dsr.parse(packet)
            inner = dsr.strip(packet)
        except ValueError:
            self._drop("malformed", packet)
            return
        sr = hdr.first(dsr.SourceRoute)
        salvage = sr.option.salvage if sr is not None else 0
        route = self.cache.lookup(now, ip.dst)
        if route is not None and salvage < self.config.max_salvage_count:
            self._send_data(inner, route, salvage + 1)
        elif sr is not None:
            self._source_routed(now, packet, ip.ihl, sr.offset, ip.total_length, None, None, False)
        else:
            self._drop("bus-no-route", packet)

    def _bus_give_up(self, dst: IPv4Address) -> None:
        """Discovery for ``dst`` failed: the pivot holds for it are dropped."""
        for key in self._bus.pivot_keys(dst.packed):
            for pkt in self._bus.release(key):
                self._drop("no-route", pkt)

    def _bus_control(
        self,
        now: float,
        ip: ipv4.IPv4Header,
        sr: dsr.ParsedOption | None,
        buf: bytearray,
        src_mac: bytes | None,
        items: list[mx.Item],
    ) -> list[mx.Notice] | None:
        """manetkit notices in a control packet. Returns the ERDN/ERSN this node must
        relay reliably, or None for a duplicate (acknowledged again, not relayed)."""
        receiver, prev, final = self._position(ip, sr, buf)
        relay: list[mx.Notice] = []
        for it in items:
            if isinstance(it, mx.BusAck):
                if ip.dst == self.address:
                    self._bus.acked(it.key)
            elif isinstance(it, mx.Notice):
                if not receiver:
                    # Overheard the next hop relaying it: a passive acknowledgement.
                    by = self.neighbours.address_of(src_mac) if src_mac else None
                    if by is not None:
                        self._bus.acked(it.key, by)
                    continue
                if prev is not None:
                    ack = mx.BusAck(it.kind, it.ident, it.pivot)
                    pkt = dsr.encapsulate(
                        dsr.IPFields(self.address, prev, ttl=1),
                        [mx.dsr_option(ack)],
                        dsr.NO_NEXT_HEADER,
                    )
                    self._emit(SendFrame(prev, pkt))
                if not self._bus.first_time(now, it.key):
                    return None
                if self._bus_notice(now, it) and not final:
                    relay.append(it)
        return relay

    def _position(
        self, ip: ipv4.IPv4Header, sr: dsr.ParsedOption | None, buf: bytearray
    ) -> tuple[bool, IPv4Address | None, bool]:
        """(this node is the packet's receiver, the previous hop, it is the final one)."""
        final = ip.dst == self.address
        if sr is None:
            return final, ip.src, final
        opt = sr.option
        assert isinstance(opt, dsr.SourceRoute)
        full = ([ip.src] if opt.salvage == 0 else []) + list(opt.addresses) + [ip.dst]
        idx = len(full) - 1 - opt.segments_left
        if full[idx] != self.address or idx == 0:
            return False, None, False
        return True, full[idx - 1], idx == len(full) - 1

    def _bus_notice(self, now: float, n: mx.Notice) -> bool:
        """An ERDN/ERSN reached this node (first copy): see :meth:`BusState.on_notice`.
        False when it is not to be relayed (at the source, or a stale ERDN)."""
        out = self._bus.on_notice(now, n, self.address, self._bus_on)
        if out.event is not None:
            self._emit(Notify(out.event))
        for pkt in out.released:
            self._bus_resend(now, pkt)
        return out.relay or out.event is not None

    # ------------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        now = self._now
        self.cache.expire(now)
        return {
            "protocol": "dsr",
            "address": str(self.address),
            "paths": [
                {
                    "dst": str(e.path[-1]),
                    "next_hop": str(e.path[1]),
                    "hops": len(e.path) - 1,
                    "path": [str(a) for a in e.path],
                    "age_s": round(now - e.added, 3),
                    "idle_s": round(now - e.used, 3),
                }
                for e in sorted(self.cache.entries(), key=lambda e: (len(e.path), e.path))
            ],
            "discoveries": [
                {
                    "target": str(d.target),
                    "attempts": d.attempts,
                    "since_s": round(now - d.started, 3),
                    "next_in_s": round(d.next_at - now, 3),
                }
                for d in self._discoveries.values()
            ],
            "request_table": {str(k): list(v) for k, v in self._request_table.items()},
            "send_buffer": {
                str(d): self.send_buffer.waiting(d) for d in self.send_buffer.destinations()
            },
            "send_buffer_drops": dict(self.send_buffer.drops),
            "counters": dict(self.counters),
            "bounds": self.bounds(),
            "bus": self._bus.status(),
            **({"atra": self._atra_status()} if self._atra_on else {}),
        }

    def bounds(self) -> dict[str, dict[str, int]]:
        """Every table: entries, bound and evictions (docs/security.md "Bounded state")."""
        cfg, c = self.config, self.counters
        sb = self.send_buffer
        return {
            "route_cache": {
                "size": len(self.cache), "limit": cfg.route_cache_size,
                "evicted": self.cache.evicted,
            },
            "request_table": {
                "size": len(self._request_table), "limit": cfg.request_table_size,
                "evicted": c["request-table-evicted"],
            },
            "neighbours": {
                "size": len(self.neighbours), "limit": self.neighbours.capacity,
                "evicted": self.neighbours.evicted,
            },
            "send_buffer": {
                "size": len(sb), "limit": sb.max_packets,
                "evicted": sb.drops["full"] + sb.drops["full-destination"],
            },
            "held_links": {
                "size": len(self._held), "limit": _MAX_HELD, "evicted": c["held-links-evicted"]
            },
            "down": {"size": len(self._down), "limit": _MAX_DOWN, "evicted": c["down-evicted"]},
            **self._bus.bounds(),
        }  # fmt: skip


def _with_options(
    packet: bytes, ip: ipv4.IPv4Header, next_header: int, options: list, inner: bytes
) -> bytes:
    """The packet with its DSR header rebuilt from ``options`` (IP fields kept)."""
    head = bytes(packet[: ip.ihl])
    body = dsr.dsr_header(next_header, options) + inner
    out = bytearray(head + body)
    struct.pack_into("!H", out, 2, len(out))
    out[ipv4.PROTOCOL] = ipv4.PROTO_DSR
    out[10:12] = b"\0\0"
    struct.pack_into("!H", out, 10, ipv4.checksum(out[: ip.ihl]))
    return bytes(out)
