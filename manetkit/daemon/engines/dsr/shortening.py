"""Automatic route shortening (RFC 4728 8.4.4, promiscuous receive mode).

A node that hears a source-routed packet addressed to another hop, and finds itself
later in the route than that hop, could have received it directly: it sends the
packet's source a gratuitous Route Reply with the shorter route (at most once per
GratReplyHoldoff per (source, transmitter)) and caches the shorter route itself.
Overheard frames are for learning only: never forwarded, delivered or answered as if
they were addressed to this node.
"""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv4Address

from manetkit.daemon.engines.dsr.config import DsrConfig
from manetkit.daemon.engines.dsr.routes import Routes
from manetkit.daemon.engines.dsr.signalling import Signalling
from manetkit.daemon.engines.shared.addresses import AddressMemo
from manetkit.daemon.wire import ipv4

MAX_HOLDOFFS = 1024  # (source, transmitter) pairs remembered: cleared when over


class Shortening:
    def __init__(
        self,
        address: IPv4Address,
        config: DsrConfig,
        routes: Routes,
        signalling: Signalling,
        addr: AddressMemo,
        counters: Counter[str],
    ) -> None:
        self._me = address.packed
        self.config = config
        self.routes = routes
        self.signalling = signalling
        self.addr = addr
        self.counters = counters
        self.sent: dict[tuple[IPv4Address, IPv4Address], float] = {}

    def overheard(self, now: float, buf: bytes, o: int) -> None:
        """A frame whose Source Route option (at ``o``) names another receiver."""
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
        src, transmitter = self.addr(full[0]), self.addr(full[idx])
        last = self.sent.get((src, transmitter))
        if last is not None and now - last < self.config.grat_reply_holdoff_s:
            self.counters["grat-reply-holdoff"] += 1
            return
        if not self._worth_it(now, transmitter, [self.addr(a) for a in full[idx : j + 1]]):
            return
        if len(self.sent) > MAX_HOLDOFFS:
            self.sent.clear()
            self.counters["memo-cleared"] += 1
        self.sent[(src, transmitter)] = now
        short = [self.addr(a) for a in full[: idx + 1] + full[j:]]
        self.routes.learn_around(now, short)
        self.counters["grat-replies"] += 1
        me_at = idx + 1
        back = tuple(reversed(short[1:me_at]))
        self.signalling.reply(now, src, tuple(short[1:]), back)

    def _worth_it(self, now: float, transmitter: IPv4Address, skipped: list[IPv4Address]) -> bool:
        """The shortcut transmitter -> this node may build routes (the admission
        policy: an overheard frame may have come over a gray link) and costs less
        than the links it skips (the path metric; with hop count it always does)."""
        links = self.routes.links
        if not links.admits(now, transmitter, None):
            return False
        metric = self.routes.cache.metric
        me = skipped[-1]
        if metric.link_cost(now, transmitter, me) >= metric.path_cost(now, skipped):
            self.counters["grat-reply-not-shorter"] += 1
            return False
        return True
