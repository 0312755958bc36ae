"""``manetkit lab map``'s asyncio shell: reads the lab for :class:`~.core.MapCore` and
serves the page (aiohttp: the static page, a WebSocket that pushes the frames).

Everything it reads goes through the lab's own local sockets, one persistent
connection each: the medium's control socket (``positions``, ``links``, ``fidelity``),
each daemon's event socket (subscribed for events; ``status`` asked on the same
connection), each proxy's status socket, babeld's local socket, and for the peer
stacks a netlink socket opened once in each node's namespace (pyroute2) for its kernel
routes. The core says when to read what; a read is never repeated while it is
unanswered, and nothing is read while no page is open.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import socket
from collections.abc import Awaitable, Callable
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

from aiohttp import WSMsgType, web

from manetkit.daemonstatus import DaemonStatus, StatusError, parse_reply
from manetkit.lab.map.core import (
    MapCore,
    Push,
    ReadFidelity,
    ReadLinks,
    ReadNode,
    ReadPositions,
    ReadRoutes,
)
from manetkit.lab.map.sources import LabSource

log = logging.getLogger("manetkit.map")

STATIC = Path(__file__).parent / "static"
READ_TIMEOUT_S = 3.0
MAX_LINE = 16 * 1024 * 1024  # a daemon's status with a big route cache is one line
# A page whose socket holds this much unsent data gets no more deltas; it is sent the
# whole state once it has caught up (a slow page never makes the map buffer without end).
MAX_PAGE_BACKLOG = 2 * 1024 * 1024
RECONNECT_S = 2.0
_GONE_ERRNOS = (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR)


def _connect_unix(path: Path) -> socket.socket:
    from manetkit.lab.peers import connect_unix

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.setblocking(True)
        s.settimeout(READ_TIMEOUT_S)
        connect_unix(s, path)  # also paths over 107 bytes (/proc/PID/root/...)
        s.setblocking(False)
        return s
    except BaseException:
        s.close()
        raise


class LineClient:
    """One persistent JSON-lines connection: requests answered in order, and (after
    ``subscribe``) event lines handed to ``on_event`` as they come."""

    def __init__(
        self, path: Path, on_event: Callable[[dict[str, Any]], None] | None = None
    ) -> None:
        self.path = path
        self.on_event = on_event
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._waiting: list[asyncio.Future] = []
        self._task: asyncio.Task | None = None
        self._lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def connect(self) -> None:
        sock = _connect_unix(self.path)
        self._reader, self._writer = await asyncio.open_unix_connection(sock=sock, limit=MAX_LINE)
        self._task = asyncio.create_task(self._read_loop())
        if self.on_event is not None:
            reply = await asyncio.wait_for(self._send({"cmd": "subscribe"}), READ_TIMEOUT_S)
            if not reply.get("ok"):
                self.close()
                raise ConnectionError(f"{self.path}: subscribe refused: {reply.get('error')}")

    def _send(self, obj: dict[str, Any]) -> asyncio.Future:
        assert self._writer is not None
        fut = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        self._writer.write(json.dumps(obj).encode() + b"\n")
        return fut

    async def _read_loop(self) -> None:
        assert self._reader is not None
        err: BaseException = ConnectionError(f"{self.path} closed the connection")
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict) and "event" in obj and "ok" not in obj:
                    if self.on_event is not None:
                        self.on_event(obj)
                elif self._waiting:
                    fut = self._waiting.pop(0)
                    if not fut.done():
                        fut.set_result(obj)
        except (OSError, ValueError, asyncio.LimitOverrunError) as exc:
            err = exc
        finally:
            for fut in self._waiting:
                if not fut.done():
                    fut.set_exception(err)
            self._waiting.clear()
            self.close()

    async def request(self, obj: dict[str, Any], timeout: float = READ_TIMEOUT_S) -> dict:
        async with self._lock:
            if not self.connected:
                await self.connect()
            fut = self._send(obj)
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            self.close()  # a late reply would answer the next request
            raise

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
        self._task = None


class KernelRoutes:
    """A node's kernel routes through a netlink socket opened once in its namespace."""

    def __init__(self, netns: str) -> None:
        self.netns = netns
        self._ipr: Any = None

    async def read(self) -> list[dict[str, Any]]:
        from pyroute2 import AsyncIPRoute

        if self._ipr is None:
            self._ipr = AsyncIPRoute(netns=self.netns)
        out = []
        async for r in await self._ipr.route("dump", family=socket.AF_INET):
            route = route_dict(r)
            if route is not None:
                out.append(route)
        return out

    def close(self) -> None:
        if self._ipr is not None:
            with contextlib.suppress(Exception):
                self._ipr.close()
            self._ipr = None


