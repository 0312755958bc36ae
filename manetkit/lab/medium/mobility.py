"""Where nodes are at time ``t`` (seconds since the lab started).

Models: :class:`Static`, :class:`RandomWaypoint` (seeded, lazily extended legs) and
:class:`Trajectories` (piecewise-linear paths, built from a setdest trace). Motion is
continuous: the medium asks for positions at the current time and gets the point on the
straight segment at that instant. :class:`World` adds the run-time overrides of
``lab move`` (a node leaves its model and walks or jumps to a point) and ``lab link``
(a link forced down or up).
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence
from typing import Literal, Protocol

from manetkit.lab.medium.setdest import SetdestTrace

Point = tuple[float, float]
LinkState = Literal["up", "down", "auto"]

# Holland & Vaidya draw speeds uniformly in [0.9v, 1.1v] so the mean is v and never 0;
# the "uniform" variant (0..v, as in Dyer & Boppana and Anantharaman et al.) would let a
# node crawl for ever at ~0 m/s (Yoon, Liu & Noble, "Random waypoint considered
# harmful"), so speeds below this floor are redrawn.
MIN_UNIFORM_SPEED = 0.1


class MobilityModel(Protocol):
    mobile: bool

    def position(self, i: int, t: float) -> Point: ...


class Static:
    mobile = False

    def __init__(self, positions: Sequence[Point]):
        self._pos = [(float(x), float(y)) for x, y in positions]

    def position(self, i: int, t: float) -> Point:
        return self._pos[i]


class _Path:
    """Piecewise-linear path: segments (t0, x0, y0, t1, x1, y1); still after t1."""

    __slots__ = ("starts", "segs")

    def __init__(self, x: float, y: float):
        self.starts: list[float] = [0.0]
        self.segs: list[tuple[float, float, float, float, float, float]] = [(0.0, x, y, 0.0, x, y)]

    def at(self, t: float) -> Point:
        k = bisect.bisect_right(self.starts, t) - 1
        t0, x0, y0, t1, x1, y1 = self.segs[max(k, 0)]
        if t >= t1 or t1 <= t0:
            return (x1, y1)
        f = (t - t0) / (t1 - t0)
        return (x0 + (x1 - x0) * f, y0 + (y1 - y0) * f)

    def go(self, t: float, x: float, y: float, speed: float | None) -> None:
        """From time ``t`` head to (x, y) at ``speed`` (None or inf: jump); cuts the future."""
        cx, cy = self.at(t)
        k = bisect.bisect_right(self.starts, t)
        del self.starts[k:], self.segs[k:]
        dist = math.hypot(x - cx, y - cy)
        t1 = t if not speed or math.isinf(speed) else t + dist / speed
        self.starts.append(t)
        self.segs.append((t, cx, cy, t1, x, y))


class Trajectories:
    """Paths built from timed "go to (x, y) at speed v" commands (setdest semantics)."""

    mobile = True

    def __init__(
        self, initial: Sequence[Point], moves: Sequence[tuple[float, int, float, float, float]] = ()
    ):
        self._paths = [_Path(x, y) for x, y in initial]
        for t, i, x, y, v in sorted(moves, key=lambda m: m[0]):
            self._paths[i].go(t, x, y, v if v > 0 else None)

    @classmethod
    def from_setdest(cls, trace: SetdestTrace, n: int) -> Trajectories:
        return cls(
            [trace.initial[i] for i in range(n)],
            [(m.t, m.node, m.x, m.y, m.speed) for m in trace.moves],
        )

    def position(self, i: int, t: float) -> Point:
        return self._paths[i].at(t)


class RandomWaypoint:
    """Random waypoint (Johnson & Maltz; Holland & Vaidya sec. 3): pause, pick a uniform
    point in the area and a speed, walk there, repeat. Each node has its own seeded
    generator, so a node's path does not depend on when others are queried."""

    def __init__(
        self,
        n: int,
        area: Point,
        speed: float,
        pause_s: float = 0.0,
        speed_dist: Literal["holland", "uniform"] = "holland",
        seed: int = 1,
    ):
        self.area = area
        self.speed = speed
        self.pause_s = pause_s
        self.speed_dist = speed_dist
        self.mobile = speed > 0
        self._rngs = [random.Random(f"manetkit-rwp:{seed}:{i}") for i in range(n)]
        self._legs: list[list[tuple[float, float, float, float, float, float]]] = []
        self._starts: list[list[float]] = []
        for rng in self._rngs:
            x, y = rng.uniform(0, area[0]), rng.uniform(0, area[1])
            # The first leg is the initial pause (ns-2's setdest also starts paused).
            self._legs.append([(0.0, x, y, 0.0, x, y)])
            self._starts.append([0.0])

    def _draw_speed(self, rng: random.Random) -> float:
        if self.speed_dist == "holland":
            return rng.uniform(0.9 * self.speed, 1.1 * self.speed)
        while True:
            v = rng.uniform(0.0, self.speed)
            if v >= min(MIN_UNIFORM_SPEED, self.speed):
                return v

    def _extend(self, i: int, t: float) -> None:
        legs, starts, rng = self._legs[i], self._starts[i], self._rngs[i]
        while True:
            t0, _, _, t1, x1, y1 = legs[-1]
            depart = t1 + self.pause_s
            if depart > t or not self.mobile:
                return
            x2, y2 = rng.uniform(0, self.area[0]), rng.uniform(0, self.area[1])
            v = self._draw_speed(rng)
            arrive = depart + math.hypot(x2 - x1, y2 - y1) / v
            legs.append((depart, x1, y1, arrive, x2, y2))
            starts.append(depart)

    def position(self, i: int, t: float) -> Point:
        self._extend(i, t)
        legs = self._legs[i]
        k = bisect.bisect_right(self._starts[i], t) - 1
        t0, x0, y0, t1, x1, y1 = legs[max(k, 0)]
        if t >= t1 or t1 <= t0:
            return (x1, y1)
        f = (t - t0) / (t1 - t0)
        return (x0 + (x1 - x0) * f, y0 + (y1 - y0) * f)


