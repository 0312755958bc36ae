"""A sliding one-second rate limit (RFC 3561 section 10's RREQ_RATELIMIT and
RERR_RATELIMIT; DSR borrows them, RFC 4728 having no numbers of its own)."""

from __future__ import annotations

from collections import deque


class RateLimit:
    """At most ``per_second`` events in any window of one second."""

    __slots__ = ("per_second", "times")

    def __init__(self, per_second: int) -> None:
        self.per_second = per_second
        self.times: deque[float] = deque()  # the events of the last second, oldest first

    def full(self, now: float) -> bool:
        """True when ``per_second`` events happened in the last second."""
        times = self.times
        while times and times[0] + 1.0 <= now:
            times.popleft()
        return len(times) >= self.per_second

    def take(self, now: float) -> bool:
        """Note an event at ``now`` if the limit allows one (True), else False."""
        if self.full(now):
            return False
        self.times.append(now)
        return True

    def reopens_at(self) -> float:
        """When the oldest event of a full window ages out (call after :meth:`full`)."""
        return self.times[0] + 1.0

    def __len__(self) -> int:
        return len(self.times)