_PROTOCOLS = {2: "kernel", 3: "boot", 4: "static", 16: "dhcp", 42: "babel"}
_TYPES = {1: "unicast", 7: "unreachable"}


def route_dict(msg: Any) -> dict[str, Any] | None:
    """One pyroute2 route message as ``manetkit.lab.peers.kernel_routes`` rows it
    (``{dst, via, dev, table, protocol, type}``); None for the local table."""
    table = msg.get("table") or msg.get("RTA_TABLE") or msg["table"]
    if table == 255:
        return None
    kind = _TYPES.get(msg["type"])
    if kind is None:
        return None
    dst = msg.get("dst") or msg.get("RTA_DST")
    plen = msg["dst_len"]
    text = "default" if dst is None else (dst if plen == 32 else f"{dst}/{plen}")
    return {
        "dst": text,
        "via": msg.get("gateway") or msg.get("RTA_GATEWAY"),
        "dev": msg.get("oif"),
        "table": "main" if table == 254 else str(table),
        "protocol": _PROTOCOLS.get(msg["proto"], str(msg["proto"])),
        "type": kind,
    }


def _babeld_neighbours(path: Path) -> list[dict[str, Any]]:
    from manetkit.lab.peers import babeld_neighbours, babeld_request

    dump = babeld_request(path, "dump", timeout=1.0)
    lines = "\n".join(x for x in dump.splitlines() if x.startswith("add neighbour"))
    return babeld_neighbours(lines)