class World:
    """A mobility model plus run-time overrides (moves and forced link states)."""

    def __init__(self, model: MobilityModel, n: int):
        self.model = model
        self.n = n
        self._override: dict[int, _Path] = {}
        self.links: dict[tuple[int, int], LinkState] = {}
        self.version = 0  # bumped on every override, so caches know to recompute

    @property
    def mobile(self) -> bool:
        """True if positions may change without further commands."""
        return self.model.mobile or bool(self._override)

    def position(self, i: int, t: float) -> Point:
        p = self._override.get(i)
        return p.at(t) if p is not None else self.model.position(i, t)

    def positions(self, t: float) -> list[Point]:
        return [self.position(i, t) for i in range(self.n)]

    def move(self, i: int, x: float, y: float, t: float, speed: float | None = None) -> None:
        """Node ``i`` leaves its model at ``t`` and walks (or jumps, speed None) to (x, y)."""
        if not 0 <= i < self.n:
            raise ValueError(f"no node n{i + 1}")
        if speed is not None and speed < 0:
            raise ValueError("speed must be >= 0")
        path = self._override.get(i)
        if path is None:
            cx, cy = self.model.position(i, t)
            path = self._override[i] = _Path(cx, cy)
        path.go(t, float(x), float(y), speed)
        self.version += 1

    def set_link(self, a: int, b: int, state: LinkState) -> None:
        if a == b or not (0 <= a < self.n and 0 <= b < self.n):
            raise ValueError("a link needs two different existing nodes")
        if state not in ("up", "down", "auto"):
            raise ValueError(f"link state {state!r}: use up, down or auto")
        key = (min(a, b), max(a, b))
        if state == "auto":
            self.links.pop(key, None)
        else:
            self.links[key] = state
        self.version += 1

    def link_state(self, a: int, b: int) -> LinkState:
        return self.links.get((min(a, b), max(a, b)), "auto")
