"""What a DSR node knows about routes: the route cache (RFC 4728 4.1, 8.1.2) as the
engine feeds and cuts it.

- Learning (8.1.4 "add all usable routing information"): a path is cached up to its
  first held link (:mod:`.links`) and only if no longer than ``max_route_length``;
  a route along which this node lies teaches both directions (802.11 unicast needs
  link-layer ACKs, so every link that carried a packet works both ways).
- Cutting (8.3.5): a link seen to fail leaves the cache; the destinations left
  without any route are returned with the next hop they had.
- Destinations reported down (route-down sent), so a route-up follows when one is
  learnt again. Bounded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from ipaddress import IPv4Address

from manetkit import events as ev
from manetkit.daemon.engines.atra.srp import SrpTable
from manetkit.daemon.engines.dsr.cache import Path, RouteCache
from manetkit.daemon.engines.dsr.links import LinkView
from manetkit.daemon.engines.dsr.strategy import PathStrategy

MAX_DOWN = 1024  # destinations reported down, waiting to be reported up again

Learned = Callable[[float, Path], None]


def route_up(route: Path, primary: bool | None = None) -> ev.RouteUp:
    """The route-up event of ``route`` (route[0] is this node, route[-1] the
    destination); ``primary`` for one of several paths (SMR)."""
    return ev.RouteUp(
        dst=str(route[-1]),
        next_hop=str(route[1]),
        hops=len(route) - 1,
        path=tuple(str(a) for a in route),
        primary=primary,
    )


class Routes:
    def __init__(
        self,
        address: IPv4Address,
        cache: RouteCache,
        links: LinkView,
        strategy: PathStrategy,
        max_route_length: int,
        counters: Counter[str],
        learned: Learned,
        srp: SrpTable | None = None,
    ) -> None:
        self.address = address
        self.cache = cache
        self.links = links
        self.strategy = strategy
        self.max_route_length = max_route_length
        self.counters = counters
        self.learned = learned  # a new path was cached (the engine's route-ups)
        self.srp = srp  # Atra's pinned ACK routes, which must not follow a cut link
        self.down: set[IPv4Address] = set()
        # A conservative deadline for the cache's expiry: paths only ever expire later
        # than computed (use refreshes them), so the engine's timer stays O(1).
        self.expiry_check: float | None = None

    def learn(self, now: float, path: Path, fresh: float = -1.0) -> None:
        """Cache ``path`` (path[0] is this node) up to its first held link."""
        if self.links.held:
            path = self.links.unheld_prefix(now, path, fresh)
        if len(path) < 2 or len(path) - 1 > self.max_route_length:
            return
        if not self.cache.add(now, path):
            return
        expiry = now + self.cache.timeout
        if self.expiry_check is None or expiry < self.expiry_check:
            self.expiry_check = expiry
        self.learned(now, path)

    def learn_around(self, now: float, full: list[IPv4Address], fresh: float = -1.0) -> None:
        """Cache both directions from this node along a route it is on."""
        try:
            p = full.index(self.address)
        except ValueError:
            return
        self.learn(now, tuple(full[p:]), fresh)
        self.learn(now, tuple(reversed(full[: p + 1])), fresh)

    def cut_link(
        self, now: float, a: IPv4Address, b: IPv4Address, reason: str = "link-broken"
    ) -> dict[IPv4Address, IPv4Address]:
        """Cut the link a-b from the cache; the destinations left without any route,
        each with the next hop it had."""
        before = self.cache.destinations(now)
        cut = self.cache.remove_link(a, b)
        self.strategy.links_cut(now, a, b, reason)
        if self.srp is not None:
            self.srp.unpin_link(a, b)
        if not cut:
            return {}
        lost = before - self.cache.destinations(now)
        return {dst: p[1] for p in cut for dst in p[1:] if dst in lost}

    def mark_down(self, dst: IPv4Address) -> None:
        """``dst`` was reported down (a route-up follows when it is back); bounded."""
        if dst not in self.down and len(self.down) >= MAX_DOWN:
            self.down.pop()
            self.counters["down-evicted"] += 1
        self.down.add(dst)

    def handle_timer(self, now: float) -> None:
        if self.expiry_check is not None and self.expiry_check <= now:
            self.cache.expire(now)
            self.expiry_check = self.cache.next_expiry()
