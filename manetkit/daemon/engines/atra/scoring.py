"""How a node keeps its own score of its failure predictions (docs/atra.md "Scoring").

Shared by every predictor (:mod:`.rfp`'s fit, :mod:`.trend`'s smoothed trigger): a
prediction stays *open* for twice the look-ahead; it is a *hit* when the link really
fails (TxFailed / LinkDown) while open, otherwise a *false alarm*; a failure with no
open prediction is a *break not predicted* (only for links some route used: RFP has to
see the breaks of active routes coming, Anantharaman et al. IV-A). The experiments
score against the medium's ground truth instead (a node that leaves a predicted link
also stops hearing it, so a wrong prediction can score a hit here).

Bounded: one remembered break per neighbour, at most ``MAX_FAILED``.

:class:`ScoredPredictor` is what the predictors share around the book: its timer and
queries, and a break that forgets the neighbour (each says what it remembered).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import Any

from manetkit.daemon.engines.atra.config import AtraConfig

MAX_FAILED = 1024  # breaks remembered for scoring repeats (see _forget_old_failures)


@dataclass(frozen=True, slots=True)
class Prediction:
    """The link to ``neighbour`` is expected to break ``eta_s`` after ``at``."""

    neighbour: IPv4Address
    at: float
    signal_dbm: float
    slope_db_per_s: float
    eta_s: float
    speed_mps: float
    distance_m: float


@dataclass(slots=True)
class _Open:
    prediction: Prediction
    until: float


class PredictionBook:
    def __init__(self, config: AtraConfig) -> None:
        self.cfg = config
        self.open: dict[IPv4Address, _Open] = {}
        self.failed: dict[IPv4Address, float] = {}
        self.repeat_s = 2 * config.lookahead_s + config.window_s
        self.predictions = 0
        self.hits = 0
        self.false_alarms = 0
        self.missed = 0

    def add(self, prediction: Prediction) -> None:
        self.open[prediction.neighbour] = _Open(
            prediction, prediction.at + 2 * self.cfg.lookahead_s
        )
        self.predictions += 1

    def link_failed(
        self,
        now: float,
        neighbour: IPv4Address,
        tracked: bool,
        last_heard: float | None,
        in_use: bool = True,
    ) -> str:
        """The link really broke: ``hit`` or ``missed``; ``repeat`` (not counted) for a
        link never heard (``tracked`` False) or one that broke again just before;
        ``idle`` (not counted) for an unpredicted break of a link no route used.

        The break is dated when the neighbour was last heard (plus 0.2 x look-ahead):
        link sensing reports a silent neighbour seconds later."""
        last = self.failed.get(neighbour)
        if last_heard is not None:
            now = min(now, last_heard + 2 * self.cfg.lookahead_s / 10)
        op = self.open.pop(neighbour, None)
        if op is None and (not tracked or (last is not None and now - last < self.repeat_s)):
            return "repeat"  # the same break reported again (TxFailed, then LinkDown)
        self._forget_old_failures(now)
        if op is None and not in_use:
            self.failed[neighbour] = now
            return "idle"
        self.failed[neighbour] = now
        if op is not None and now <= op.until:
            self.hits += 1
            return "hit"
        if op is not None:
            self.false_alarms += 1
        self.missed += 1
        return "missed"

    def _forget_old_failures(self, now: float) -> None:
        """Bound ``failed`` (one entry per neighbour that ever broke; spoofed stations
        could grow it): beyond MAX_FAILED, entries older than the repeat window go;
        they no longer change how a break is scored."""
        if len(self.failed) < MAX_FAILED:
            return
        for nb in [nb for nb, t in self.failed.items() if now - t >= self.repeat_s]:
            del self.failed[nb]
        while len(self.failed) >= MAX_FAILED:  # all recent: the oldest goes
            del self.failed[min(self.failed, key=self.failed.__getitem__)]

    def handle_timer(self, now: float) -> list[Prediction]:
        """Predictions whose 2x look-ahead passed without a failure: false alarms."""
        gone = [nb for nb, op in self.open.items() if op.until <= now]
        out = []
        for nb in gone:
            out.append(self.open.pop(nb).prediction)
            self.false_alarms += 1
        return out

    def get_timer(self) -> float | None:
        return min((op.until for op in self.open.values()), default=None)

    def predicted(self, neighbour: IPv4Address, now: float) -> bool:
        op = self.open.get(neighbour)
        return op is not None and now <= op.until

    def open_predictions(self) -> list[Prediction]:
        return [op.prediction for op in self.open.values()]

    def counters(self) -> dict[str, Any]:
        return {
            "predictions": self.predictions,
            "hits": self.hits,
            "false_alarms": self.false_alarms,
            "breaks_not_predicted": self.missed,
        }


class ScoredPredictor(ABC):
    """A predictor's shared half: its :class:`PredictionBook` (``book``), the run of
    agreeing samples per neighbour (``_streak``), the timer, the queries and the break.
    Inputs are stamped with ``now``; a subclass adds ``sample`` and its memory of each
    neighbour (:meth:`_forget`)."""

    def __init__(self, config: AtraConfig) -> None:
        self.cfg = config
        self._streak: dict[IPv4Address, int] = {}
        self.book = PredictionBook(config)

    @property
    def predictions(self) -> int:
        return self.book.predictions

    @abstractmethod
    def _forget(self, neighbour: IPv4Address) -> tuple[bool, float | None]:
        """Drop what is remembered of ``neighbour``: (was anything, when last heard)."""

    def link_failed(self, now: float, neighbour: IPv4Address, in_use: bool = True) -> str:
        """The link really broke (TxFailed / LinkDown): scored by the book
        (:meth:`PredictionBook.link_failed`), the break dated when the neighbour was
        last heard; what was remembered of it is forgotten."""
        tracked, last = self._forget(neighbour)
        self._streak.pop(neighbour, None)
        return self.book.link_failed(now, neighbour, tracked, last, in_use)

    def handle_timer(self, now: float) -> list[Prediction]:
        return self.book.handle_timer(now)

    def get_timer(self) -> float | None:
        return self.book.get_timer()

    # -- queries
    def predicted(self, neighbour: IPv4Address, now: float) -> bool:
        """True while a prediction for this link is open (Atra's RREQ suppression)."""
        return self.book.predicted(neighbour, now)

    def open_predictions(self) -> list[Prediction]:
        return self.book.open_predictions()

    def counters(self) -> dict[str, Any]:
        return self.book.counters()
