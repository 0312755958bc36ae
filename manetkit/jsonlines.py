"""manetkit's local monitoring sockets: unix stream, one JSON object per line.

The daemon's event socket, the proxy's status socket, the lab radio's and the medium's
control sockets all speak this way (babeld's local socket, ``local.c``, is the model): a
client writes one JSON object with a ``"cmd"`` and a newline, the server answers with one
line, ``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``; the connection stays
open for the next request.

:func:`request` is the one client of a request, :func:`subscribe` the one subscriber of
an event stream (the daemon's events, a lab radio's), :class:`LineServer` the one
server. The server:

- creates its socket 0660, owned by the process (root on a real node) and, if a group is
  configured, by that group (``chown``), so only root and that group can connect;
- refuses the commands a server marks ``privileged`` (those that change state: the
  daemon's ``discover``, the medium's ``move``/``link``) unless the peer, read with
  ``SO_PEERCRED``/``SO_PEERGROUPS`` (unix(7), socket(7)), is uid 0 or a member of the
  group, with an error naming the command and the rule;
- streams published lines to subscribers (``{"cmd": "subscribe"}``, at most
  ``max_subscribers``) through a bounded queue each: a slow subscriber never blocks the
  server; what does not fit is dropped, counted (``dropped``), and the subscriber's next
  line carries ``"missed": N``.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import json
import logging
import os
import socket
import struct
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

QUEUE_LINES = 1024
MAX_SUBSCRIBERS = 64
MAX_REQUEST = 64 * 1024
SOCKET_MODE = 0o660
# Linux's SO_PEERGROUPS (asm-generic/socket.h); older Pythons lack the constant.
SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)
_MAX_GROUPS = 256

Handler = Callable[[dict[str, Any]], dict[str, Any]]


def request(path: str | Path, cmd: dict[str, Any], timeout: float = 3.0) -> dict[str, Any]:
    """Send ``cmd``, return the parsed reply line.

    Raises ``OSError`` (no server, timeout), ``ConnectionError`` (closed without a
    reply) or ``ValueError`` (a reply that is not JSON).
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(path))
        s.sendall(json.dumps(cmd).encode() + b"\n")
        with s.makefile("rb") as f:
            line = f.readline()
    if not line:
        raise ConnectionError(f"{path} closed the connection without a reply")
    return json.loads(line)


SUBSCRIBE = b'{"cmd":"subscribe"}\n'
# Longest event line a subscriber reads (a lab radio's tx-failed carries a frame in hex).
EVENT_LINE_LIMIT = 1 << 20


class Subscription:
    """One subscription to a server's event stream (see :func:`subscribe`)."""

    def __init__(self, path: str | Path, limit: int = EVENT_LINE_LIMIT) -> None:
        self.path = Path(path)
        self.limit = limit
        self.subscribed = False  # the server confirmed ({"ok": true, "subscribed": true})
        self.malformed = 0  # lines that were not JSON objects
        self._sock: socket.socket | None = None
        self._file: Any = None  # the blocking connection's reader
        self._writer: asyncio.StreamWriter | None = None

    def _event(self, line: bytes) -> dict[str, Any] | None:
        """The event in ``line``; None for a reply (counted if it is no JSON object)."""
        try:
            obj = json.loads(line)
        except ValueError:
            self.malformed += 1
            return None
        if not isinstance(obj, dict):
            self.malformed += 1
            return None
        if "event" in obj:
            return obj
        if obj.get("subscribed"):
            self.subscribed = True
        return None

    def connect(self, timeout: float | None = 5.0) -> Subscription:
        """Blocking: connect and subscribe, returning once the server confirmed (so no
        event published afterwards is missed). ``OSError`` if the server is not there
        or refuses (``ConnectionError`` naming its reason)."""
        if self._file is not None:
            return self
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(str(self.path))
            s.sendall(SUBSCRIBE)
            f = s.makefile("rb")
            first = f.readline()
            try:
                reply = json.loads(first) if first else {}
            except ValueError:
                reply = {}
            if not reply.get("subscribed"):
                f.close()
                raise ConnectionError(
                    f"{self.path} refused the subscription: {reply.get('error', first[:200])}"
                )
            s.settimeout(None)
        except BaseException:
            s.close()
            raise
        self.subscribed = True
        self._sock, self._file = s, f
        return self

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Blocking: (connect and) yield each event until the stream ends, or until
        :meth:`close` from another thread."""
        self.connect()
        f = self._file
        try:
            for line in f:
                ev = self._event(line)
                if ev is not None:
                    yield ev
        except OSError:
            if self._sock is not None:  # not close(): the caller wants to know
                raise
        finally:
            self.subscribed = False
            f.close()
            self._file = None

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        """asyncio: connect, subscribe, yield each event until the stream ends.
        ``OSError`` if the server is not there or the connection breaks."""
        reader, writer = await asyncio.open_unix_connection(str(self.path), limit=self.limit)
        self._writer = writer
        try:
            writer.write(SUBSCRIBE)
            await writer.drain()
            while line := await reader.readline():
                ev = self._event(line)
                if ev is not None:
                    yield ev
        finally:
            self.subscribed = False
            self._writer = None
            writer.close()

    def send(self, obj: dict[str, Any]) -> bool:
        """Write a request on the subscribed connection (asyncio; fire and forget: its
        reply line has no ``event`` and is skipped). False when not connected."""
        w = self._writer
        if w is None or w.is_closing():
            return False
        w.write(encode(obj))
        return True

    def close(self) -> None:
        """End a blocking subscription (also from another thread, ending its loop)."""
        s, self._sock = self._sock, None
        if s is not None:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


def subscribe(path: str | Path, limit: int = EVENT_LINE_LIMIT) -> Subscription:
    """Subscribe to the event stream of the server on ``path`` (``{"cmd":"subscribe"}``):
    iterate the result, ``for ev in ...`` in a thread (after :meth:`Subscription.connect`
    when no event may be missed) or ``async for ev in ...`` in asyncio, to get each event
    object (a dict with ``"event"``; the typed readers are
    :func:`manetkit.events.from_wire` and :func:`manetkit.radioevents.from_wire`).
    Replies are skipped; reconnecting is the caller's choice."""
    return Subscription(path, limit)


