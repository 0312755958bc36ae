"""A DSR node's path strategy: which route its own packets take, which request copies
it forwards, how it answers requests for itself, and what it does when links go.

DSR consults its strategy at these points only; the default, :class:`SingleRoute`, is
RFC 4728's behaviour. SMR's multipath and backup paths
(:class:`manetkit.daemon.engines.smr.strategy.SmrStrategy`) are another strategy.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from ipaddress import IPv4Address
from typing import Any, Protocol

from manetkit.daemon.engines.dsr.cache import Path, RouteCache
from manetkit.daemon.engines.dsr.config import DsrConfig
from manetkit.daemon.engines.dsr.requesttable import RequestTable
from manetkit.daemon.engines.dsr.signalling import Signalling


class PathStrategy(Protocol):
    # send_local may reuse a destination's last route for a short while (False for a
    # strategy that changes route per packet, SMR's round robin).
    memo_routes: bool

    def route_for(self, now: float, dst: IPv4Address) -> Path | None:
        """The route this node's own packets to ``dst`` take (8.1.3: the cache)."""
        ...

    def duplicate_request(
        self, now: float, init: IPv4Address, ident: int, prev: IPv4Address, hops: int
    ) -> bool:
        """True if this (initiator, id) request is a duplicate not to be forwarded
        (8.2.2); else remember it. ``prev`` sent this copy, ``hops`` = recorded hops."""
        ...

    def answer_request(
        self, now: float, init: IPv4Address, ident: int, addrs: tuple[IPv4Address, ...]
    ) -> None:
        """Request ``ident`` for this node arrived over ``addrs`` (8.2.4)."""
        ...

    def request_sent(self, now: float, target: IPv4Address) -> None:
        """This node just sent a Route Request for ``target``."""
        ...

    def reply_received(self, now: float, route: Path, fresh: float) -> None:
        """A Route Reply addressed to this node brought ``route`` (route[0] is this
        node), before the cache learns it; ``fresh`` as in
        :meth:`~manetkit.daemon.engines.dsr.links.LinkView.unheld_prefix`."""
        ...

    def links_cut(self, now: float, a: IPv4Address, b: IPv4Address, reason: str) -> None:
        """Link a-b was cut from the cache (8.3.5; ``reason`` as in RouteDown)."""
        ...

    def predicted_failure(self, now: float, neighbour: IPv4Address) -> bool:
        """A failure prediction (Atra) says the link to ``neighbour`` will break soon:
        True if the strategy moved routes off it."""
        ...

    def handle_timer(self, now: float) -> None: ...

    def get_timer(self) -> float | None: ...

    def status(self, now: float) -> dict[str, Any]:
        """Fields added to the engine's status."""
        ...


class SingleRoute:
    """RFC 4728: the cache's best route; the target replies to each copy of a request
    (8.2.4), or with ``target_replies: first`` to the first copy only."""

    memo_routes = True

    def __init__(
        self,
        address: IPv4Address,
        config: DsrConfig,
        cache: RouteCache,
        requests: RequestTable,
        signalling: Signalling,
        counters: Counter[str],
    ) -> None:
        self.address = address
        self.config = config
        self.cache = cache
        self.requests = requests
        self.signalling = signalling
        self.counters = counters
        # (initiator, id) answered as target (target_replies: first), oldest first
        self.answered: OrderedDict[tuple[IPv4Address, int], None] = OrderedDict()

    def route_for(self, now: float, dst: IPv4Address) -> Path | None:
        return self.cache.lookup(now, dst)

    def duplicate_request(
        self, now: float, init: IPv4Address, ident: int, prev: IPv4Address, hops: int
    ) -> bool:
        return self.requests.seen_else_remember(init, ident)

    def answer_request(
        self, now: float, init: IPv4Address, ident: int, addrs: tuple[IPv4Address, ...]
    ) -> None:
        if self.config.target_replies == "first":
            key = (init, ident)
            if key in self.answered:
                self.counters["target-copies-unanswered"] += 1
                return
            self.answered[key] = None
            if len(self.answered) > self.config.request_table_size:
                self.answered.popitem(last=False)
        self.signalling.reply(now, init, (*addrs, self.address), tuple(reversed(addrs)))

    def request_sent(self, now: float, target: IPv4Address) -> None:
        return None

    def reply_received(self, now: float, route: Path, fresh: float) -> None:
        return None

    def links_cut(self, now: float, a: IPv4Address, b: IPv4Address, reason: str) -> None:
        return None

    def predicted_failure(self, now: float, neighbour: IPv4Address) -> bool:
        return False  # one route per destination: nothing to move to

    def handle_timer(self, now: float) -> None:
        return None

    def get_timer(self) -> float | None:
        return None

    def status(self, now: float) -> dict[str, Any]:
        return {}