class MapServer:
    """Reads one lab for a :class:`MapCore` and pushes its frames to the pages."""

    def __init__(
        self,
        source: LabSource,
        core: MapCore,
        on_gone: Callable[[str], None] | None = None,
    ) -> None:
        self.source = source
        self.core = core
        self.on_gone = on_gone
        self.medium = LineClient(source.medium_socket)
        self.daemons: dict[str, LineClient] = {}
        self.kernel: dict[str, KernelRoutes] = {}
        self.pages: dict[web.WebSocketResponse, dict[str, Any]] = {}
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self._retry_at: dict[str, float] = {}
        self._errors: dict[str, str] = {}
        self.loop: asyncio.AbstractEventLoop | None = None

    # --- the web side ------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self._index)
        app.router.add_get("/ws", self._ws)
        app.router.add_get("/api/state", self._state)
        app.router.add_static("/static/", STATIC, show_index=False)
        return app

    async def _index(self, request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    async def _state(self, request: web.Request) -> web.Response:
        return web.json_response(self.core.snapshot(self._now()))

    def _now(self) -> float:
        assert self.loop is not None
        return self.loop.time()

    async def _ws(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=20)
        await ws.prepare(request)
        self.pages[ws] = {"transport": request.transport, "stale": False}
        self.core.pages_changed(self._now(), len(self.pages))
        self._wake.set()
        try:
            await ws.send_str(json.dumps(self.core.snapshot(self._now())))
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                reply = self._page_request(msg.data)
                if reply is not None:
                    await ws.send_str(json.dumps(reply))
        finally:
            self.pages.pop(ws, None)
            self.core.pages_changed(self._now(), len(self.pages))
        return ws

    def _page_request(self, data: str) -> dict[str, Any] | None:
        """A page's request: ``{"cmd": "detail", "node"}`` or ``{"cmd": "watch"|"unwatch",
        "src", "dst"}``; errors go back to that page as ``{"type": "error"}``."""
        try:
            req = json.loads(data)
            cmd = req.get("cmd") if isinstance(req, dict) else None
            if cmd == "detail":
                return self.core.detail(str(req.get("node")))
            if cmd in ("watch", "unwatch"):
                self.core.watch(
                    self._now(), str(req.get("src")), str(req.get("dst")), cmd == "watch"
                )
                return None
            raise ValueError(f"unknown cmd {cmd!r} (detail, watch, unwatch)")
        except ValueError as exc:
            return {"type": "error", "error": str(exc)}

    async def _broadcast(self, message: dict[str, Any]) -> None:
        text = json.dumps(message, separators=(",", ":"))
        for ws, page in list(self.pages.items()):
            transport = page["transport"]
            backlog = transport.get_write_buffer_size() if transport is not None else 0
            if backlog > MAX_PAGE_BACKLOG:
                page["stale"] = True
                continue
            with contextlib.suppress(ConnectionError, RuntimeError):
                if page["stale"] and message.get("type") == "frame":
                    page["stale"] = False
                    await ws.send_str(json.dumps(self.core.snapshot(self._now())))
                else:
                    await ws.send_str(text)

    # --- reading the lab ----------------------------------------------------------------

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _done(self) -> None:
        self._wake.set()

    async def _read_medium(self, what: str, req: dict[str, Any], deliver) -> None:
        try:
            reply = await self.medium.request(req)
            if not reply.get("ok"):
                raise ValueError(f"medium refused {req['cmd']}: {reply.get('error')}")
            deliver(self._now(), reply)
        except (OSError, ConnectionError, TimeoutError, ValueError) as exc:
            gone = (
                isinstance(exc, OSError)
                and exc.errno in _GONE_ERRNOS
                or not self.source.still_there()
            )
            reason = (
                f"the medium's control socket {self.source.medium_socket} is gone"
                if gone
                else f"medium {what}: {exc or type(exc).__name__}"
            )
            self.core.medium_failed(self._now(), reason, gone=gone)
        finally:
            self._done()

    def _on_event(self, node: str) -> Callable[[dict[str, Any]], None]:
        def handle(obj: dict[str, Any]) -> None:
            self.core.event_received(self._now(), node, obj)

        return handle

    async def _daemon_status(self, node: str) -> tuple[DaemonStatus | None, str | None]:
        path = self.source.daemon_sockets.get(node)
        if path is None or self.core.lab.stack not in ("aodv", "dsr", "smr"):
            return None, None
        client = self.daemons.get(node)
        if client is None or not client.connected:
            if self._now() < self._retry_at.get(node, 0.0):
                return None, self._errors.get(node, "not answering")
            client = self.daemons[node] = LineClient(path, self._on_event(node))
            try:
                await client.connect()
            except (OSError, ConnectionError, TimeoutError) as exc:
                client.close()
                self._retry_at[node] = self._now() + RECONNECT_S
                self._errors[node] = f"no daemon answers on {path}: {exc}"
                return None, self._errors[node]
        try:
            reply = await client.request({"cmd": "status"})
        except (OSError, ConnectionError, TimeoutError) as exc:
            return None, f"daemon status: {exc or type(exc).__name__}"
        try:
            return parse_reply(reply, path), None
        except StatusError as exc:
            return None, str(exc)

    async def _proxy_status(self, node: str) -> dict | None:
        path = self.source.proxy_sockets.get(node)
        if path is None or self.core.lab.proxy == "none" or not path.exists():
            return None
        client = LineClient(path)
        try:
            reply = await client.request({"cmd": "status"})
        except (OSError, ConnectionError, TimeoutError):
            return None
        finally:
            client.close()
        return reply.get("status") if reply.get("ok") else None

    async def _read_node(self, node: str) -> None:
        try:
            daemon, err = await self._daemon_status(node)
            proxy = await self._proxy_status(node)
            self.core.node_read(self._now(), node, daemon, proxy, daemon_error=err)
        except Exception as exc:  # a read must never end the map
            log.warning("reading %s: %s", node, exc)
            self.core.node_failed(self._now(), "node", node, str(exc))
        finally:
            self._done()

    async def _read_routes(self, node: str) -> None:
        try:
            kr = self.kernel.get(node)
            if kr is None:
                kr = self.kernel[node] = KernelRoutes(self.source.netns[node])
            routes = await asyncio.wait_for(kr.read(), READ_TIMEOUT_S)
            neighbours = None
            bsock = self.source.babeld_sockets.get(node)
            if bsock is not None:
                with contextlib.suppress(OSError):
                    neighbours = await asyncio.to_thread(_babeld_neighbours, bsock)
            self.core.routes_read(self._now(), node, routes, neighbours)
        except Exception as exc:  # a namespace that went away, a netlink error
            kr = self.kernel.pop(node, None)
            if kr is not None:
                kr.close()
            self.core.node_failed(self._now(), "routes", node, f"kernel routes: {exc}")
        finally:
            self._done()

    def _drain(self) -> None:
        core = self.core
        while (ev := core.next_event()) is not None:
            if isinstance(ev, Push):
                if ev.message.get("type") == "gone" and self.on_gone is not None:
                    self.on_gone(ev.message["reason"])
                self._spawn(self._broadcast(ev.message))
            elif isinstance(ev, ReadPositions):
                self._spawn(
                    self._read_medium("positions", {"cmd": "positions"}, core.positions_read)
                )
            elif isinstance(ev, ReadLinks):
                req = {"cmd": "links", "cs": True} if ev.cs else {"cmd": "links"}
                self._spawn(self._read_medium("links", req, core.links_read))
            elif isinstance(ev, ReadFidelity):
                fid: dict[str, Any] = {"cmd": "fidelity"}
                if ev.since is not None:
                    fid["since"] = ev.since
                self._spawn(self._read_medium("fidelity", fid, core.fidelity_read))
            elif isinstance(ev, ReadNode):
                self._spawn(self._read_node(ev.node))
            elif isinstance(ev, ReadRoutes):
                self._spawn(self._read_routes(ev.node))

    async def drive(self, stop: asyncio.Event) -> None:
        """Run the core's timer and hand its outputs to their readers until ``stop``."""
        self.loop = asyncio.get_running_loop()
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                now = self._now()
                self.core.handle_timer(now)
                self._drain()
                at = self.core.get_timer()
                timeout = None if at is None else max(0.0, at - self._now())
                self._wake.clear()
                waker = asyncio.ensure_future(self._wake.wait())
                await asyncio.wait(
                    {waker, stopping}, timeout=timeout, return_when="FIRST_COMPLETED"
                )
                waker.cancel()
        finally:
            stopping.cancel()
            self.close()

    def close(self) -> None:
        self.medium.close()
        for c in self.daemons.values():
            c.close()
        for k in self.kernel.values():
            k.close()
        for t in list(self._tasks):
            t.cancel()


async def serve(
    server: MapServer,
    bind: str,
    port: int,
    stop: asyncio.Event,
    started: Callable[[str], None] | None = None,
) -> None:
    """Serve the page on ``bind:port`` and read the lab until ``stop`` is set.

    ``OSError`` (EADDRINUSE...) when the address cannot be bound."""
    server.loop = asyncio.get_running_loop()
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, bind, port, reuse_address=True)
        await site.start()
        if started is not None:
            host = f"[{bind}]" if ":" in bind else bind
            started(f"http://{host}:{port}/")
        await server.drive(stop)
    finally:
        for ws in list(server.pages):
            with contextlib.suppress(Exception):
                await ws.close()
        await runner.cleanup()


def is_loopback(bind: str) -> bool:
    try:
        return IPv4Address(bind).is_loopback
    except ValueError:
        return bind in ("localhost", "::1")
