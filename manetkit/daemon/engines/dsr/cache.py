"""DSR Route Cache as a path cache (RFC 4728 section 4.1 and 8.1.2).

Why a path cache and not a link cache: Holland & Vaidya's TCP results (the baseline
manetkit is measured against) come from CMU's DSR, which keeps whole paths; a path cache
only ever returns routes some packet actually travelled or some node actually replied
with, so it never stitches together links of different ages into a route nobody has
used. Every cached path starts at this node; any prefix of it is a route to each node on
it (RFC 4728 4.1: "a route to each intermediate node is implicitly also cached").

Pure data with explicit ``now``: paths expire ``timeout`` seconds after they were last
added or used (RouteCacheTimeout, section 9); the cache holds at most ``capacity``
paths (``route_cache_size``), evicting the least recently used (counted in ``evicted``;
docs/security.md "Bounded state"). Which cached route is best is the path metric's call
(:mod:`manetkit.daemon.engines.shared.metric`; hop count by default, RFC 4728 8.1.3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address

from manetkit.daemon.engines.shared.metric import HOP_COUNT, PathMetric

Path = tuple[IPv4Address, ...]


@dataclass(slots=True)
class CachedPath:
    path: Path  # path[0] is this node
    added: float
    used: float


class RouteCache:
    def __init__(
        self,
        me: IPv4Address,
        timeout: float = 300.0,
        capacity: int = 64,
        metric: PathMetric = HOP_COUNT,
    ) -> None:
        self.me = me
        self.metric = metric
        self.timeout = timeout
        self.capacity = capacity
        self._paths: dict[Path, CachedPath] = {}
        self.generation = 0  # bumped on every change, so users may memoise lookups
        self.evicted = 0  # paths pushed out at capacity (least recently used)

    def __len__(self) -> int:
        return len(self._paths)

    def add(self, now: float, path: Sequence[IPv4Address]) -> bool:
        """Cache ``path`` (must start at this node, no repeated node). True if new.

        A path that is a prefix of one already cached adds nothing; a path that extends
        a cached one replaces it.
        """
        p = tuple(path)
        if len(p) < 2 or p[0] != self.me or len(set(p)) != len(p):
            return False
        for q, entry in self._paths.items():
            if q[: len(p)] == p:
                entry.used = max(entry.used, now)
                return False
        for q in [q for q in self._paths if p[: len(q)] == q]:
            del self._paths[q]
        self._paths[p] = CachedPath(p, now, now)
        self.generation += 1
        if len(self._paths) > self.capacity:
            oldest = min(self._paths.values(), key=lambda e: e.used)
            del self._paths[oldest.path]
            self.evicted += 1
        return True

    def expire(self, now: float) -> list[Path]:
        gone = [p for p, e in self._paths.items() if now - e.used >= self.timeout]
        for p in gone:
            del self._paths[p]
        if gone:
            self.generation += 1
        return gone

    def forget(self, path: Sequence[IPv4Address], unused_since: float) -> bool:
        """Drop exactly ``path`` (not the longer paths it is a prefix of) unless a lookup
        used it after ``unused_since``; True if it was dropped. SMR forgets an alternate
        it let expire, so the fallback to this cache does not try it."""
        p = tuple(path)
        entry = self._paths.get(p)
        if entry is None or entry.used > unused_since:
            return False
        del self._paths[p]
        self.generation += 1
        return True

    def next_expiry(self) -> float | None:
        """When the least recently used path expires (for the owner's timer)."""
        return min((e.used + self.timeout for e in self._paths.values()), default=None)

    def lookup(
        self, now: float, dst: IPv4Address, avoid: tuple[IPv4Address, IPv4Address] | None = None
    ) -> Path | None:
        """The best cached route to ``dst`` by the path metric (the shortest, with hop
        count), newest on ties, marking it used.

        ``avoid`` excludes routes that use that link (either direction), for salvaging.
        """
        if dst == self.me:
            return None
        cost = self.metric.path_cost
        best: tuple[float, float, Path, CachedPath] | None = None
        for p, e in self._paths.items():
            if now - e.used >= self.timeout:
                continue
            try:
                i = p.index(dst)
            except ValueError:
                continue
            route = p[: i + 1]
            if avoid is not None and _uses_link(route, avoid):
                continue
            key = (cost(now, route), -e.added)
            if best is None or key < (best[0], best[1]):
                best = (key[0], key[1], route, e)
        if best is None:
            return None
        best[3].used = now
        return best[2]

    def remove_link(self, a: IPv4Address, b: IPv4Address) -> list[Path]:
        """Cut every cached path at the link a-b (either direction; RFC 4728 8.3.5).

        Returns the paths that were cut. The part before the link stays cached, since
        it is still a valid route to the nodes on it.
        """
        cut: list[Path] = []
        for p in list(self._paths):
            i = _link_index(p, (a, b))
            if i is None:
                continue
            cut.append(p)
            self.generation += 1
            entry = self._paths.pop(p)
            prefix = p[: i + 1]
            if len(prefix) >= 2 and not any(q[: len(prefix)] == prefix for q in self._paths):
                self._paths[prefix] = CachedPath(prefix, entry.added, entry.used)
        return cut

    def destinations(self, now: float) -> set[IPv4Address]:
        return {a for p, e in self._paths.items() if now - e.used < self.timeout for a in p[1:]}

    def entries(self) -> list[CachedPath]:
        return list(self._paths.values())


def _link_index(path: Path, link: tuple[IPv4Address, IPv4Address]) -> int | None:
    a, b = link
    for i in range(len(path) - 1):
        x, y = path[i], path[i + 1]
        if (x == a and y == b) or (x == b and y == a):
            return i
    return None


def _uses_link(path: Path, link: tuple[IPv4Address, IPv4Address]) -> bool:
    return _link_index(path, link) is not None
