"""DSR's data path (RFC 4728 8.1.3, 8.1.4): source-routing a packet, forwarding by the
Source Route option, delivering at the destination.

- 8.1.3 the source inserts a DSR header with the Source Route option (its IP fields
  kept); 8.4.3 a salvager lists itself first and counts the salvage.
- 8.1.4 every hop forwards by the Source Route's next address (Segments Left), in place
  on the packet bytes; the destination strips the DSR header and delivers. A packet
  whose route names another receiver was overheard (route shortening, 8.4.4).
- Every packet this node receives teaches the neighbour table its sender's MAC and the
  route cache the route it travelled (8.1.4 "add all usable routing information"),
  unless its route cannot be trusted: with authentication required (docs/security.md)
  a packet carrying only a Source Route is unsigned, so it is forwarded or delivered
  but teaches nothing (no neighbour, no cached route, no gratuitous reply, no Atra
  pin), as Ariadne learns routes only from authenticated discovery (Hu, Perrig &
  Johnson, MobiCom 2002, section 4).

This is the per-packet hot path: it reads the few bytes it needs in place, and what
depends only on the route (next hop, neighbour and cache learning) is memoised per
(route, sender MAC) and redone every ``HOT_REFRESH`` seconds; the source memoises its
Source Route per destination while the cache is unchanged.
"""

from __future__ import annotations

from ipaddress import IPv4Address

from manetkit.daemon.engines.atra.state import AtraState
from manetkit.daemon.engines.base import Deliver, Outbox, SendFrame
from manetkit.daemon.engines.dsr.cache import Path, RouteCache
from manetkit.daemon.engines.dsr.links import LinkView
from manetkit.daemon.engines.dsr.routes import Routes
from manetkit.daemon.engines.dsr.shortening import Shortening
from manetkit.daemon.engines.shared.addresses import AddressMemo
from manetkit.daemon.engines.shared.bus import Bus
from manetkit.daemon.wire import dsr, ipv4

HOT_REFRESH = 0.1  # s: how often one route's neighbour/cache learning is redone
MAX_MEMO = 1024  # per-route memos: cleared when over


