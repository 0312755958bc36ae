"""The proxy's client of the routing daemon's event socket (JSON lines).

It subscribes (``{"cmd":"subscribe"}``), parses every event line with
:func:`manetkit.events.from_wire` into the typed events the policy acts on, and sends
``{"cmd":"discover","dst":D}`` on the same connection when a probe wants the route
re-found (Holland & Vaidya section 6). While the daemon is away it reconnects every
second. Reply lines (no ``"event"``) are skipped; a line that breaks the schema is
counted and logged once per event name, not per line.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from ipaddress import IPv4Address
from pathlib import Path

from manetkit import events

log = logging.getLogger("manetkit.proxy")

RETRY_S = 1.0
LINE_LIMIT = 1 << 20


class DaemonClient:
    """Subscription to the daemon's events; ``on_event`` gets each typed event."""

    def __init__(self, path: Path, on_event: Callable[[events.Event], None]) -> None:
        self.path = str(path)
        self.on_event = on_event
        self.connected = False
        self._writer: asyncio.StreamWriter | None = None
        self.counters = {"route_events": 0, "bad_events": 0, "discover_requests": 0}
        self._bad_logged: set[str] = set()

    async def run(self) -> None:
        """Subscribe; reconnect while the daemon is away (cancel to stop)."""
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(self.path, limit=LINE_LIMIT)
            except OSError:
                self.connected = False
                await asyncio.sleep(RETRY_S)
                continue
            try:
                writer.write(b'{"cmd":"subscribe"}\n')
                await writer.drain()
                self.connected = True
                self._writer = writer
                log.info("subscribed to daemon events on %s", self.path)
                while line := await reader.readline():
                    self.feed_line(line)
            except OSError:
                pass
            finally:
                self.connected = False
                self._writer = None
                writer.close()
            await asyncio.sleep(RETRY_S)

    def feed_line(self, line: bytes) -> None:
        """One line from the socket: an event goes to ``on_event``; replies are skipped."""
        try:
            obj = json.loads(line)
        except ValueError:
            self._bad("(not JSON)", "not JSON")
            return
        if not isinstance(obj, dict) or "event" not in obj:
            return  # a reply ({"ok": ...}) to subscribe or discover
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
        w = self._writer
        if w is None or w.is_closing():
            return
        self.counters["discover_requests"] += 1
        w.write(json.dumps({"cmd": "discover", "dst": str(dst)}).encode() + b"\n")
