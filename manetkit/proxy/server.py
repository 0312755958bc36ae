"""The proxy process: listeners, the session table, interception, the status socket.

Client side: the nft redirect (:mod:`manetkit.proxy.intercept`) hands every intercepted
app connection to the app listener, which starts an initiator :class:`Relay`. Server
side: the mesh-leg listener reads each leg's hello (OPEN or RESUME) and either starts an
acceptor relay (after :mod:`manetkit.proxy.guard`'s checks) or hands the leg to the
session it resumes. Route events come from :class:`DaemonClient` and go to the relays
whose flow they concern.

Bounds (each with a counter in status):

* sessions: at ``max_sessions`` the app listener leaves new connections in the kernel's
  backlog (``at_limit_waits``) and an OPEN for a new session is answered with RESET
  (``refused_limit``); legs that RESUME existing sessions still get through;
* replay buffers: ``replay_buffer`` unacknowledged bytes per session, then the app is
  no longer read (back-pressure, nothing dropped);
* legs still waiting for their hello: ``MAX_PENDING_HELLOS``; beyond, the newest
  connection is closed (``hello_overflow``);
* finished sessions' final offsets (tombstones): ``TOMBSTONE_S`` seconds, at most
  ``MAX_TOMBSTONES``, the oldest evicted first (``tombstones_evicted``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import secrets
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from ipaddress import IPv4Address
from typing import Any

from manetkit import events
from manetkit.jsonlines import LineServer, status_handler
from manetkit.proxy import frames as fr
from manetkit.proxy import guard, intercept, modes, policy
from manetkit.proxy.config import ProxyConfig
from manetkit.proxy.daemonclient import DaemonClient
from manetkit.proxy.relay import Relay
from manetkit.proxy.session import Role, Session, SessionConfig
from manetkit.proxy.sockets import Side, apply_options, arm_rst_on_close, reset_socket

log = logging.getLogger("manetkit.proxy")

TOMBSTONE_S = 120.0  # how long a cleanly closed session's final offsets are remembered
MAX_TOMBSTONES = 4096
MAX_PENDING_HELLOS = 256
HELLO_TIMEOUT_S = 10.0

Handler = Callable[[socket.socket, tuple[str, int]], Awaitable[None]]


class Proxy:
    """Listeners, the session table, interception and the daemon/status sockets."""

    def __init__(self, cfg: ProxyConfig) -> None:
        self.cfg = cfg
        self.loop = asyncio.get_running_loop()
        self.relays: set[Relay] = set()
        self.by_sid: dict[bytes, Relay] = {}
        # sid -> (time, delivered, peer), oldest first
        self.tombstones: OrderedDict[bytes, tuple[float, int, IPv4Address]] = OrderedDict()
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
        self.status_server: LineServer | None = None
        self.pending_hellos = 0
        self.counters = {
            "accepted": 0,
            "at_limit_waits": 0,
            "refused_limit": 0,
            "emfile_backoffs": 0,
            "resets": 0,
            "done": 0,
            "protocol_errors": 0,
            "unknown_session": 0,
            "resume_wrong_peer": 0,
            "bogus_offset": 0,
            "refused_destination": 0,
            "stale_transports": 0,
            "bad_hellos": 0,
            "hello_overflow": 0,
            "tombstones_evicted": 0,
        }
        self.refusals = guard.Refusals(self.counters)
        self.daemon: DaemonClient | None = None
        if cfg.daemon_socket is not None:
            self.daemon = DaemonClient(cfg.daemon_socket, self.route_event)
        self.started = time.time()

    def session_config(self) -> SessionConfig:
        return SessionConfig(
            replay_limit=self.cfg.replay_buffer,
            keepalive=self.cfg.keepalive,
            ack_delay=self.cfg.ack_delay,
            partition_timeout=self.cfg.partition_timeout,
        )

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self.status_server = LineServer(
            self.cfg.status_socket, status_handler(self.status), name="proxy status socket"
        )
        await self.status_server.start()
        # pyroute2's synchronous API runs its own event loop: keep it off ours
        stale = await asyncio.to_thread(intercept.install, self.spec)
        if stale:
            log.warning("a stale nft table from a previous run was replaced")
        app_l = self._listener(IPv4Address("0.0.0.0"), self.cfg.listen_port)
        mesh_l = self._listener(self.cfg.listen_address, self.cfg.peer_port)
        self.tasks.append(self.loop.create_task(self._accept_loop(app_l, self._on_app, True)))
        self.tasks.append(self.loop.create_task(self._accept_loop(mesh_l, self._on_leg, False)))
        if self.daemon is not None:
            self.tasks.append(self.loop.create_task(self.daemon.run()))
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
            r.session.reset(self.loop.time(), "proxy shutting down")
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

    async def _accept_loop(self, lsock: socket.socket, handler: Handler, bounded: bool) -> None:
        """Accept forever; ``bounded``: at the session limit, leave new connections in the
        kernel's backlog instead of spinning (the app listener)."""
        backoff = 0.05
        while True:
            while bounded and len(self.relays) >= self.max_sessions:
                self.counters["at_limit_waits"] += 1
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

    def remember_done(self, session: Session, peer: IPv4Address) -> None:
        """Keep a cleanly finished session's final offsets for a while: an initiator
        that lost our final ACK with its transport can still learn that all is done."""
        now = self.loop.time()
        self.tombstones[session.sid] = (now, session.delivered, peer)
        while self.tombstones:
            sid, (t, _, _) = next(iter(self.tombstones.items()))
            if now - t <= TOMBSTONE_S and len(self.tombstones) <= MAX_TOMBSTONES:
                break
            if now - t <= TOMBSTONE_S:
                self.counters["tombstones_evicted"] += 1
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
        apply_options(conn, modes.fin_wait2_options())
        arm_rst_on_close(conn)
        session = Session.initiate(
            self.loop.time(), (dst, port), mode, self.session_config(),
            token_bytes=secrets.token_bytes,
        )  # fmt: skip
        relay = Relay(self, session, dst)
        self.relays.add(relay)
        side = Side(relay, "app", on_made=lambda sd: setattr(relay, "app", sd))
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
        relay.dial()

    # --- the server's side -------------------------------------------------------------------

    async def _on_leg(self, conn: socket.socket, addr: tuple[str, int]) -> None:
        if self.pending_hellos >= MAX_PENDING_HELLOS:
            self.refusals.refuse("hello_overflow", addr[0], "too many legs without a hello")
            conn.close()
            return
        conn.setblocking(False)
        apply_options(conn, modes.leg_options("elfn", self.cfg))
        self.pending_hellos += 1
        try:
            got = await self._read_hello(conn)
        finally:
            self.pending_hellos -= 1
        if got is None:
            conn.close()
            return
        hello, buffered = got
        peer = IPv4Address(addr[0])
        relay = self._relay_for(conn, hello, peer)
        if relay is None:
            conn.close()
            return
        # adopt the leg: the previous one (if any) is dead or stale
        old = relay.mesh
        relay.mesh = None
        if old is not None and old.transport is not None:
            reset_socket(old.transport)

        def adopt(side: Side) -> None:
            assert side.transport is not None
            if relay.closed:  # e.g. the server refused while this leg was being adopted
                side.transport.write(fr.pack_reset("session closed"))
                side.transport.close()
                return
            relay.mesh = side
            relay.mesh_read_paused = False
            relay.mesh_write_blocked = False
            relay.session.new_transport(self.loop.time())
            relay.on_data(side, buffered)

        await self.loop.connect_accepted_socket(lambda: Side(relay, "mesh", on_made=adopt), conn)

    async def _read_hello(self, conn: socket.socket) -> tuple[fr.Open | fr.Resume, bytes] | None:
        """The leg's first frame (OPEN or RESUME) and the bytes read after it."""
        reader = fr.FrameReader()
        deadline = self.loop.time() + HELLO_TIMEOUT_S
        hello = None
        while hello is None:
            try:
                chunk = await asyncio.wait_for(
                    self.loop.sock_recv(conn, 4096), deadline - self.loop.time()
                )
            except (TimeoutError, OSError):
                return None
            if not chunk:
                return None
            reader.feed(chunk)
            try:
                hello = reader.peek()
            except fr.MalformedFrame:
                self.counters["bad_hellos"] += 1
                return None
        if not isinstance(hello, fr.Open | fr.Resume):
            self.counters["bad_hellos"] += 1
            return None
        return hello, reader.pending()

    def _refuse(self, conn: socket.socket, counter: str, peer: IPv4Address, why: str) -> None:
        """RESET the leg (the peer's app then sees a reset), count, log once."""
        self.refusals.refuse(counter, str(peer), why)
        with contextlib.suppress(OSError):
            conn.send(fr.pack_reset(why))

    def _relay_for(
        self, conn: socket.socket, hello: fr.Open | fr.Resume, peer: IPv4Address
    ) -> Relay | None:
        """The relay this leg belongs to (a new one for an OPEN), or None: refused."""
        relay = self.by_sid.get(hello.sid)
        if relay is not None:
            if relay.peer != peer:
                # only the peer that opened a session may resume it (guard.py)
                self._refuse(conn, "resume_wrong_peer", peer, "unknown session")
                return None
            if not relay.session.accepts_hello(hello):
                self.counters["stale_transports"] += 1
                return None
            bogus = relay.session.resume_refusal(hello)
            if bogus is not None:
                self._refuse(conn, "bogus_offset", peer, bogus)
                return None
            return relay
        if isinstance(hello, fr.Resume):
            done = self.tombstones.get(hello.sid)
            if done is not None and done[2] == peer:
                # finished here: tell the initiator everything was delivered, FIN included
                with contextlib.suppress(OSError):
                    conn.send(fr.pack_resume(hello.sid, hello.epoch, done[1], True))
                return None
            counter = "resume_wrong_peer" if done is not None else "unknown_session"
            self._refuse(conn, counter, peer, "unknown session")
            return None
        why = guard.destination_refusal(hello.addr, self.cfg.mesh_prefix, self.cfg.allow_local)
        if why is not None:
            self._refuse(conn, "refused_destination", peer, why)
            return None
        if len(self.relays) >= self.max_sessions:
            self._refuse(conn, "refused_limit", peer, "too many sessions")
            return None
        session = Session(
            Role.ACCEPTOR, hello.sid, self.loop.time(), self.session_config(),
            (hello.addr, hello.port), hello.mode, token_bytes=secrets.token_bytes,
        )  # fmt: skip
        relay = Relay(self, session, peer)
        self.relays.add(relay)
        self.by_sid[hello.sid] = relay
        relay.arm_timer()
        self.loop.create_task(self._connect_server(relay, peer))
        return relay

    async def _connect_server(self, relay: Relay, client: IPv4Address) -> None:
        s = relay.session
        assert s.dst is not None
        addr, port = s.dst
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            apply_options(sock, modes.fin_wait2_options())
            if self.cfg.transparent_source:
                intercept.make_transparent(sock)
                intercept.mark(sock, self.cfg.transparent_mark)
                sock.bind((str(client), 0))
            else:
                intercept.mark(sock, self.cfg.own_mark)
            await asyncio.wait_for(self.loop.sock_connect(sock, (str(addr), port)), 10)
            arm_rst_on_close(sock)
        except (TimeoutError, OSError) as exc:
            sock.close()
            s.reset(self.loop.time(), f"server {addr}:{port} unreachable: {exc!r}")
            relay.flush()
            return
        if relay.closed:
            sock.close()
            return
        await self.loop.connect_accepted_socket(
            lambda: Side(relay, "app", on_made=relay.app_connected), sock
        )

    # --- daemon events -------------------------------------------------------------------------

    @property
    def daemon_connected(self) -> bool:
        return self.daemon is not None and self.daemon.connected

    def ask_discover(self, dst: IPv4Address) -> None:
        if self.daemon is not None:
            self.daemon.ask_discover(dst)

    def route_event(self, ev: events.Event) -> None:
        """Hand a route event to the relays whose mesh leg it concerns."""
        for relay in list(self.relays):
            if policy.concerns(ev, str(relay.peer), relay.leg_ports()):
                relay.on_route_event(ev)

    # --- status --------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        counters = dict(self.counters)
        if self.daemon is not None:
            counters |= self.daemon.counters
        return {
            "kind": "proxy",
            "uptime_s": round(time.time() - self.started, 1),
            "mesh_prefix": str(self.cfg.mesh_prefix),
            "mode": self.cfg.mode,
            "nft_table": f"inet {self.cfg.nft_table}",
            "daemon_connected": self.daemon_connected,
            "max_sessions": self.max_sessions,
            "tombstones": len(self.tombstones),
            "counters": counters,
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
