"""DSR's timers: one heap of (when, what) the engine fires in time order."""

from __future__ import annotations

import heapq
from enum import IntEnum
from typing import Any


class Timer(IntEnum):
    REBROADCAST = 0  # a Route Request to rebroadcast after its BroadcastJitter (8.2.2)
    DISCOVERY = 1  # a discovery's next request (8.2.1 back-off)
    SEND = 2  # a delayed unicast: a cached Route Reply (8.2.5)


class Timers:
    """Deadlines in the order they were scheduled at equal times."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Timer, Any]] = []
        self._seq = 0

    def schedule(self, when: float, kind: Timer, data: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, kind, data))

    def pop_due(self, now: float) -> tuple[Timer, Any] | None:
        """The earliest timer due at ``now`` (removed), or None."""
        if self._heap and self._heap[0][0] <= now:
            _, _, kind, data = heapq.heappop(self._heap)
            return kind, data
        return None

    def next_at(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)
