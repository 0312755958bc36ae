"""The proxy's asyncio shell: sockets, clocks and events around the sans-I/O sessions.

One :class:`Relay` per application connection. On the client's laptop (initiator) it
owns the intercepted app socket and opens mesh legs to the peer proxy; on the server's
laptop (acceptor) it owns the connection to the real server and adopts mesh legs as they
arrive. Bytes flow through :class:`manetkit.proxy.session.Session`; this module only
moves them, applies back-pressure (pause reading one side while the other cannot take
more) and turns the session's events into socket actions.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import resource
import socket
import struct
import time
from ipaddress import IPv4Address
from typing import Any

from manetkit.proxy import frames as fr
from manetkit.proxy import intercept, modes
from manetkit.proxy.config import ProxyConfig
from manetkit.proxy.session import (
    AppEof,
    Closed,
    DeliverData,
    Frozen,
    Resumed,
    Role,
    Session,
    SessionConfig,
    StaleTransport,
    State,
)

log = logging.getLogger("manetkit.proxy")

HIGH_WATER = 1 << 20  # bytes queued on a socket before the other side pauses
RECONNECT_MIN, RECONNECT_MAX = 0.2, 2.0
TOMBSTONE_S = 120.0  # how long a cleanly closed session's final offsets are remembered


_LINGER_RST = struct.pack("ii", 1, 0)
_LINGER_OFF = struct.pack("ii", 0, 0)


def _arm_rst_on_close(sock: socket.socket) -> None:
    """App sockets close with RST unless the session ended cleanly: even when the proxy
    is killed (SIGKILL), the kernel then resets the app instead of sending a FIN that
    would read as a complete stream."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)


def _graceful_close(transport: asyncio.Transport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.fileno() >= 0:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_OFF)
    transport.close()


