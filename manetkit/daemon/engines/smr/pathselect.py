"""Multipath route selection for SMR, pure functions and data (no clock, no I/O).

Two places choose paths in split multipath routing (Lee & Gerla, ICC'01; Lim, Xu &
Gerla, "TCP Performance over Multipath Routing in Mobile Ad Hoc Networks", ICC'03):

- the **destination** answers the first Route Request copy at once (the shortest-delay
  path) and, after a wait, picks further paths among the copies that arrived by the
  mode's criterion (:func:`select_replies`; Lim/Xu/Gerla section V-B);
- the **source** keeps a primary and backups per destination and decides which one
  carries data (:class:`PathSet`; sections IV and V).

Criteria (Lim/Xu/Gerla V-B): *shortest-hop* = fewest hops; *shortest-delay* = the copy
that reached the destination first; *maximally disjoint* = fewest intermediate nodes
shared with the path(s) already chosen, ties by fewer hops (scheme 2's rule), then by
arrival order. Paths are tuples of node addresses, source first, destination last.

With a link-quality path metric (docs/linkquality.md) a ``cost`` function takes the
place of the hop count in every criterion: the backup is the cheapest path, not the
shortest (``None``: hop count, Lim/Xu/Gerla's rules exactly).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

N = TypeVar("N", bound=Hashable)


class Mode(StrEnum):
    """How the source uses its paths (YAML ``smr.mode``)."""

    CONCURRENT = "concurrent"  # per-packet round robin over all paths (SMR, section IV)
    BACKUP1 = "backup1"  # primary shortest hop, backup shortest delay (V-B.1)
    BACKUP2 = "backup2"  # primary shortest delay, backup maximally disjoint (V-B.2)


def intermediates(path: Sequence[N]) -> set[N]:
    """The nodes of ``path`` other than its two ends."""
    return set(path[1:-1])


def shared_nodes(a: Sequence[N], b: Sequence[N]) -> int:
    """How many intermediate nodes ``a`` and ``b`` have in common (Lim/Xu/Gerla V-B:
    "the fewest overlapped intermediate nodes")."""
    return len(intermediates(a) & intermediates(b))


def hops(path: Sequence[N]) -> int:
    return len(path) - 1


Cost = Callable[[Sequence[N]], float]


def select_replies(
    mode: Mode,
    first: Sequence[N],
    later: Sequence[Sequence[N]],
    count: int,
    cost: Cost | None = None,
) -> list[tuple[N, ...]]:
    """The paths the destination replies along after its wait, best first.

    ``first`` was answered at once (the shortest-delay path); ``later`` are the other
    copies' paths in arrival order; at most ``count`` distinct paths, never ``first``.

    - ``backup1``: the shortest-hop paths (V-B.1), ties by arrival;
    - ``backup2`` and ``concurrent``: greedily the path sharing the fewest intermediate
      nodes with every path chosen so far, ties by hops then arrival (V-B.2; SMR's
      maximally disjoint rule, section III-A). Disjointness counts nodes, not links:
      two paths through one node fail together when that node moves away.

    ``cost`` (the path metric) replaces the hop count in both rules.
    """
    size = cost if cost is not None else hops
    done = {tuple(first)}
    pool: list[tuple[int, tuple[N, ...]]] = []
    for i, p in enumerate(later):
        t = tuple(p)
        if t not in done:
            done.add(t)
            pool.append((i, t))
    if count <= 0 or not pool:
        return []
    if mode is Mode.BACKUP1:
        pool.sort(key=lambda c: (size(c[1]), c[0]))
        return [p for _, p in pool[:count]]
    chosen: list[tuple[N, ...]] = []
    used = intermediates(first)
    while pool and len(chosen) < count:
        best = min(pool, key=lambda c: (len(intermediates(c[1]) & used), size(c[1]), c[0]))
        pool.remove(best)
        chosen.append(best[1])
        used |= intermediates(best[1])
    return chosen


@dataclass(slots=True)
class Entry(Generic[N]):
    """One path the source holds, with when it was learnt (for status ages)."""

    path: tuple[N, ...]
    added: float


@dataclass(frozen=True, slots=True)
class Switch(Generic[N]):
    """The path carrying data changed (``old`` None: the first path)."""

    old: tuple[N, ...] | None
    new: tuple[N, ...]
    reason: str


@dataclass(slots=True)
class PathSet(Generic[N]):
    """A source's paths to one destination: ``entries[0]`` is the primary.

    Rules (Lim/Xu/Gerla): at most ``limit`` paths (V-A found two best); the first reply
    becomes the primary; later replies are backups; ``backup1`` makes a strictly
    shorter later reply the primary (V-B.1 "resets the primary path to the shortest-hop
    path"); ``backup2`` and ``concurrent`` never swap (V-B.2). When the set is full a
    new reply replaces the oldest backup (fresher is likelier alive under mobility).
    """

    mode: Mode
    limit: int = 2
    entries: list[Entry[N]] = field(default_factory=list)
    _turn: int = 0  # round robin position (concurrent)

    @property
    def primary(self) -> tuple[N, ...] | None:
        return self.entries[0].path if self.entries else None

    def paths(self) -> list[tuple[N, ...]]:
        return [e.path for e in self.entries]

    def offer(
        self, now: float, path: Sequence[N], cost: Cost | None = None
    ) -> tuple[bool, Switch[N] | None]:
        """A Route Reply brought ``path``: (it was added, the switch it caused).
        ``cost``: the path metric (``backup1`` then makes a cheaper reply the primary)."""
        p = tuple(path)
        for e in self.entries:
            if e.path == p:
                e.added = now  # confirmed again by a new reply
                return False, None
        if not self.entries:
            self.entries.append(Entry(p, now))
            return True, Switch(None, p, "first-reply")
        if len(self.entries) >= self.limit:
            if self.limit == 1:
                return False, None
            oldest = min(range(1, len(self.entries)), key=lambda i: self.entries[i].added)
            del self.entries[oldest]
        self.entries.append(Entry(p, now))
        old = self.entries[0].path
        if self.mode is Mode.BACKUP1:
            if cost is None and hops(p) < hops(old):
                self.entries.insert(0, self.entries.pop())
                return True, Switch(old, p, "shorter-reply")
            if cost is not None and cost(p) < cost(old):
                self.entries.insert(0, self.entries.pop())
                return True, Switch(old, p, "cheaper-reply")
        return True, None

    def cut(
        self, a: N, b: N, cost: Cost | None = None
    ) -> tuple[list[tuple[N, ...]], Switch[N] | None]:
        """Drop every path using link a-b (either direction): (dropped, the switch to
        the next path if the primary was among them; its ``new`` is the new primary:
        the first backup, or with ``cost`` the cheapest)."""
        old = self.primary
        gone = [e.path for e in self.entries if uses_link(e.path, a, b)]
        if not gone:
            return [], None
        self.entries = [e for e in self.entries if not uses_link(e.path, a, b)]
        if old in gone and self.entries and cost is not None and self.mode is not Mode.CONCURRENT:
            best = min(range(len(self.entries)), key=lambda i: cost(self.entries[i].path))
            self.entries.insert(0, self.entries.pop(best))
        if old in gone and self.entries:
            return gone, Switch(old, self.entries[0].path, "")
        return gone, None

    def expire(self, now: float, max_age: float) -> list[tuple[N, ...]]:
        """Drop the alternates (every path but the primary) learnt or last confirmed by a
        reply ``max_age`` s ago or longer; return them. Lim/Xu/Gerla V-A: under mobility
        the alternates replied to one request go stale, and a source "tends to waste much
        time in trying stale routes one by one". The primary carries the data, so its
        break is seen at once; in ``concurrent`` mode every path carries data and none is
        an alternate, so nothing expires."""
        if self.mode is Mode.CONCURRENT or len(self.entries) < 2:
            return []
        # The same sum as next_expiry, so a timer due then always finds the path gone.
        gone = [e.path for e in self.entries[1:] if now >= e.added + max_age]
        if gone:
            self.entries = [self.entries[0]] + [
                e for e in self.entries[1:] if now < e.added + max_age
            ]
        return gone

    def next_expiry(self, max_age: float) -> float | None:
        """When :meth:`expire` will next drop an alternate (None: no alternate ages)."""
        if self.mode is Mode.CONCURRENT or len(self.entries) < 2:
            return None
        return min(e.added for e in self.entries[1:]) + max_age

    def remove(self, path: Sequence[N]) -> bool:
        p = tuple(path)
        n = len(self.entries)
        self.entries = [e for e in self.entries if e.path != p]
        return len(self.entries) != n

    def avoid(self, a: N, b: N, reason: str = "predicted-failure") -> Switch[N] | None:
        """Make the first backup that does not use link a-b the primary (the link is
        predicted to fail); the old primary stays, as the last backup, until it really
        breaks. None when the primary does not use a-b or no backup avoids it."""
        if not self.entries or not uses_link(self.entries[0].path, a, b):
            return None
        for i in range(1, len(self.entries)):
            if not uses_link(self.entries[i].path, a, b):
                old = self.entries.pop(0)
                self.entries.insert(0, self.entries.pop(i - 1))
                self.entries.append(old)
                return Switch(old.path, self.entries[0].path, reason)
        return None

    def route(self) -> tuple[N, ...] | None:
        """The path for the next data packet: the primary, or in ``concurrent`` mode
        each path in turn (SMR's per-packet round robin, section IV)."""
        if not self.entries:
            return None
        if self.mode is not Mode.CONCURRENT or len(self.entries) == 1:
            return self.entries[0].path
        self._turn = (self._turn + 1) % len(self.entries)
        return self.entries[self._turn].path


def uses_link(path: Sequence[N], a: N, b: N) -> bool:
    """True if ``path`` crosses the link a-b in either direction."""
    pairs = zip(path, path[1:], strict=False)
    return any((x == a and y == b) or (x == b and y == a) for x, y in pairs)
