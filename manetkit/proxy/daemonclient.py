"""The proxy's client of the routing daemon's event socket (JSON lines).

It subscribes (:func:`manetkit.jsonlines.subscribe`), parses every event object with
:func:`manetkit.events.from_wire` into the typed events the policy acts on, and sends
``{"cmd":"discover","dst":D}`` on the same connection when a probe wants the route
re-found (Holland & Vaidya section 6). While the daemon is away it reconnects every
second. Reply lines (no ``"event"``) are skipped; an event that breaks the schema is
counted and logged once per event name, not per line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from ipaddress import IPv4Address
from pathlib import Path

from manetkit import events, jsonlines

log = logging.getLogger("manetkit.proxy")

RETRY_S = 1.0
LINE_LIMIT = 1 << 20


class DaemonClient:
    """Subscription to the daemon's events; ``on_event`` gets each typed event."""

    def __init__(self, path: Path, on_event: Callable[[events.Event], None]) -> None:
        self.path = str(path)
        self.on_event = on_event
        self._sub: jsonlines.Subscription | None = None
        self.counters = {"route_events": 0, "bad_events": 0, "discover_requests": 0}
        self._bad_logged: set[str] = set()

    @property
    def connected(self) -> bool:
        """Subscribed (the daemon confirmed): no route event is missed from now on."""
        return self._sub is not None and self._sub.subscribed

    async def run(self) -> None:
        """Subscribe; reconnect while the daemon is away (cancel to stop)."""
        while True:
            self._sub = sub = jsonlines.subscribe(self.path, LINE_LIMIT)
            try:
                async for obj in sub:
                    self.feed(obj)
            except OSError:
                pass
            await asyncio.sleep(RETRY_S)

    def feed(self, obj: dict) -> None:
        """One event object: typed, to ``on_event``; one that breaks the schema is counted."""
        try:
            ev = events.from_wire(obj)
        except events.EventError as exc:
            self._bad(str(obj.get("event")), str(exc))
            return
        self.counters["route_events"] += 1
        self.on_event(ev)

    def _bad(self, name: str, why: str) -> None:
        self.counters["bad_events"] += 1
        if name not in self._bad_logged and len(self._bad_logged) < 64:
            self._bad_logged.add(name)
            log.warning("daemon event skipped (logged once per name): %s", why)

    def ask_discover(self, dst: IPv4Address) -> None:
        """Send ``{"cmd":"discover"}`` for ``dst`` on the subscribed connection.

        Fire and forget: the reply line has no "event" and is skipped by the reader."""
        if self._sub is not None and self._sub.send({"cmd": "discover", "dst": str(dst)}):
            self.counters["discover_requests"] += 1