def _reset_socket(transport: asyncio.Transport | None) -> None:
    """Close with RST (SO_LINGER 0): the app sees 'connection reset', never a clean EOF."""
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.fileno() >= 0:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class _Side(asyncio.Protocol):
    """Protocol glue: forwards callbacks to the relay, tagged with which side it is."""

    def __init__(self, relay: Relay, kind: str, on_made: Any = None) -> None:
        self.relay = relay
        self.kind = kind  # "app" or "mesh"
        self.transport: asyncio.Transport | None = None
        self.lost = False
        # runs inside connection_made: an event loop may deliver data in the same
        # iteration, so the relay must know this side before the first data_received
        self.on_made = on_made

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        transport.set_write_buffer_limits(high=HIGH_WATER)  # type: ignore[attr-defined]
        if self.on_made is not None:
            self.on_made(self)

    def data_received(self, data: bytes) -> None:
        self.relay.on_data(self, data)

    def eof_received(self) -> bool:
        return self.relay.on_eof(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.relay.on_lost(self, exc)

    def pause_writing(self) -> None:
        self.relay.on_pause(self, True)

    def resume_writing(self) -> None:
        self.relay.on_pause(self, False)


FROZEN_STATES = (State.FROZEN, State.PROBING)
# the event fields worth a log line (the rest, e.g. paths, is in the daemon's stream)
_EVENT_KEYS = ("dst", "src", "sport", "dport", "seq", "last_ack", "pivot", "reason", "hops")


class Relay:
    """One application connection and its session across mesh legs."""

    def __init__(self, proxy: Proxy, session: Session, peer: IPv4Address) -> None:
        self.proxy = proxy
        self.session = session
        self.peer = peer
        self.loop = proxy.loop
        self.app: _Side | None = None
        self.mesh: _Side | None = None
        self.app_pending: list[bytes] = []  # acceptor: bytes for a server not yet connected
        self.app_eof_pending = False
        self.app_read_paused = False
        self.mesh_read_paused = False
        self.app_write_blocked = False
        self.mesh_write_blocked = False
        self.timer: asyncio.TimerHandle | None = None
        self.probe_timer: asyncio.TimerHandle | None = None
        self.connecting = False
        self.reconnect_delay = RECONNECT_MIN
        self.bytes_from_app = 0
        self.bytes_to_app = 0
        self.started = time.time()
        self.closed = False
        self.last_tcp_info: modes.TcpInfo | None = None
        self.frozen_by: str | None = None  # the event that froze the session last

    # --- identification -------------------------------------------------------------

    @property
    def mode(self) -> str:
        return self.session.mode

    def mesh_sock(self) -> socket.socket | None:
        if self.mesh is None or self.mesh.transport is None or self.mesh.lost:
            return None
        return self.mesh.transport.get_extra_info("socket")

    def leg_ports(self) -> tuple[tuple[str, int], int] | None:
        sock = self.mesh_sock()
        if sock is None:
            return None
        try:
            local = sock.getsockname()
            remote = sock.getpeername()
        except OSError:
            return None
        return (local[0], local[1]), remote[1]

    def tcp_info(self) -> modes.TcpInfo | None:
        sock = self.mesh_sock()
        info = modes.tcp_info(sock) if sock is not None else None
        if info is not None:
            self.last_tcp_info = info
        return info

    def status(self) -> dict[str, Any]:
        s = self.session
        info = self.tcp_info() or self.last_tcp_info
        return {
            "session": s.sid_hex,
            "role": s.role.value,
            "peer": str(self.peer),
            "dst": f"{s.dst[0]}:{s.dst[1]}" if s.dst else None,
            "mode": s.mode,
            "state": s.state.value,
            "epoch": s.epoch,
            "bytes_from_app": self.bytes_from_app,
            "bytes_to_app": self.bytes_to_app,
            "replay_bytes": s.replay_bytes,
            "resumes": s.resumes,
            "probes": s.probes,
            "frozen_by": self.frozen_by,
            "age_s": round(time.time() - self.started, 1),
            "tcp_info": info.as_dict() if info else None,
        }

    # --- socket callbacks ---------------------------------------------------------------

    def on_data(self, side: _Side, data: bytes) -> None:
        now = self.loop.time()
        if side is self.app:
            self.bytes_from_app += len(data)
            if self.session.state is State.CLOSED:
                return
            self.session.app_data(data, now)
        elif side is self.mesh:
            try:
                self.session.transport_data(data, now)
            except StaleTransport:
                return
        else:
            return  # a replaced leg's last bytes: meaningless now
        self.flush()

    def on_eof(self, side: _Side) -> bool:
        if side is self.app:
            if self.session.state is not State.CLOSED:
                self.session.app_eof(self.loop.time())
                self.flush()
            return True  # keep our sending half open: the peer may still answer
        if side is self.mesh and not self.closed:
            self.mesh = None
            self.session.transport_eof(self.loop.time())
            if self.session.state is not State.CLOSED and self.session.role is Role.INITIATOR:
                self.schedule_reconnect()
            self.flush()
        return False  # close our end too

    def on_lost(self, side: _Side, exc: Exception | None) -> None:
        now = self.loop.time()
        if side is self.app:
            if self.closed:
                return
            why = f"application connection lost ({exc or 'closed'})"
            log.info("session %s: %s", self.session.sid_hex[:8], why)
            self.session.reset(why, now)
            self.flush()
        elif side is self.mesh:
            self.mesh = None
            if self.closed:
                return
            self.session.transport_lost(now)
            log.info(
                "session %s: mesh leg to %s lost (%s)", self.session.sid_hex[:8], self.peer, exc
            )
            if self.session.role is Role.INITIATOR:
                self.schedule_reconnect()
            self.flush()

    def on_pause(self, side: _Side, paused: bool) -> None:
        if side is self.app:
            self.app_write_blocked = paused
        elif side is self.mesh:
            self.mesh_write_blocked = paused
        self.update_flow()

    # --- flow control --------------------------------------------------------------------

    def update_flow(self) -> None:
        """Read the app only while the session and the mesh leg take more; read the mesh
        only while the app takes more (both sides' kernels then push back on the peers)."""
        want_app = (
            self.session.can_accept_app_data()
            and not self.mesh_write_blocked
            and self.session.state is not State.CLOSED
        )
        if self.app is not None and self.app.transport is not None and not self.app.lost:
            if want_app and self.app_read_paused:
                self.app.transport.resume_reading()
                self.app_read_paused = False
            elif not want_app and not self.app_read_paused:
                self.app.transport.pause_reading()
                self.app_read_paused = True
        want_mesh = not self.app_write_blocked and not self.app_pending
        if self.mesh is not None and self.mesh.transport is not None and not self.mesh.lost:
            if want_mesh and self.mesh_read_paused:
                self.mesh.transport.resume_reading()
                self.mesh_read_paused = False
            elif not want_mesh and not self.mesh_read_paused:
                self.mesh.transport.pause_reading()
                self.mesh_read_paused = True

    # --- the engine's outputs -------------------------------------------------------------

    def flush(self) -> None:
        """Send what the session produced, act on its events, re-arm its timer."""
        s = self.session
        out = s.data_to_send()
        if out and self.mesh is not None and self.mesh.transport is not None:
            self.mesh.transport.write(out)
        while (ev := s.next_event()) is not None:
            if isinstance(ev, DeliverData):
                self.deliver(ev.data)
            elif isinstance(ev, AppEof):
                self.deliver_eof()
            elif isinstance(ev, Frozen):
                log.info("session %s frozen: %s", s.sid_hex[:8], ev.why)
            elif isinstance(ev, Resumed):
                log.info("session %s resumed (%s)", s.sid_hex[:8], ev.how)
                self.cancel_probe()
            elif isinstance(ev, Closed):
                self.finish(ev)
                return
        self.update_flow()
        self.arm_timer()

    def deliver(self, data: bytes) -> None:
        self.bytes_to_app += len(data)
        if self.app is None or self.app.transport is None:
            self.app_pending.append(data)
            return
        self.app.transport.write(data)

    def deliver_eof(self) -> None:
        if self.app is None or self.app.transport is None:
            self.app_eof_pending = True
            return
        if self.app.transport.can_write_eof() and not self.app.transport.is_closing():
            self.app.transport.write_eof()

    def app_connected(self, side: _Side) -> None:
        """Acceptor: the server connection is up: hand it what arrived meanwhile."""
        self.app = side
        assert side.transport is not None
        for chunk in self.app_pending:
            side.transport.write(chunk)
        self.app_pending.clear()
        if self.app_eof_pending:
            self.deliver_eof()
        self.update_flow()

    def finish(self, ev: Closed) -> None:
        """CLOSED: a clean end closes both sockets; anything else resets the app."""
        self.closed = True
        self.cancel_probe()
        if self.timer is not None:
            self.timer.cancel()
        mesh = self.mesh.transport if self.mesh else None
        app = self.app.transport if self.app else None
        self.proxy.counters["done" if ev.clean else "resets"] += 1
        if ev.clean:
            log.info("session %s done", self.session.sid_hex[:8])
            if app is not None:
                _graceful_close(app)
        else:
            log.warning(
                "session %s to %s (%s) reset: %s",
                self.session.sid_hex[:8],
                self.peer,
                self.session.mode,
                ev.reason,
            )
            _reset_socket(app)
        if mesh is not None:
            if ev.clean and self.session.role is Role.ACCEPTOR and mesh.can_write_eof():
                # the initiator closes first: closing here with its last keepalive still
                # unread would send RST and could destroy our final ACK in flight
                mesh.write_eof()
                self.loop.call_later(5.0, mesh.close)
            else:
                mesh.close()  # the RESET frame (if any) goes out first
        if ev.clean and self.session.role is Role.ACCEPTOR:
            self.proxy.remember_done(self.session)
        self.proxy.forget(self)

    def arm_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        when = self.session.get_timer()
        if when is not None:
            self.timer = self.loop.call_at(max(when, self.loop.time()), self.on_timer)

    def on_timer(self) -> None:
        self.timer = None
        self.session.handle_timer(self.loop.time())
        self.flush()

    # --- mesh legs (initiator) -------------------------------------------------------------

    def schedule_reconnect(self, delay: float | None = None) -> None:
        if self.connecting or self.closed:
            return
        d = self.reconnect_delay if delay is None else delay
        self.reconnect_delay = min(RECONNECT_MAX, self.reconnect_delay * 2)
        self.loop.call_later(d, lambda: self.loop.create_task(self.connect_leg()))

    def replace_leg(self, why: str) -> None:
        """Drop a backed-off kernel connection and RESUME on a fresh one (ELFN, BuS)."""
        if self.session.role is not Role.INITIATOR or self.connecting or self.closed:
            return
        log.info("session %s: replacing mesh leg (%s)", self.session.sid_hex[:8], why)
        old = self.mesh
        self.mesh = None
        if old is not None and old.transport is not None:
            _reset_socket(old.transport)
        self.session.transport_lost(self.loop.time())
        self.loop.create_task(self.connect_leg())

    async def connect_leg(self) -> None:
        if self.connecting or self.closed or self.mesh is not None:
            return
        self.connecting = True
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            intercept.mark(sock, self.proxy.cfg.own_mark)
            modes.apply_leg_options(sock, self.mode, self.proxy.cfg)
            timeout = max(1.0, modes.probe_interval(self.proxy.cfg, self.last_tcp_info))
            await asyncio.wait_for(
                self.loop.sock_connect(sock, (str(self.peer), self.proxy.cfg.peer_port)), timeout
            )
        except (TimeoutError, OSError) as exc:
            sock.close()
            self.connecting = False
            log.debug("session %s: leg connect failed: %r", self.session.sid_hex[:8], exc)
            self.schedule_reconnect()
            return
        finally:
            self.connecting = False
        if self.closed:
            sock.close()
            return
        side = _Side(self, "mesh", on_made=self._leg_made)
        await self.loop.connect_accepted_socket(lambda: side, sock)

    def _leg_made(self, side: _Side) -> None:
        self.mesh = side
        self.mesh_read_paused = False
        self.mesh_write_blocked = False
        self.reconnect_delay = RECONNECT_MIN
        self.session.new_transport(self.loop.time())
        self.flush()

    # --- ELFN / BuS -------------------------------------------------------------------------

    def on_route_event(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        now = self.loop.time()
        s = self.session
        if s.state is State.CLOSED or s.mode in ("plain", "fixed-rto"):
            return
        log.info("session %s (%s): %s %s", s.sid_hex[:8], s.state.value, kind,
                 {k: v for k, v in ev.items() if k in _EVENT_KEYS})  # fmt: skip
        if kind in ("route-down", "erdn"):
            if kind == "erdn" and s.mode != "bus":
                return
            if s.state is State.FLOWING:
                s.freeze(f"{kind} from {ev.get('pivot') or ev.get('src') or 'daemon'}", now)
                self.frozen_by = kind
                # bus: a pivot is repairing (its ERSN is due); otherwise probe (ELFN)
                self.schedule_probe(self.proxy.cfg.bus_wait if kind == "erdn" else None)
            elif kind == "erdn" and self.frozen_by != "erdn" and s.state in FROZEN_STATES:
                # DSR carries the ELFN route-down and the ERDN in one Route Error: the
                # route-down froze the session, the ERDN says to wait for the ERSN
                self.frozen_by = kind
                self.schedule_probe(self.proxy.cfg.bus_wait)
        elif kind in ("route-up", "ersn"):
            if s.state in (State.FROZEN, State.PROBING):
                backed = modes.backed_off(self.tcp_info())
                s.thaw(kind, now)
                if backed:
                    self.replace_leg(f"{kind}: kernel connection backed off")
            elif s.state is State.RESUMING and self.mesh is None and s.role is Role.INITIATOR:
                self.schedule_reconnect(0)
        self.flush()

    def schedule_probe(self, delay: float | None = None) -> None:
        self.cancel_probe()
        d = delay if delay is not None else modes.probe_interval(self.proxy.cfg, self.tcp_info())
        self.probe_timer = self.loop.call_later(d, self.on_probe_timer)

    def cancel_probe(self) -> None:
        if self.probe_timer is not None:
            self.probe_timer.cancel()
            self.probe_timer = None

    def on_probe_timer(self) -> None:
        self.probe_timer = None
        s = self.session
        if s.state not in (State.FROZEN, State.PROBING):
            return
        # A probe tests, and so re-finds, the route (Holland & Vaidya section 6): ask the
        # daemon for a route request now, not at the end of its discovery back-off.
        self.proxy.ask_discover(self.peer)
        if modes.backed_off(self.tcp_info()) and s.role is Role.INITIATOR:
            # a probe would sit behind the kernel's backed-off retransmission: a fresh
            # connection's SYN is the probe, and its RESUME answers it
            self.replace_leg("probe: kernel connection backed off")
        elif self.mesh is not None:
            s.probe(self.loop.time())
            self.flush()
        if s.state in (State.FROZEN, State.PROBING):
            self.schedule_probe()


class Proxy:
    """Listeners, the session table, interception and the daemon/status sockets."""

    def __init__(self, cfg: ProxyConfig) -> None:
        self.cfg = cfg
        self.loop = asyncio.get_running_loop()
        self.relays: set[Relay] = set()
        self.by_sid: dict[bytes, Relay] = {}
        self.tombstones: dict[bytes, tuple[float, int]] = {}
        self.spec = intercept.InterceptSpec(
            table=cfg.nft_table,
            port=cfg.listen_port,
            own_mark=cfg.own_mark,
            transparent_mark=cfg.transparent_mark,
            route_table=cfg.route_table,
            rule_priority=cfg.rule_priority,
            prefixes=((cfg.mesh_prefix, cfg.mode != "plain"),)
            + tuple((pm.prefix, pm.mode != "plain") for pm in cfg.modes),
            client_interfaces=cfg.client_interfaces,
        )
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        self.max_sessions = cfg.max_sessions or max(16, (soft - 64) // 3)
        self.slot_free = asyncio.Event()
        self.tasks: list[asyncio.Task[Any]] = []
        self.listeners: list[socket.socket] = []
        self.status_server: Any = None
        self.counters = {
            "accepted": 0,
            "refused_limit": 0,
            "emfile_backoffs": 0,
            "resets": 0,
            "done": 0,
            "unknown_session": 0,
            "stale_transports": 0,
            "bad_hellos": 0,
            "route_events": 0,
            "discover_requests": 0,
        }
        self.daemon_connected = False
        self._daemon_writer: asyncio.StreamWriter | None = None
        self.started = time.time()

    def session_config(self) -> SessionConfig:
        return SessionConfig(
            replay_limit=self.cfg.replay_buffer,
            keepalive=self.cfg.keepalive,
            partition_timeout=self.cfg.partition_timeout,
        )

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        from manetkit.daemon.events import EventServer

        self.status_server = EventServer(self.cfg.status_socket, self.status)
        await self.status_server.start()
        # pyroute2's synchronous API runs its own event loop: keep it off ours
        stale = await asyncio.to_thread(intercept.install, self.spec)
        if stale:
            log.warning("a stale nft table from a previous run was replaced")
        app_l = self._listener(IPv4Address("0.0.0.0"), self.cfg.listen_port)
        mesh_l = self._listener(self.cfg.listen_address, self.cfg.peer_port)
        self.tasks.append(self.loop.create_task(self._accept_loop(app_l, self._on_app)))
        self.tasks.append(self.loop.create_task(self._accept_loop(mesh_l, self._on_leg)))
        if self.cfg.daemon_socket is not None:
            self.tasks.append(self.loop.create_task(self._daemon_events()))
        log.info(
            "proxy up: intercepting %s -> :%d, peers on :%d, max %d sessions",
            self.cfg.mesh_prefix,
            self.cfg.listen_port,
            self.cfg.peer_port,
            self.max_sessions,
        )

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        for t in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for s in self.listeners:
            s.close()
        for r in list(self.relays):
            r.session.reset("proxy shutting down", self.loop.time())
            r.flush()
        await asyncio.to_thread(intercept.remove, self.spec)
        if self.status_server is not None:
            await self.status_server.close()

    def _listener(self, addr: IPv4Address, port: int) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        intercept.mark(s, self.cfg.own_mark)
        s.bind((str(addr), port))
        s.listen(1024)
        s.setblocking(False)
        self.listeners.append(s)
        return s

    async def _accept_loop(self, lsock: socket.socket, handler: Any) -> None:
        backoff = 0.05
        while True:
            while len(self.relays) >= self.max_sessions:
                # at the limit: leave connections in the kernel's backlog, do not spin
                self.slot_free.clear()
                await self.slot_free.wait()
            try:
                conn, addr = await self.loop.sock_accept(lsock)
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self.counters["emfile_backoffs"] += 1
                    log.warning("accept: %s; backing off %.2fs", exc.strerror, backoff)
                    await asyncio.sleep(backoff)
                    backoff = min(1.0, backoff * 2)
                    continue
                raise
            backoff = 0.05
            self.counters["accepted"] += 1
            try:
                await handler(conn, addr)
            except Exception:
                log.exception("handling a connection from %s", addr)
                conn.close()

    def remember_done(self, session: Session) -> None:
        """Keep a cleanly finished session's final offsets for a while: an initiator
        that lost our final ACK with its transport can still learn that all is done."""
        now = self.loop.time()
        self.tombstones[session.sid] = (now, session.delivered)
        for sid, (t, _) in list(self.tombstones.items()):
            if now - t > TOMBSTONE_S:
                del self.tombstones[sid]

    def forget(self, relay: Relay) -> None:
        self.relays.discard(relay)
        if self.by_sid.get(relay.session.sid) is relay:
            del self.by_sid[relay.session.sid]
        self.slot_free.set()

    # --- the client's side -------------------------------------------------------------------

    async def _on_app(self, conn: socket.socket, addr: tuple[str, int]) -> None:
        dst, port = intercept.original_dst(conn)
        mode = self.cfg.mode_for(dst)
        conn.setsockopt(socket.IPPROTO_TCP, modes.TCP_LINGER2, modes.FIN_WAIT2_S)
        _arm_rst_on_close(conn)
        session = Session.initiate(self.loop.time(), (dst, port), mode, self.session_config())
        relay = Relay(self, session, dst)
        self.relays.add(relay)
        side = _Side(relay, "app", on_made=lambda sd: setattr(relay, "app", sd))
        await self.loop.connect_accepted_socket(lambda: side, conn)
        log.info(
            "session %s: %s:%d -> %s:%d (%s)",
            session.sid_hex[:8],
            addr[0],
            addr[1],
            dst,
            port,
            mode,
        )
        relay.arm_timer()
        self.loop.create_task(relay.connect_leg())

    # --- the server's side -------------------------------------------------------------------

    async def _on_leg(self, conn: socket.socket, addr: tuple[str, int]) -> None:
        conn.setblocking(False)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.setsockopt(socket.IPPROTO_TCP, modes.TCP_LINGER2, modes.FIN_WAIT2_S)
        conn.setsockopt(
            socket.IPPROTO_TCP, modes.TCP_USER_TIMEOUT, int(self.cfg.partition_timeout * 1000)
        )
        reader = fr.FrameReader()
        deadline = self.loop.time() + 10
        hello = None
        while hello is None:
            try:
                chunk = await asyncio.wait_for(
                    self.loop.sock_recv(conn, 4096), deadline - self.loop.time()
                )
            except (TimeoutError, OSError):
                conn.close()
                return
            if not chunk:
                conn.close()
                return
            reader.feed(chunk)
            try:
                hello = reader.peek()
            except fr.MalformedFrame:
                self.counters["bad_hellos"] += 1
                conn.close()
                return
        buffered = reader.pending()
        if not isinstance(hello, fr.Open | fr.Resume):
            self.counters["bad_hellos"] += 1
            conn.close()
            return
        relay = self.by_sid.get(hello.sid)
        if relay is None:
            if isinstance(hello, fr.Resume) and hello.sid in self.tombstones:
                # finished here: tell the initiator everything was delivered, FIN included
                _, delivered = self.tombstones[hello.sid]
                with contextlib.suppress(OSError):
                    conn.send(fr.pack_resume(hello.sid, hello.epoch, delivered, True))
                conn.close()
                return
            if isinstance(hello, fr.Resume):
                self.counters["unknown_session"] += 1
                with contextlib.suppress(OSError):
                    conn.send(fr.pack_reset("unknown session"))
                conn.close()
                return
            session = Session(Role.ACCEPTOR, hello.sid, self.loop.time(), self.session_config())
            session.mode = hello.mode
            session.dst = (hello.addr, hello.port)
            relay = Relay(self, session, IPv4Address(addr[0]))
            self.relays.add(relay)
            self.by_sid[hello.sid] = relay
            relay.arm_timer()
            self.loop.create_task(self._connect_server(relay, IPv4Address(addr[0])))
        elif not relay.session.accepts_hello(hello):
            self.counters["stale_transports"] += 1
            conn.close()
            return
        # adopt the leg: the previous one (if any) is dead or stale
        old = relay.mesh
        relay.mesh = None
        if old is not None and old.transport is not None:
            _reset_socket(old.transport)

        def adopt(side: _Side) -> None:
            assert side.transport is not None
            if relay.closed:  # e.g. the server refused while this leg was being adopted
                side.transport.write(fr.pack_reset("session closed"))
                side.transport.close()
                return
            relay.mesh = side
            relay.mesh_read_paused = False
            relay.mesh_write_blocked = False
            relay.peer = IPv4Address(addr[0])
            relay.session.new_transport(self.loop.time())
            relay.on_data(side, buffered)

        await self.loop.connect_accepted_socket(lambda: _Side(relay, "mesh", on_made=adopt), conn)

    async def _connect_server(self, relay: Relay, client: IPv4Address) -> None:
        s = relay.session
        assert s.dst is not None
        addr, port = s.dst
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, modes.TCP_LINGER2, modes.FIN_WAIT2_S)
            if self.cfg.transparent_source:
                intercept.make_transparent(sock)
                intercept.mark(sock, self.cfg.transparent_mark)
                sock.bind((str(client), 0))
            else:
                intercept.mark(sock, self.cfg.own_mark)
            await asyncio.wait_for(self.loop.sock_connect(sock, (str(addr), port)), 10)
            _arm_rst_on_close(sock)
        except (TimeoutError, OSError) as exc:
            sock.close()
            why = f"server {addr}:{port} unreachable: {exc!r}"
            s.reset(why, self.loop.time())
            relay.flush()
            return
        if relay.closed:
            sock.close()
            return
        await self.loop.connect_accepted_socket(
            lambda: _Side(relay, "app", on_made=relay.app_connected), sock
        )

    # --- daemon events -------------------------------------------------------------------------

    async def _daemon_events(self) -> None:
        """Subscribe to the routing daemon's events; reconnect while it is away."""
        path = str(self.cfg.daemon_socket)
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(path, limit=1 << 20)
            except OSError:
                self.daemon_connected = False
                await asyncio.sleep(1.0)
                continue
            try:
                writer.write(b'{"cmd":"subscribe"}\n')
                await writer.drain()
                self.daemon_connected = True
                self._daemon_writer = writer
                log.info("subscribed to daemon events on %s", path)
                while line := await reader.readline():
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(ev, dict) and "event" in ev:
                        self.route_event(ev)
            except OSError:
                pass
            finally:
                self.daemon_connected = False
                self._daemon_writer = None
                writer.close()
            await asyncio.sleep(1.0)

    def ask_discover(self, dst: IPv4Address) -> None:
        """Send ``{"cmd":"discover"}`` for ``dst`` on the subscribed daemon connection.

        Fire and forget: the reply line has no "event" and is skipped by the reader."""
        w = self._daemon_writer
        if w is None or w.is_closing():
            return
        self.counters["discover_requests"] += 1
        w.write(json.dumps({"cmd": "discover", "dst": str(dst)}).encode() + b"\n")

    def route_event(self, ev: dict[str, Any]) -> None:
        self.counters["route_events"] += 1
        for relay in list(self.relays):
            ports = relay.leg_ports()
            if ports is not None:
                local, remote_port = ports
                if not modes.flow_matches(ev, str(relay.peer), local, remote_port):
                    continue
            elif str(relay.peer) not in (ev.get("dst"), ev.get("src")):
                continue
            relay.on_route_event(ev)

    # --- status --------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return {
            "kind": "proxy",
            "uptime_s": round(time.time() - self.started, 1),
            "mesh_prefix": str(self.cfg.mesh_prefix),
            "mode": self.cfg.mode,
            "nft_table": f"inet {self.cfg.nft_table}",
            "daemon_connected": self.daemon_connected,
            "max_sessions": self.max_sessions,
            "counters": dict(self.counters),
            "sessions": [r.status() for r in self.relays],
        }


async def run(cfg: ProxyConfig, stop: asyncio.Event | None = None) -> None:
    """Run until ``stop`` is set (or SIGINT/SIGTERM through the CLI)."""
    proxy = Proxy(cfg)
    try:
        await proxy.start()
        await (stop or asyncio.Event()).wait()
    finally:
        await proxy.stop()