class Forwarder:
    def __init__(
        self,
        address: IPv4Address,
        cache: RouteCache,
        links: LinkView,
        routes: Routes,
        shortening: Shortening,
        bus: Bus,
        atra: AtraState | None,
        addr: AddressMemo,
        out: Outbox,
        memo_routes: bool,
        trust_data: bool = True,
    ) -> None:
        self.address = address
        self._me = address.packed
        self.cache = cache
        self.links = links
        self.routes = routes
        self.shortening = shortening
        self.bus = bus
        self.atra = atra  # None: Atra off
        self.addr = addr
        self.out = out
        self.counters = out.counters
        self._queue = out.queue
        self.memo_routes = memo_routes
        # False with authentication required: unsigned (Source-Route-only) packets
        # teach nothing (module docstring).
        self.trust_data = trust_data
        # (route, sender MAC) -> (when learnt, next hop)
        self._hot: dict[bytes, tuple[float, IPv4Address | None]] = {}
        # destination -> (cache generation, when, next hop, Source Route option bytes)
        self._sent: dict[bytes, tuple[int, float, IPv4Address, bytes]] = {}

    # ------------------------------------------------------------------ originating
    def memoised(self, now: float, packet: bytes) -> bool:
        """Send this node's ``packet`` by the route its destination took within
        ``HOT_REFRESH``, the cache unchanged since (True), else False."""
        if not self.memo_routes:
            return False
        hint = self._sent.get(packet[ipv4.DST])
        if (
            hint is not None
            and hint[0] == self.cache.generation
            and now - hint[1] < HOT_REFRESH
            and packet[0] == 0x45
            and ((packet[2] << 8) | packet[3]) <= len(packet)
        ):
            self.counters["data-originated"] += 1
            self._originate(now, packet, hint[3], hint[2])
            return True
        return False

    def send_own(self, now: float, packet: bytes, dst: IPv4Address, route: Path) -> None:
        """This node's ``packet`` to ``dst`` along ``route`` (memoised)."""
        sr = self.send_data(now, packet, route)
        if len(self._sent) > MAX_MEMO:
            self._sent.clear()
            self.counters["memo-cleared"] += 1
        self._sent[dst.packed] = (self.cache.generation, now, route[1], sr)

    def forget_routes(self) -> None:
        """The routes of this node's destinations changed outside the cache."""
        self._sent.clear()

    def send_data(self, now: float, packet: bytes, route: Path, salvage: int = 0) -> bytes:
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
        self._originate(now, packet, sr, route[1])
        return sr

    def _originate(self, now: float, packet: bytes, sr: bytes, next_hop: IPv4Address) -> None:
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
        atra = self.atra
        if atra is not None and atra.track:
            # Atra: the destination is active here; PRE notes who used the link.
            atra.sent_to(now, self.addr(packet[ipv4.DST]))
            atra.pre.used(now, next_hop, self.address)
        self.counters["data-sent"] += 1
        self._queue.append(SendFrame(next_hop, bytes(head) + dsr_hdr + sr + packet[ihl:total]))

    # ------------------------------------------------------------------ receiving
    def source_routed(
        self,
        now: float,
        packet: bytes,
        ihl: int,
        o: int,
        total: int,
        src_mac: bytes | None,
        rssi: float | None,
        control: bool,
        trusted: bool,
    ) -> None:
        """Forward or deliver by the Source Route option at ``o`` (RFC 4728 8.1.4);
        ``trusted``: the packet may teach this node (it is signed, or auth is off)."""
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
            if trusted:
                self.shortening.overheard(now, packet, o)
            else:
                self.counters["unsigned-not-shortened"] += 1
            return
        key = packet[12:20] + packet[o + 2 : a0 + n4] + (src_mac or b"")
        hot = self._hot.get(key)
        if hot is None or now - hot[0] >= HOT_REFRESH:
            if trusted:
                hot = self._learn_from_route(now, packet, o, pos, sl, src_mac, rssi)
            else:
                self.counters["unsigned-not-learned"] += 1
                hot = (now, self._next_hop(packet, pos, sl))
            if len(self._hot) > MAX_MEMO:
                self._hot.clear()
                self.counters["memo-cleared"] += 1
            self._hot[key] = hot
        atra = self.atra
        if not sl:
            delivered = self.deliver(packet, ihl, total, control)
            srp = atra is not None and atra.cfg.srp and not control
            if delivered is not None and srp and trusted:
                self._pin(now, packet, o, delivered)
            return
        bus = self.bus
        if bus.on and not control:
            end = ihl + dsr.HEADER_LEN + ((packet[ihl + 2] << 8) | packet[ihl + 3])
            if bus.forwarding(packet, packet[ihl], end, packet[:total], pivot_holds=True):
                return
        buf = bytearray(packet[:total])
        buf[o + 3] = b3 - 1  # Segments Left is the low 6 bits and is >= 1 here
        if ipv4.decrement_ttl(buf) == 0:
            self.out.drop("ttl-expired", buf)
            return
        self.counters["control-forwarded" if control else "data-forwarded"] += 1
        if atra is not None and atra.track and not control:
            atra.pre.used(now, hot[1], self.addr(packet[ipv4.SRC]))  # type: ignore[arg-type]
        self._queue.append(SendFrame(hot[1], bytes(buf)))

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
            self.links.heard(now, self.addr(prev), src_mac, rssi)
        addrs = [packet[a0 + 4 * i : a0 + 4 * i + 4] for i in range(n)]
        full = ([packet[ipv4.SRC]] if salvage == 0 else []) + addrs + [packet[ipv4.DST]]
        self.routes.learn_around(now, [self.addr(a) for a in full])
        return now, self._next_hop(packet, pos, sl)

    def _next_hop(self, packet: bytes, pos: int, sl: int) -> IPv4Address | None:
        """The address after this node's in the route (None: this node is the last)."""
        if not sl:
            return None
        return self.addr(packet[pos + 4 : pos + 8] if sl > 1 else packet[ipv4.DST])

    def deliver(self, packet: bytes, ihl: int, total: int, control: bool) -> bytes | None:
        """Strip the DSR header and hand the original packet up (RFC 4728 8.1.4); the
        packet delivered, None when there was nothing to deliver."""
        nh = packet[ihl]
        if nh == dsr.NO_NEXT_HEADER:
            if not control:
                self.counters["empty-delivered"] += 1
            return None
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
        inner = bytes(head) + packet[end:total]
        self._queue.append(Deliver(inner))
        return inner

    def _pin(self, now: float, packet: bytes, o: int, inner: bytes) -> None:
        """Atra's SRP at the destination: pin the reverse of the data packet's source
        route (Anantharaman et al. IV-A)."""
        n = (packet[o + 1] - 2) >> 2
        salvage = ((packet[o + 2] & 0x03) << 2) | (packet[o + 3] >> 6)
        if salvage:
            return  # a salvaged packet's route does not start at its source
        a0 = o + 4
        route = (
            self.addr(packet[ipv4.SRC]),
            *(self.addr(packet[a0 + 4 * i : a0 + 4 * i + 4]) for i in range(n)),
            self.address,
        )
        self.atra.srp.data_arrived(now, inner, route)  # type: ignore[union-attr]
