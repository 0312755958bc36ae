"""The daemon's event / monitoring socket (JSON lines, :class:`manetkit.jsonlines.LineServer`).

Requests (one JSON object per line; babeld's local.c is the model):
  {"cmd":"subscribe"}  -> {"ok":true,"subscribed":true}, then every event as one line,
                          :func:`manetkit.events.to_wire`:
                          {"event":"route-down","time":<unix time>, ...fields}
  {"cmd":"status"}     -> {"ok":true,"status":{...}}
  {"cmd":"ping"}       -> {"ok":true,"pong":true}
  {"cmd":"discover","dst":"10.42.0.5"}
                       -> {"ok":true,"restarted":bool}: ask the engine for a fresh route
                          request to dst now (an ELFN probe, Holland & Vaidya section 6);
                          restarted is false when a route exists or the rate limit holds.
                          It changes state: only root or the configured control group.
anything else          -> {"ok":false,"error":"..."} (the connection stays open)

A slow subscriber never blocks the daemon: each has a bounded queue; when it is full the
event is dropped for that subscriber and counted (``dropped`` in status, and the next
event it does get carries ``"missed": N`` so the tool knows it lost some).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

from manetkit.events import Event, to_wire
from manetkit.jsonlines import QUEUE_LINES, Access, LineServer, status_handler

PRIVILEGED = frozenset({"discover"})


class EventServer:
    """The event socket: status, ping, discover, and typed events to subscribers."""

    def __init__(
        self,
        path: Path,
        status: Callable[[], dict[str, Any]],
        queue_events: int = QUEUE_LINES,
        discover: Callable[[IPv4Address], bool] | None = None,
        access: Access | None = None,
    ) -> None:
        self.server = LineServer(
            path,
            self._request,
            privileged=PRIVILEGED,
            access=access or Access(),
            subscribe=True,
            queue_lines=queue_events,
            name="event socket",
        )
        self.path = self.server.path
        self._basic = status_handler(status)
        self._discover = discover

    async def start(self) -> None:
        await self.server.start()

    async def close(self) -> None:
        await self.server.close()

    @property
    def subscribers(self) -> int:
        return self.server.subscribers

    @property
    def dropped(self) -> int:
        return self.server.dropped

    def counters(self) -> dict[str, int]:
        return self.server.counters()

    def publish(self, event: Event) -> None:
        """Send a typed event (:mod:`manetkit.events`), serialised once, to every subscriber."""
        self.server.publish(to_wire(event, time.time()))

    def _request(self, req: dict[str, Any]) -> dict[str, Any]:
        cmd = req["cmd"]
        if cmd in ("status", "ping"):
            return self._basic(req)
        if cmd == "discover" and self._discover is not None:
            try:
                dst = IPv4Address(req.get("dst"))
            except ValueError:
                raise ValueError(f"discover: dst {req.get('dst')!r} is not IPv4") from None
            return {"ok": True, "restarted": self._discover(dst)}
        known = "subscribe, status, ping" + (", discover" if self._discover else "")
        raise ValueError(f"unknown cmd {cmd!r}; known: {known}")
