"""AODV's one timer: a lower bound of the earliest deadline of every component.

Components lower it when they create a deadline; refreshing a lifetime only postpones a
deadline, so the data path never has to touch it. The engine recomputes it exactly when
it fires (:meth:`manetkit.daemon.engines.aodv.engine.AodvEngine.handle_timer`).
"""

from __future__ import annotations

INF = float("inf")


class Deadline:
    __slots__ = ("at",)

    def __init__(self, at: float = INF) -> None:
        self.at = at

    def lower(self, t: float) -> None:
        if t < self.at:
            self.at = t
