"""The event / monitoring socket: a unix stream socket speaking JSON lines (babeld's local.c).

Requests (one JSON object per line):
  {"cmd":"subscribe"}  -> {"ok":true,"subscribed":true}, then every event as one line:
                          {"event":"route-down","time":<unix time>, ...fields}
  {"cmd":"status"}     -> {"ok":true,"status":{...}}
  {"cmd":"ping"}       -> {"ok":true,"pong":true}
  {"cmd":"discover","dst":"10.42.0.5"}
                       -> {"ok":true,"restarted":bool}: ask the engine for a fresh route
                          request to dst now (an ELFN probe, Holland & Vaidya section 6);
                          restarted is false when a route exists or the rate limit holds
anything else          -> {"ok":false,"error":"..."} (the connection stays open)

A slow subscriber never blocks the daemon: each has a bounded queue; when it is full the
event is dropped for that subscriber and counted (``dropped`` in status, and the next
event it does get carries ``"missed": N`` so the tool knows it lost some).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

from manetkit.events import Event, to_wire

log = logging.getLogger(__name__)

QUEUE_EVENTS = 1024
MAX_REQUEST = 64 * 1024


class _Subscriber:
    __slots__ = ("queue", "missed", "task")

    def __init__(self, size: int) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue(size)
        self.missed = 0
        self.task: asyncio.Task[None] | None = None


class EventServer:
    def __init__(
        self,
        path: Path,
        status: Callable[[], dict[str, Any]],
        queue_events: int = QUEUE_EVENTS,
        discover: Callable[[IPv4Address], bool] | None = None,
    ) -> None:
        self.path = Path(path)
        self._status = status
        self._discover = discover
        self._queue_events = queue_events
        self._subs: set[_Subscriber] = set()
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self.published = 0
        self.dropped = 0
        self.bad_requests = 0

    async def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() or self.path.is_symlink():
            if socket_alive(self.path):
                raise OSError(f"event socket {self.path} is in use: is another daemon running?")
            self.path.unlink()  # left by a crashed daemon
        self._server = await asyncio.start_unix_server(
            self._client, path=str(self.path), limit=MAX_REQUEST
        )
        os.chmod(self.path, 0o660)

    async def close(self) -> None:
        if self._server is None:
            return  # never started: the path (if any) is not ours
        self._server.close()
        for sub in list(self._subs):
            if sub.task:
                sub.task.cancel()
        for t in list(self._conns):
            t.cancel()
        with contextlib.suppress(OSError):
            self.path.unlink()
        self._server = None

    @property
    def subscribers(self) -> int:
        return len(self._subs)

    def publish(self, event: Event) -> None:
        """Send a typed event (:mod:`manetkit.events`) to every subscriber."""
        self.published += 1
        if not self._subs:
            return
        msg = to_wire(event, time.time())
        line = (json.dumps(msg, default=str) + "\n").encode()
        for sub in self._subs:
            if sub.missed and not sub.queue.full():
                # Tell the subscriber how much it lost before this event.
                miss = {**msg, "missed": sub.missed}
                sub.queue.put_nowait((json.dumps(miss, default=str) + "\n").encode())
                sub.missed = 0
                continue
            try:
                sub.queue.put_nowait(line)
            except asyncio.QueueFull:
                sub.missed += 1
                self.dropped += 1

    def counters(self) -> dict[str, int]:
        return {
            "subscribers": len(self._subs),
            "published": self.published,
            "dropped": self.dropped,
            "bad_requests": self.bad_requests,
        }

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task:
            self._conns.add(task)
        sub: _Subscriber | None = None
        try:
            while True:
                try:
                    line = await reader.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    self.bad_requests += 1
                    await _send(writer, {"ok": False, "error": "request line too long"})
                    break
                if not line:
                    break
                reply = self._request(line)
                if reply.get("subscribed") and sub is None:
                    sub = _Subscriber(self._queue_events)
                    self._subs.add(sub)
                    await _send(writer, reply)
                    sub.task = asyncio.create_task(self._pump(sub, writer))
                    continue
                await _send(writer, reply)
        except (ConnectionError, OSError):
            pass
        finally:
            if sub is not None:
                self._subs.discard(sub)
                if sub.task:
                    sub.task.cancel()
            if task:
                self._conns.discard(task)
            writer.close()

    def _request(self, line: bytes) -> dict[str, Any]:
        try:
            req = json.loads(line)
            cmd = req["cmd"] if isinstance(req, dict) else None
        except (ValueError, KeyError):
            self.bad_requests += 1
            return {"ok": False, "error": 'expected a JSON object with "cmd"'}
        if cmd == "subscribe":
            return {"ok": True, "subscribed": True}
        if cmd == "status":
            return {"ok": True, "status": self._status()}
        if cmd == "ping":
            return {"ok": True, "pong": True}
        if cmd == "discover" and self._discover is not None:
            try:
                dst = IPv4Address(req.get("dst"))
            except ValueError:
                self.bad_requests += 1
                return {"ok": False, "error": f"discover: dst {req.get('dst')!r} is not IPv4"}
            return {"ok": True, "restarted": self._discover(dst)}
        self.bad_requests += 1
        known = "subscribe, status, ping" + (", discover" if self._discover else "")
        return {"ok": False, "error": f"unknown cmd {cmd!r}; known: {known}"}

    async def _pump(self, sub: _Subscriber, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                writer.write(await sub.queue.get())
                await writer.drain()
        except (ConnectionError, OSError):
            self._subs.discard(sub)


async def _send(writer: asyncio.StreamWriter, obj: dict[str, Any]) -> None:
    writer.write((json.dumps(obj, default=str) + "\n").encode())
    await writer.drain()


def socket_alive(path: Path) -> bool:
    """True if something accepts connections on the unix socket ``path``."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()