def encode(obj: dict[str, Any]) -> bytes:
    """One JSON line (compact; values JSON does not know are written with ``str``)."""
    return (json.dumps(obj, separators=(",", ":"), default=str) + "\n").encode()


def socket_alive(path: str | Path) -> bool:
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


@dataclass(frozen=True)
class Peer:
    """The credentials of a connected client (``SO_PEERCRED`` + ``SO_PEERGROUPS``)."""

    pid: int
    uid: int
    gid: int
    groups: frozenset[int] = frozenset()


def peer_of(sock: socket.socket) -> Peer | None:
    """The peer of a connected unix socket, None if the kernel does not say."""
    try:
        pid, uid, gid = struct.unpack(
            "3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        )
    except OSError:
        return None
    groups: frozenset[int] = frozenset()
    with contextlib.suppress(OSError):
        raw = sock.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, 4 * _MAX_GROUPS)
        groups = frozenset(struct.unpack(f"{len(raw) // 4}I", raw[: len(raw) // 4 * 4]))
    return Peer(pid, uid, gid, groups)


def group_id(group: str | int) -> int:
    """A group name or number as a gid; ``ValueError`` naming the group if unknown."""
    if isinstance(group, int) or str(group).isdigit():
        return int(group)
    try:
        return grp.getgrnam(str(group)).gr_gid
    except KeyError:
        raise ValueError(f"group {group!r} does not exist on this host") from None


@dataclass(frozen=True)
class Access:
    """Who may run state-changing commands: uid 0, or members of ``group`` (if set)."""

    group: str | int | None = None

    def allows(self, peer: Peer | None) -> bool:
        if peer is None:
            return False
        if peer.uid == 0:
            return True
        if self.group is None:
            return False
        gid = group_id(self.group)
        return peer.gid == gid or gid in peer.groups

    def rule(self) -> str:
        return "root" + (f" or members of group {self.group!r}" if self.group is not None else "")


def status_handler(status: Callable[[], dict[str, Any]]) -> Handler:
    """A handler for the two commands every monitoring socket answers: status and ping."""

    def handle(req: dict[str, Any]) -> dict[str, Any]:
        if req["cmd"] == "status":
            return {"ok": True, "status": status()}
        if req["cmd"] == "ping":
            return {"ok": True, "pong": True}
        raise ValueError(f"unknown cmd {req['cmd']!r}; known: status, ping")

    return handle


class _Subscriber:
    __slots__ = ("queue", "missed", "task")

    def __init__(self, size: int) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue(size)
        self.missed = 0
        self.task: asyncio.Task[None] | None = None


class LineServer:
    """One JSON-lines unix socket server (see the module docstring).

    ``handle(request) -> reply`` answers every request but ``subscribe`` (when
    ``subscribe=True``); it may raise ``ValueError``/``TypeError`` (the reply is the
    message) or ``KeyError`` (``missing field``). ``privileged`` names the commands only
    :class:`Access` lets through. ``publish`` streams a line to every subscriber.
    """

    def __init__(
        self,
        path: str | Path,
        handle: Handler,
        *,
        privileged: frozenset[str] = frozenset(),
        access: Access = Access(),
        subscribe: bool = False,
        queue_lines: int = QUEUE_LINES,
        max_subscribers: int = MAX_SUBSCRIBERS,
        name: str = "socket",
    ) -> None:
        self.path = Path(path)
        self._handle = handle
        self.privileged = privileged
        self.access = access
        self._subscribe = subscribe
        self._queue_lines = queue_lines
        self.max_subscribers = max_subscribers
        self.name = name
        self._subs: set[_Subscriber] = set()
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self.published = 0
        self.dropped = 0
        self.bad_requests = 0
        self.refused = 0

    async def start(self) -> None:
        """Bind (replacing a socket file left by a crashed process), 0660, group owner."""
        gid = group_id(self.access.group) if self.access.group is not None else None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() or self.path.is_symlink():
            if socket_alive(self.path):
                raise OSError(f"{self.name} {self.path} is in use: is another one running?")
            self.path.unlink()
        self._server = await asyncio.start_unix_server(
            self._client, path=str(self.path), limit=MAX_REQUEST
        )
        os.chmod(self.path, SOCKET_MODE)
        if gid is not None:
            os.chown(self.path, -1, gid)

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

    def publish(self, obj: dict[str, Any]) -> None:
        """Queue ``obj`` (serialised once) for every subscriber; count what does not fit."""
        self.published += 1
        if not self._subs:
            return
        line = encode(obj)
        for sub in self._subs:
            if sub.missed and not sub.queue.full():
                # Tell the subscriber how much it lost before this line.
                sub.queue.put_nowait(encode({**obj, "missed": sub.missed}))
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
            "refused": self.refused,
        }

    def reply(self, line: bytes, peer: Peer | None) -> dict[str, Any]:
        """The reply to one request line (``subscribe`` aside): parse, check, handle."""
        try:
            req = json.loads(line)
        except ValueError as exc:
            self.bad_requests += 1
            return {
                "ok": False,
                "error": f'not JSON ({exc}): expected an object with a "cmd" string',
            }
        if not isinstance(req, dict) or not isinstance(req.get("cmd"), str):
            self.bad_requests += 1
            return {"ok": False, "error": 'expected a JSON object with a "cmd" string'}
        cmd = req["cmd"]
        if cmd in self.privileged and not self.access.allows(peer):
            self.refused += 1
            who = f"uid {peer.uid}" if peer else "an unknown peer"
            return {
                "ok": False,
                "error": f"cmd {cmd!r} changes state: allowed for {self.access.rule()}, "
                f"not for {who}",
            }
        try:
            return self._handle(req)
        except KeyError as exc:
            self.bad_requests += 1
            return {"ok": False, "error": f"{cmd}: missing field {exc}"}
        except (ValueError, TypeError) as exc:
            self.bad_requests += 1
            return {"ok": False, "error": str(exc)}

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task:
            self._conns.add(task)
        sock = writer.get_extra_info("socket")
        peer = peer_of(sock) if sock is not None else None
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
                if self._subscribe and sub is None and _is_subscribe(line):
                    if len(self._subs) >= self.max_subscribers:
                        self.refused += 1
                        await _send(
                            writer,
                            {
                                "ok": False,
                                "error": f"{self.name}: already "
                                f"{self.max_subscribers} subscribers (the limit)",
                            },
                        )
                        continue
                    sub = _Subscriber(self._queue_lines)
                    self._subs.add(sub)
                    await _send(writer, {"ok": True, "subscribed": True})
                    sub.task = asyncio.create_task(self._pump(sub, writer))
                    continue
                await _send(writer, self.reply(line, peer))
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            # close() cancels us: end normally, or Python 3.11's stream callback calls
            # task.exception() on a cancelled task and logs a traceback per client.
            pass
        finally:
            if sub is not None:
                self._subs.discard(sub)
                if sub.task:
                    sub.task.cancel()
            if task:
                self._conns.discard(task)
            writer.close()

    async def _pump(self, sub: _Subscriber, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                writer.write(await sub.queue.get())
                await writer.drain()
        except (ConnectionError, OSError):
            self._subs.discard(sub)


def _is_subscribe(line: bytes) -> bool:
    try:
        req = json.loads(line)
    except ValueError:
        return False
    return isinstance(req, dict) and req.get("cmd") == "subscribe"


async def _send(writer: asyncio.StreamWriter, obj: dict[str, Any]) -> None:
    writer.write(encode(obj))
    await writer.drain()
