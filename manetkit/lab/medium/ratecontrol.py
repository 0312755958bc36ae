"""Unicast rate selection: a fixed rate, or a Minstrel-like controller per destination.

The MAC asks for a *retry chain* when a frame's exchange begins (the rate of every
attempt, ``retry_limit + 1`` of them) and reports each attempt's outcome (ACK or not).
Sans-I/O: ``now`` is passed in, randomness is the injected ``random.Random``.

Minstrel (Derek Smithies and Felix Fietkau, mac80211 ``rc80211_minstrel``; ns-3
``MinstrelWifiManager``), reduced to what a rate choice needs:

- per destination and rate, attempts and successes over an update interval (100 ms);
  at each update the success probability p = successes / attempts enters an EWMA
  (weight 75 % old, 25 % new; a rate not tried in the interval keeps its value);
- the expected throughput of a rate is min(p, 0.9) / (the time one 1200-byte attempt
  takes: DIFS, mean backoff, the frame, SIFS, the ACK), 0 when p < 0.1 (mac80211 caps p
  at 90 % so that a fast rate at 92 % is not dropped for a slow one at 100 %);
- the retry chain (mac80211's multi-rate retry): the best throughput rate, the second
  best, the most reliable one, then the lowest rate, two attempts each, the last stage
  taking what is left of ``retry_limit + 1``;
- look-around: 10 % of the frames (counted, so exactly one in ten) sample another rate,
  drawn at random: first in the chain if it is faster than the best rate, second after
  one attempt at the best rate otherwise (a slow rate costs airtime even when it works);
- before any statistics exist the best rate is the lowest (ns-3's initial rate).

One controller per transmitter, as in mac80211 (each station keeps its own statistics
per peer): two senders to one destination learn their own links. Every controller
also keeps what it tried, per destination and rate (:meth:`use`), so a run can say at
which rates its frames went.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

UPDATE_INTERVAL_S = 0.1
EWMA_OLD = 0.75
LOOK_AROUND = 0.10
MIN_PROBABILITY = 0.10
MAX_PROBABILITY = 0.90
STAGE_ATTEMPTS = 2
REFERENCE_BYTES = 1200  # ns-3 MinstrelWifiManager PacketLength


class RateUse:
    """Attempts and acknowledged attempts per destination and rate, since the start."""

    def __init__(self) -> None:
        self._use: dict[int, dict[float, list[int]]] = {}

    def count(self, dst: int, rate: float, ok: bool) -> None:
        per_rate = self._use.get(dst)
        if per_rate is None:
            per_rate = self._use[dst] = {}
        c = per_rate.get(rate)
        if c is None:
            c = per_rate[rate] = [0, 0]
        c[0] += 1
        if ok:
            c[1] += 1

    def use(self) -> dict[int, dict[float, tuple[int, int]]]:
        """``{dst: {rate: (attempts, acked)}}``."""
        return {d: {r: (c[0], c[1]) for r, c in rs.items()} for d, rs in self._use.items()}


class FixedRate(RateUse):
    """Every attempt at ``rate_mbps``."""

    def __init__(self, rate_mbps: float, attempts: int):
        super().__init__()
        self.rate = rate_mbps
        self._chain = (rate_mbps,) * attempts

    def chain(self, now: float, dst: int) -> tuple[float, ...]:
        return self._chain

    def attempted(self, now: float, dst: int, rate: float, ok: bool) -> None:
        self.count(dst, rate, ok)


class _RateStats:
    __slots__ = ("attempts", "successes", "ewma")

    def __init__(self) -> None:
        self.attempts = 0
        self.successes = 0
        self.ewma: float | None = None


class _Destination:
    __slots__ = ("stats", "updated", "frames", "samples", "best", "second", "reliable")

    def __init__(self, rates: Sequence[float], now: float):
        self.stats = {r: _RateStats() for r in rates}
        self.updated = now
        self.frames = 0
        self.samples = 0
        lowest = min(rates)
        self.best = self.second = self.reliable = lowest


class Minstrel(RateUse):
    """Minstrel-like rate control of one transmitter over ``rates``; ``attempt_us(rate)``
    is the airtime of one reference attempt at that rate (for the throughput estimate)."""

    def __init__(
        self,
        rates: Sequence[float],
        attempts: int,
        attempt_us: Callable[[float], float],
        rng: random.Random,
    ):
        super().__init__()
        if not rates:
            raise ValueError("Minstrel needs at least one rate")
        self.rates = tuple(sorted(rates))
        self.attempts = attempts
        self.rng = rng
        self._time = {r: attempt_us(r) for r in self.rates}
        self._dst: dict[int, _Destination] = {}

    def _of(self, now: float, dst: int) -> _Destination:
        d = self._dst.get(dst)
        if d is None:
            d = self._dst[dst] = _Destination(self.rates, now)
        elif now - d.updated >= UPDATE_INTERVAL_S:
            self._update(d, now)
        return d

    def throughput(self, dst: int, rate: float) -> float:
        """Expected successful attempts per microsecond at ``rate`` (0 if unknown)."""
        d = self._dst.get(dst)
        p = d.stats[rate].ewma if d is not None else None
        if p is None or p < MIN_PROBABILITY:
            return 0.0
        return min(p, MAX_PROBABILITY) / self._time[rate]

    def _update(self, d: _Destination, now: float) -> None:
        d.updated = now
        for s in d.stats.values():
            if s.attempts:
                p = s.successes / s.attempts
                s.ewma = p if s.ewma is None else EWMA_OLD * s.ewma + (1 - EWMA_OLD) * p
                s.attempts = s.successes = 0
        known = [r for r in self.rates if d.stats[r].ewma is not None]
        if not known:
            return
        tp = {r: self._tp(d, r) for r in known}
        ranked = sorted(known, key=lambda r: (tp[r], r), reverse=True)
        if tp[ranked[0]] > 0:
            d.best = ranked[0]
            d.second = ranked[1] if len(ranked) > 1 and tp[ranked[1]] > 0 else d.best
        else:
            d.best = d.second = self.rates[0]
        d.reliable = max(known, key=lambda r: (d.stats[r].ewma, -r))

    def _tp(self, d: _Destination, rate: float) -> float:
        p = d.stats[rate].ewma
        if p is None or p < MIN_PROBABILITY:
            return 0.0
        return min(p, MAX_PROBABILITY) / self._time[rate]

    def chain(self, now: float, dst: int) -> tuple[float, ...]:
        d = self._of(now, dst)
        d.frames += 1
        lowest = self.rates[0]
        stages: list[tuple[float, int]]
        if len(self.rates) > 1 and d.samples < LOOK_AROUND * d.frames:
            d.samples += 1
            sample = self.rng.choice([r for r in self.rates if r != d.best])
            if sample > d.best:
                stages = [(sample, 1), (d.best, STAGE_ATTEMPTS), (d.reliable, STAGE_ATTEMPTS)]
            else:
                stages = [(d.best, 1), (sample, 1), (d.reliable, STAGE_ATTEMPTS)]
        else:
            stages = [
                (d.best, STAGE_ATTEMPTS),
                (d.second, STAGE_ATTEMPTS),
                (d.reliable, STAGE_ATTEMPTS),
            ]
        out: list[float] = []
        for rate, count in stages:
            out += [rate] * count
        out += [lowest] * max(0, self.attempts - len(out))
        return tuple(out[: self.attempts])

    def attempted(self, now: float, dst: int, rate: float, ok: bool) -> None:
        self.count(dst, rate, ok)
        d = self._of(now, dst)
        s = d.stats[rate]
        s.attempts += 1
        if ok:
            s.successes += 1

    def best_rate(self, now: float, dst: int) -> float:
        """The rate the next (non-sampling) frame to ``dst`` starts with."""
        return self._of(now, dst).best


RateControl = FixedRate | Minstrel
