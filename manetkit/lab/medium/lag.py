"""How late the medium hands its outputs out: the emulation's proof of keeping real time.

Every output of the sans-I/O MAC (:class:`~manetkit.lab.medium.mac.Delivery`,
:class:`~manetkit.lab.medium.mac.TxStatus`) carries the virtual time ``at`` it is due;
the medium's shell hands it to a radio at ``now`` (its clock), so ``now - at`` is the
*scheduling lag* of that output. A lab whose medium is starved of CPU hands frames out
late: the airtime model stays exact (docs/medium.md, "virtual schedule"), but TCP and
the routing protocols see delays that no 802.11 network would have, so a run with a
large lag measures the machine, not the protocols.

:class:`LagRecorder` keeps a cumulative histogram on fixed, log-spaced edges (so two
readings taken at a window's start and end subtract into the window's histogram) and a
bounded series of per-second summaries. It does no I/O and reads no clock.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

# Bucket upper edges in microseconds: 10 us .. ~10 s, 8 buckets per factor of 10
# (each edge 1.33x the previous); the last bucket is open. A percentile is reported as
# its bucket's upper edge: never lower than the truth, at most 33 % higher.
_PER_DECADE = 8
EDGES_US: tuple[float, ...] = tuple(
    round(10.0 * 10 ** (k / _PER_DECADE), 3) for k in range(6 * _PER_DECADE + 1)
)
SECONDS_KEPT = 3600  # per-second summaries kept (an hour of lab time)
RECENT_S = 10  # "the last seconds" of :meth:`LagRecorder.summary`


def bucket_of(lag_us: float) -> int:
    """Index of the bucket holding ``lag_us`` (len(EDGES_US) = the open last bucket)."""
    if lag_us <= EDGES_US[0]:
        return 0
    k = math.ceil(_PER_DECADE * math.log10(lag_us / 10.0) - 1e-9)
    k = min(max(k, 0), len(EDGES_US))
    # guard the float rounding of the edges
    while k < len(EDGES_US) and lag_us > EDGES_US[k]:
        k += 1
    while k > 0 and lag_us <= EDGES_US[k - 1]:
        k -= 1
    return k


def percentile_us(counts: list[int] | tuple[int, ...], q: float) -> float | None:
    """The ``q`` quantile (0..1) of a histogram on :data:`EDGES_US`, as a bucket's upper
    edge; None for an empty histogram; inf when it falls in the open last bucket."""
    total = sum(counts)
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for k, c in enumerate(counts):
        seen += c
        if seen >= rank:
            return EDGES_US[k] if k < len(EDGES_US) else math.inf
    return math.inf  # pragma: no cover - the loop always reaches rank


@dataclass(slots=True)
class SecondSummary:
    """One second of the medium's clock: ``second`` = floor(t)."""

    second: int
    count: int
    p50_us: float | None
    p99_us: float | None
    max_us: float

    def to_wire(self) -> list:
        return [self.second, self.count, self.p50_us, self.p99_us, round(self.max_us, 1)]

    @classmethod
    def from_wire(cls, row: list) -> SecondSummary:
        second, count, p50, p99, mx = row
        return cls(int(second), int(count), p50, p99, float(mx))


class LagRecorder:
    """Cumulative lag histogram plus per-second summaries (sans-I/O)."""

    def __init__(self, seconds_kept: int = SECONDS_KEPT) -> None:
        self.counts = [0] * (len(EDGES_US) + 1)
        self.max_us = 0.0
        self.seconds: deque[SecondSummary] = deque(maxlen=seconds_kept)
        self._second: int | None = None
        self._sec_counts = [0] * (len(EDGES_US) + 1)
        self._sec_max = 0.0
        # the last closed seconds' histograms, for :meth:`summary`: (second, counts, max)
        self._recent: deque[tuple[int, list[int], float]] = deque(maxlen=RECENT_S)

    def record(self, now: float, due: float) -> None:
        """An output due at ``due`` was handed out at ``now`` (same clock, seconds)."""
        lag_us = max(0.0, (now - due) * 1e6)
        sec = int(now)
        if sec != self._second:
            self._close_second()
            self._second = sec
        k = bucket_of(lag_us)
        self.counts[k] += 1
        self._sec_counts[k] += 1
        if lag_us > self.max_us:
            self.max_us = lag_us
        if lag_us > self._sec_max:
            self._sec_max = lag_us

    def _close_second(self) -> None:
        if self._second is None or not any(self._sec_counts):
            return
        c = self._sec_counts
        self.seconds.append(
            SecondSummary(
                self._second, sum(c), percentile_us(c, 0.5), percentile_us(c, 0.99), self._sec_max
            )
        )
        self._recent.append((self._second, c, self._sec_max))
        self._sec_counts = [0] * (len(EDGES_US) + 1)
        self._sec_max = 0.0

    def to_wire(self, since: int | None = None) -> dict:
        """What the medium's ``fidelity`` control command reports: the cumulative
        histogram and every closed second plus the one in progress (only the seconds
        from ``since`` on, when given: a client polling often asks for the new rows)."""
        if since is None:
            rows = [s.to_wire() for s in self.seconds]
        else:
            rows = []
            for s in reversed(self.seconds):
                if s.second < since:
                    break
                rows.append(s.to_wire())
            rows.reverse()
        if self._second is not None and any(self._sec_counts):
            c = self._sec_counts
            rows.append(
                SecondSummary(
                    self._second,
                    sum(c),
                    percentile_us(c, 0.5),
                    percentile_us(c, 0.99),
                    self._sec_max,
                ).to_wire()
            )
        return {"edges_us": list(EDGES_US), "counts": list(self.counts), "seconds": rows}

    def summary(self, now: float, recent_s: int = RECENT_S) -> dict[str, dict]:
        """Lag p50/p99/max in ms and the outputs counted, since the start and over the
        last ``recent_s`` seconds before ``now`` (what ``lab status`` shows)."""
        recent = [(c, m) for sec, c, m in self._recent if sec > now - recent_s - 1]
        if self._second is not None and self._second > now - recent_s - 1:
            recent.append((self._sec_counts, self._sec_max))
        counts = [sum(col) for col in zip(*(c for c, _ in recent), strict=True)] if recent else []
        return {
            "since_start": _lag_ms(self.counts, self.max_us),
            f"last_{recent_s}s": _lag_ms(counts, max((m for _, m in recent), default=0.0)),
        }


def _lag_ms(counts: list[int], max_us: float) -> dict:
    def ms(us: float | None) -> float | None:
        return None if us is None else round(us / 1000.0, 3)

    outputs = sum(counts)
    if not outputs:
        return {"outputs": 0, "p50": None, "p99": None, "max": None}
    # a percentile is its bucket's upper edge: never report it above the exact maximum
    return {
        "outputs": outputs,
        "p50": ms(min(percentile_us(counts, 0.5), max_us)),
        "p99": ms(min(percentile_us(counts, 0.99), max_us)),
        "max": ms(max_us),
    }
