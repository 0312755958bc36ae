"""Every daemon's events during a run, as the daemons emitted them.

A run whose metrics need them (``metrics: [atra]``, ``[flap]``) subscribes to every
node's daemon event socket (:func:`manetkit.jsonlines.subscribe`, docs/daemon.md) once the warm-up is
over, and keeps each event with its node (``{"node": "n3", "event": "route-down", ...}``,
:func:`manetkit.events.to_wire`'s fields) in memory and in ``events.jsonl`` in the run's
work directory: the evidence of which route-down / route-up / predicted-failure / erdn /
ersn each node emitted, and when (``time``: Unix time, the ground truth's clock).
"""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import Any

from manetkit import jsonlines, paths


class EventLog:
    """Subscribes to the daemons of ``nodes`` (those that answer) and records their
    events until :meth:`close`."""

    def __init__(self, lab: str, nodes: list[str], out: Path) -> None:
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._file = out.open("w")
        self._subs: list[jsonlines.Subscription] = []
        for n in nodes:
            try:
                sub = jsonlines.subscribe(paths.daemon_socket(lab, n)).connect()
            except OSError:
                continue
            self._subs.append(sub)
            threading.Thread(target=self._read, args=(n, sub), daemon=True).start()

    @property
    def subscribed(self) -> int:
        return len(self._subs)

    def _read(self, node: str, sub: jsonlines.Subscription) -> None:
        with contextlib.suppress(OSError):
            for ev in sub:
                rec = {"node": node, **ev}
                with self._lock:
                    self.events.append(rec)
                    if not self._file.closed:
                        self._file.write(json.dumps(rec) + "\n")

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def close(self) -> None:
        for sub in self._subs:
            sub.close()
        with self._lock:
            self._file.close()


def node_of(address: str) -> str:
    """``n7`` of a lab address ``10.42.0.7`` (10.42.(I // 256).(I % 256) beyond 254)."""
    parts = address.split(".")
    return f"n{int(parts[2]) * 256 + int(parts[3])}"
