"""The AODV control messages a node puts on the air (RFC 3561 section 5 formats, as
UDP/654 by :mod:`manetkit.daemon.wire.aodv`).

Control messages are re-originated at every hop (as AODV-UU does): IP source = the
transmitting node, so ``ip.src`` names the neighbour that sent a control packet.
Broadcasts go to 255.255.255.255 with the TTL given; unicasts travel one hop but are
ordinary IP packets. A RREP may ask for a RREP-ACK (6.8); RERRs go to a single
precursor by unicast, else by broadcast with TTL 1, at most RERR_RATELIMIT per second
(6.11).
"""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv4Address

from manetkit.daemon.engines.aodv.config import AodvConfig
from manetkit.daemon.engines.aodv.links import LinkView
from manetkit.daemon.engines.aodv.routetable import Route
from manetkit.daemon.engines.base import Outbox
from manetkit.daemon.engines.shared.ratelimit import RateLimit
from manetkit.daemon.wire import aodv

CONTROL_TTL = 64  # unicast control travels one hop but is an ordinary IP packet
_NEVER = float("-inf")


class Signalling:
    def __init__(
        self,
        address: IPv4Address,
        config: AodvConfig,
        links: LinkView,
        out: Outbox,
        counters: Counter[str],
    ) -> None:
        self.address = address
        self.config = config
        self.links = links
        self.out = out
        self.counters = counters
        self.next_hop_wait = config.next_hop_wait_ms / 1000
        self.rerr_limit = RateLimit(config.rerr_ratelimit)
        self.last_broadcast = _NEVER  # a Hello is due only when nothing else went out

    def broadcast(self, now: float, msg: aodv.Message, ttl: int) -> None:
        self.last_broadcast = now
        self.out.send(None, aodv.control_packet(msg, self.address, aodv.BROADCAST, ttl))

    def unicast(self, msg: aodv.Message, to: IPv4Address) -> None:
        self.out.send(to, self.packet(msg, to))

    def packet(self, msg: aodv.Message, to: IPv4Address) -> bytes:
        return aodv.control_packet(msg, self.address, to, CONTROL_TTL)

    def rrep(self, now: float, m: aodv.RREP, towards: Route) -> None:
        """A RREP to the next hop of ``towards``; with ``rrep_ack`` it asks for a
        RREP-ACK (6.8)."""
        if self.config.rrep_ack:
            m.ack_required = True
            self.links.expect_ack(now, towards.next_hop, self.next_hop_wait)
        self.unicast(m, towards.next_hop)

    def rerr(
        self,
        now: float,
        dests: list[tuple[IPv4Address, int]],
        to: set[IPv4Address],
        no_delete: bool,
        extensions: list[tuple[int, bytes]] | None = None,
    ) -> None:
        """Unicast to a single precursor, else broadcast with TTL 1 (6.11); rate-limited."""
        if not self.rerr_limit.take(now):
            self.counters["rerr-ratelimited"] += 1
            return
        self.counters["rerr-sent"] += 1
        for i in range(0, len(dests), 255):
            msg = aodv.RERR(dests[i : i + 255], no_delete, list(extensions or []))
            if len(to) == 1:
                self.unicast(msg, next(iter(to)))
            else:
                self.broadcast(now, msg, 1)
