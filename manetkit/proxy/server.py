"""The proxy process: listeners, the session table, interception, the status socket.

Client side: the nft redirect (:mod:`manetkit.proxy.intercept`) hands every intercepted
app connection to the app listener (on loopback, where nft's output redirect delivers;
on every address only with ``client_interfaces``), which starts an initiator
:class:`Relay`; a connection that nft did not redirect (made straight to the intercept
port) is refused. Server side: the mesh-leg listener (on this node's mesh address)
hands each leg to a task of its own that reads the leg's hello (OPEN or RESUME), so no
silent connection delays another's; the hello then either starts an acceptor relay
(after :mod:`manetkit.proxy.guard`'s checks and the channel's, :mod:`manetkit.proxy.channel`)
or is handed to the session it resumes. Route events come from :class:`DaemonClient`
and go to the relays whose flow they concern.

Bounds (each with a counter in status):

* sessions of local applications: ``max_sessions``; at the limit the app listener
  leaves new connections in the kernel's backlog (``at_limit_waits``);
* sessions peers open here: ``max_remote_sessions`` in all, ``max_peer_sessions`` per
  peer address; an OPEN beyond either is answered with BUSY (``refused_limit``): the
  initiator's application waits and its proxy dials again, as a client waits on a
  server's full listen queue; legs that RESUME existing sessions still get through;
* replay buffers: ``replay_buffer`` unacknowledged bytes per session, and all sessions
  together at most ``memory_budget``: at either bound no application is read
  (back-pressure, nothing dropped; ``budget_waits`` counts the times the budget was hit);
* a leg's write queue: while it holds more than a session's replay buffer and two
  socket buffers (the peer is not reading), the leg is not read either, so a peer
  cannot make us queue answers (PROBE_ACKs) without end (``mesh_backpressure``);
* legs still waiting for their hello: ``MAX_PENDING_HELLOS`` in all and
  ``MAX_PENDING_HELLOS_PER_PEER`` per peer address, each at most ``HELLO_TIMEOUT_S``;
  beyond, the newest connection is answered BUSY and closed (``hello_overflow``);
* finished sessions' final offsets (tombstones): ``TOMBSTONE_S`` seconds, at most
  ``MAX_TOMBSTONES``, the oldest evicted first (``tombstones_evicted``);
* session ids seen in OPENs (a replayed OPEN is refused, ``replayed_open``):
  ``MAX_RECENT_SIDS``, the oldest forgotten first.
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
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable
from ipaddress import IPv4Address
from typing import Any

from manetkit import events
from manetkit.jsonlines import LineServer, status_handler
from manetkit.proxy import frames as fr
from manetkit.proxy import guard, intercept, modes, policy
from manetkit.proxy.channel import Keyring, Refused, tombstone_reply
from manetkit.proxy.config import ProxyConfig, load_keyring
from manetkit.proxy.daemonclient import DaemonClient
from manetkit.proxy.relay import RECONNECT_MAX, Relay
from manetkit.proxy.session import Role, Session, SessionConfig, Tombstone
from manetkit.proxy.sockets import HIGH_WATER, Side, apply_options, arm_rst_on_close, reset_socket

log = logging.getLogger("manetkit.proxy")

TOMBSTONE_S = 120.0  # how long a cleanly closed session's final offsets are remembered
MAX_TOMBSTONES = 4096
MAX_PENDING_HELLOS = 256
MAX_PENDING_HELLOS_PER_PEER = 8
HELLO_TIMEOUT_S = 10.0
BUSY_RETRY_MS = 250  # what a BUSY answer asks the initiator to wait before dialling again
_BUSY = fr.pack_busy(BUSY_RETRY_MS)
MAX_RECENT_SIDS = 16384
MAX_PEER_STREAKS = 4096
NOFILE_WANTED = 65536  # the soft RLIMIT_NOFILE the proxy raises itself to (up to hard)
BUDGET_RESUME = 0.9  # below this share of the memory budget, paused applications are read

# refusals of hellos that proved the session key: the peer may hear the reason
_PROVEN = ("bogus_offset", "stale_epochs", "stale_transports")

Handler = Callable[[socket.socket, tuple[str, int]], Awaitable[None]]


def raise_nofile() -> int:
    """Raise the soft descriptor limit towards the hard one (as servers do); the new
    soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard if hard != resource.RLIM_INFINITY else NOFILE_WANTED, NOFILE_WANTED)
    if want > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
    return soft


class Proxy:
    """Listeners, the session table, interception and the daemon/status sockets."""

    def __init__(self, cfg: ProxyConfig, keyring: Keyring | None = None) -> None:
        self.cfg = cfg
        self.keyring = keyring if keyring is not None else load_keyring(cfg)
        self.loop = asyncio.get_running_loop()
        self.relays: set[Relay] = set()
        self.by_sid: dict[bytes, Relay] = {}
        # sid -> (time, tombstone, peer), oldest first
        self.tombstones: OrderedDict[bytes, tuple[float, Tombstone, IPv4Address]] = OrderedDict()
        self.recent_sids: OrderedDict[bytes, None] = OrderedDict()
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
        derived = max(16, (soft - 64) // 6)  # local and remote sessions: 3 descriptors each
        self.max_sessions = cfg.max_sessions or derived
        self.max_remote_sessions = cfg.max_remote_sessions or self.max_sessions
        self.local_sessions = 0
        self.remote_by_peer: Counter[IPv4Address] = Counter()
        # per peer, the first and the last hello of its current streak (hellos less than
        # partition_timeout apart): how long it has been reaching us again
        self.peer_streaks: OrderedDict[IPv4Address, tuple[float, float]] = OrderedDict()
        self.slot_free = asyncio.Event()
        self.tasks: list[asyncio.Task[Any]] = []
        self.leg_tasks: set[asyncio.Task[None]] = set()
        self.listeners: list[socket.socket] = []
        self.status_server: LineServer | None = None
        self.pending_hellos: Counter[str] = Counter()
        self.mesh_address: IPv4Address | None = None
        self.replay_total = 0  # bytes in every session's replay buffer
        self.over_budget = False
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
            "refused_peer": 0,
            "not_redirected": 0,
            "refused_unauthenticated": 0,
            "bad_proof": 0,
            "bad_hellos": 0,
            "stale_transports": 0,
            "stale_epochs": 0,
            "replayed_open": 0,
            "dropped_transports": 0,
            "peer_busy": 0,
            "hello_overflow": 0,
            "orphans_reset": 0,
            "tombstones_evicted": 0,
            "budget_waits": 0,
            "mesh_backpressure": 0,
            # ELFN/BuS at work: sessions frozen and thawed, backed-off legs replaced
            "freezes": 0,
            "thaws": 0,
            "legs_replaced": 0,
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
            idle_timeout=self.cfg.idle_limit,
        )

    @property
    def mesh_write_cap(self) -> int:
        """A leg's write queue beyond which the leg is no longer read (see the module
        docstring): a RESUME's whole replay buffer plus two socket buffers."""
        return self.cfg.replay_buffer + 2 * HIGH_WATER

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
        # nft's output redirect delivers to 127.0.0.1; prerouting (client_interfaces) to
        # the address of the interface the client came in on
        app_addr = "0.0.0.0" if self.cfg.client_interfaces else "127.0.0.1"
        app_l = self._listener(app_addr, self.cfg.listen_port)
        self.tasks.append(self.loop.create_task(self._accept_loop(app_l, self._on_app, True)))
        self.tasks.append(self.loop.create_task(self._mesh_listener()))
        if self.daemon is not None:
            self.tasks.append(self.loop.create_task(self.daemon.run()))
        log.info(
            "proxy up: intercepting %s -> %s:%d, channel %s, max %d local / %d remote sessions",
            self.cfg.mesh_prefix,
            app_addr,
            self.cfg.listen_port,
            f"mesh key {self.keyring.signing.id}" if self.keyring.signing else "ephemeral keys",
            self.max_sessions,
            self.max_remote_sessions,
        )

    async def stop(self) -> None:
        for t in [*self.tasks, *self.leg_tasks]:
            t.cancel()
        for t in [*self.tasks, *self.leg_tasks]:
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

    def _listener(self, addr: str, port: int) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        intercept.mark(s, self.cfg.own_mark)
        s.bind((addr, port))
        s.listen(1024)
        s.setblocking(False)
        self.listeners.append(s)
        return s

    async def _mesh_listener(self) -> None:
        """Bind the mesh-leg listener to this node's mesh address (configured, or the one
        address inside ``mesh_prefix``, waited for if the daemon has not set it yet)."""
        addr = self.cfg.listen_address
        waited = False
        while addr is None:
            found = await asyncio.to_thread(intercept.addresses_in, self.cfg.mesh_prefix)
            if len(found) > 1:
                raise OSError(
                    f"listen_address: this host has {len(found)} addresses in "
                    f"{self.cfg.mesh_prefix} ({', '.join(map(str, found))}): set one"
                )
            if found:
                addr = found[0]
                break
            if not waited:
                log.warning("no address in %s yet: waiting for it", self.cfg.mesh_prefix)
                waited = True
            await asyncio.sleep(0.5)
        self.mesh_address = addr
        lsock = self._listener(str(addr), self.cfg.peer_port)
        log.info("peers on %s:%d", addr, self.cfg.peer_port)
        await self._accept_loop(lsock, self._on_leg_task, False)

    async def _accept_loop(self, lsock: socket.socket, handler: Handler, bounded: bool) -> None:
        """Accept forever; ``bounded``: at the session limit, leave new connections in the
        kernel's backlog instead of spinning (the app listener)."""
        backoff = 0.05
        while True:
            while bounded and self.local_sessions >= self.max_sessions:
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
        tomb = session.tombstone()
        if tomb is None:
            return
        now = self.loop.time()
        self.tombstones[session.sid] = (now, tomb, peer)
        while self.tombstones:
            sid, (t, _, _) = next(iter(self.tombstones.items()))
            if now - t <= TOMBSTONE_S and len(self.tombstones) <= MAX_TOMBSTONES:
                break
            if now - t <= TOMBSTONE_S:
                self.counters["tombstones_evicted"] += 1
            del self.tombstones[sid]

    def forget(self, relay: Relay) -> None:
        if relay not in self.relays:
            return
        self.relays.discard(relay)
        if relay.session.role is Role.INITIATOR:
            self.local_sessions -= 1
        else:
            self.remote_by_peer[relay.peer] -= 1
            if self.remote_by_peer[relay.peer] <= 0:
                del self.remote_by_peer[relay.peer]
        if self.by_sid.get(relay.session.sid) is relay:
            del self.by_sid[relay.session.sid]
        self.account(relay, 0)
        self.slot_free.set()

    # --- memory ------------------------------------------------------------------------------

    def account(self, relay: Relay, replay_bytes: int) -> None:
        """A relay's replay buffer now holds ``replay_bytes``: keep the total, and pause or
        resume reading every application at the memory budget."""
        self.replay_total += replay_bytes - relay.charged
        relay.charged = replay_bytes
        budget = self.cfg.memory_budget
        if not self.over_budget and self.replay_total >= budget:
            self.over_budget = True
            self.counters["budget_waits"] += 1
            log.warning("memory budget: %d bytes in replay buffers: not reading apps", budget)
            for r in list(self.relays):
                r.update_flow()
        elif self.over_budget and self.replay_total < budget * BUDGET_RESUME:
            self.over_budget = False
            for r in list(self.relays):
                r.update_flow()

    # --- the client's side -------------------------------------------------------------------

    async def _on_app(self, conn: socket.socket, addr: tuple[str, int]) -> None:
        if not intercept.peer_is_redirected(conn):
            # straight to the intercept port: not an app nft handed us (a loop through
            # the proxy, or a host reaching the port directly)
            self.refusals.refuse("not_redirected", addr[0], "connection not redirected by nft")
            arm_rst_on_close(conn)
            conn.close()
            return
        dst, port = intercept.original_dst(conn)
        mode = self.cfg.mode_for(dst)
        apply_options(conn, modes.fin_wait2_options())
        arm_rst_on_close(conn)
        session = Session.initiate(
            self.loop.time(), (dst, port), mode, self.session_config(),
            token_bytes=secrets.token_bytes, mesh_key=self.keyring.signing,
        )  # fmt: skip
        relay = Relay(self, session, dst)
        self.relays.add(relay)
        self.local_sessions += 1
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

    async def _on_leg_task(self, conn: socket.socket, addr: tuple[str, int]) -> None:
        """Each leg in a task of its own: a silent connection delays no other one."""
        peer = addr[0]
        why = guard.peer_refusal(IPv4Address(peer), self.cfg.mesh_prefix)
        if why is not None:
            self.refusals.refuse("refused_peer", peer, why)
            conn.close()
            return
        total = sum(self.pending_hellos.values())
        if total >= MAX_PENDING_HELLOS or self.pending_hellos[peer] >= MAX_PENDING_HELLOS_PER_PEER:
            self.refusals.refuse("hello_overflow", peer, "too many legs without a hello")
            with contextlib.suppress(OSError):
                conn.send(_BUSY)
            conn.close()
            return
        self.pending_hellos[peer] += 1
        task = self.loop.create_task(self._on_leg(conn, addr))
        self.leg_tasks.add(task)
        task.add_done_callback(self.leg_tasks.discard)

    async def _on_leg(self, conn: socket.socket, addr: tuple[str, int]) -> None:
        peer = IPv4Address(addr[0])
        try:
            conn.setblocking(False)
            apply_options(conn, modes.leg_options("elfn", self.cfg))
            got = await self._read_hello(conn)
        except OSError:
            got = None  # the peer went away before its hello
        except asyncio.CancelledError:
            conn.close()
            raise
        finally:
            self.pending_hellos[addr[0]] -= 1
            if self.pending_hellos[addr[0]] <= 0:
                del self.pending_hellos[addr[0]]
        if got is None:
            conn.close()
            return
        rec, buffered = got
        try:
            relay = self._relay_for(conn, rec, peer)
        except Exception:
            log.exception("hello from %s", peer)
            relay = None
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

    async def _read_hello(self, conn: socket.socket) -> tuple[fr.Record, bytes] | None:
        """The leg's first frame (OPEN or RESUME) and the bytes read with it."""
        reader = fr.FrameReader()
        deadline = self.loop.time() + HELLO_TIMEOUT_S
        rec = None
        while rec is None:
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
                rec = reader.peek()
            except fr.MalformedFrame:
                self.counters["bad_hellos"] += 1
                return None
        if not isinstance(rec.frame, fr.Open | fr.Resume):
            self.counters["bad_hellos"] += 1
            return None
        return rec, reader.pending()

    def _refuse(
        self, conn: socket.socket, counter: str, peer: IPv4Address, why: str, reply: bytes = b""
    ) -> None:
        """RESET the leg (the peer's app then sees a reset), or send ``reply`` (a tagged
        STALE, a BUSY), count, log once."""
        self.refusals.refuse(counter, str(peer), why)
        with contextlib.suppress(OSError):
            conn.send(reply or fr.pack_reset(why))

    def _relay_for(self, conn: socket.socket, rec: fr.Record, peer: IPv4Address) -> Relay | None:
        """The relay this leg belongs to (a new one for an OPEN), or None: refused."""
        hello = rec.frame
        assert isinstance(hello, fr.Open | fr.Resume)
        self._heard_peer(peer, self.loop.time())
        relay = self.by_sid.get(hello.sid)
        if relay is not None:
            if relay.peer != peer:
                # only the peer that opened a session may resume it (guard.py)
                self._refuse(conn, "resume_wrong_peer", peer, "unknown session")
                return None
            try:
                relay.session.check_hello(rec)
            except Refused as r:
                # a hello without the key's proof hears only "unknown session"
                told = r.reason if r.counter in _PROVEN else "unknown session"
                self.refusals.refuse(r.counter, str(peer), r.reason)
                with contextlib.suppress(OSError):
                    conn.send(r.reply or fr.pack_reset(told))
                return None
            return relay
        if isinstance(hello, fr.Resume):
            done = self.tombstones.get(hello.sid)
            if done is not None and done[2] == peer:
                # finished here: tell the initiator everything was delivered, FIN included
                reply = tombstone_reply(done[1].keys, rec, hello.sid, done[1].delivered)
                if reply is None:
                    self._refuse(conn, "bad_proof", peer, "unknown session")
                else:
                    with contextlib.suppress(OSError):
                        conn.send(reply)
                return None
            counter = "resume_wrong_peer" if done is not None else "unknown_session"
            self._refuse(conn, counter, peer, "unknown session")
            return None
        return self._new_session(conn, rec, hello, peer)

    def _new_session(
        self, conn: socket.socket, rec: fr.Record, hello: fr.Open, peer: IPv4Address
    ) -> Relay | None:
        here = IPv4Address(conn.getsockname()[0])
        own = (self.cfg.listen_port, self.cfg.peer_port)
        why = guard.destination_refusal(hello.addr, hello.port, here, own)
        if why is not None:
            self._refuse(conn, "refused_destination", peer, why)
            return None
        if hello.sid in self.recent_sids or hello.sid in self.tombstones:
            # an OPEN we have seen: a replay of a captured first flight
            self._refuse(conn, "replayed_open", peer, "unknown session")
            return None
        remote = sum(self.remote_by_peer.values())
        if remote >= self.max_remote_sessions:
            self._refuse(conn, "refused_limit", peer, "too many sessions", _BUSY)
            return None
        if self.remote_by_peer[peer] >= self.cfg.max_peer_sessions and not self._reset_orphan(
            peer, self.loop.time()
        ):
            self._refuse(conn, "refused_limit", peer, f"too many sessions from {peer}", _BUSY)
            return None
        try:
            session = Session.accept(
                self.loop.time(), rec, self.session_config(),
                token_bytes=secrets.token_bytes, keyring=self.keyring,
            )  # fmt: skip
        except Refused as r:
            self._refuse(conn, r.counter, peer, r.reason)
            return None
        self.recent_sids[hello.sid] = None
        while len(self.recent_sids) > MAX_RECENT_SIDS:
            self.recent_sids.popitem(last=False)
        relay = Relay(self, session, peer)
        self.relays.add(relay)
        self.remote_by_peer[peer] += 1
        self.by_sid[hello.sid] = relay
        relay.arm_timer()
        self.loop.create_task(self._connect_server(relay, peer))
        return relay

    def _heard_peer(self, peer: IPv4Address, now: float) -> None:
        first, last = self.peer_streaks.pop(peer, (now, now))
        if now - last > self.cfg.partition_timeout:
            first = now  # a new streak: it had been silent
        self.peer_streaks[peer] = (first, now)
        while len(self.peer_streaks) > MAX_PEER_STREAKS:
            self.peer_streaks.popitem(last=False)

    def orphan_grace(self) -> float:
        """How long a peer must have been reaching us before one of its idle sessions
        that it has not resumed counts as given up: twice the longest wait an initiator
        makes before dialling a session again (its reconnect back-off, x1.5 at most,
        or an ELFN probe), at most half the partition timeout (the new sessions waiting
        on BUSY meanwhile must not time out first)."""
        wait = max(RECONNECT_MAX, self.cfg.probe_interval)
        return min(2 * wait, self.cfg.partition_timeout / 2)

    def _reset_orphan(self, peer: IPv4Address, now: float) -> bool:
        """At ``peer``'s session limit: reset its session that has waited longest without
        a leg as an idle stream, if the peer has been reaching us for
        :meth:`orphan_grace` and that session stayed silent all the while (its
        initiator gave it up: an initiator that resets a session with no leg cannot tell
        us, so it would hold the slot for ``idle_timeout``). True: a slot is free."""
        first, _ = self.peer_streaks.get(peer, (now, now))
        if now - first < self.orphan_grace():
            return False
        orphans = [
            (since, r)
            for r in self.relays
            if r.peer == peer and r.session.role is Role.ACCEPTOR
            and (since := r.session.idle_without_leg_since()) is not None and since < first
        ]  # fmt: skip
        if not orphans:
            return False
        since, relay = min(orphans, key=lambda o: o[0])
        relay.session.reset(
            now,
            f"orphaned: no word for {now - since:.1f}s while its peer was back for "
            f"{now - first:.1f}s",
        )
        relay.flush()  # CLOSED: the app's connection is reset, the slot freed
        self.counters["orphans_reset"] += 1
        return self.remote_by_peer[peer] < self.cfg.max_peer_sessions

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
            "mesh_address": str(self.mesh_address) if self.mesh_address else None,
            "mode": self.cfg.mode,
            "channel": (
                f"mesh key {self.keyring.signing.id}"
                + (" (required)" if self.keyring.required else "")
                if self.keyring.signing
                else "ephemeral keys"
            ),
            "nft_table": f"inet {self.cfg.nft_table}",
            "daemon_connected": self.daemon_connected,
            "max_sessions": self.max_sessions,
            "max_remote_sessions": self.max_remote_sessions,
            "max_peer_sessions": self.cfg.max_peer_sessions,
            "memory": {"replay_bytes": self.replay_total, "budget": self.cfg.memory_budget},
            "pending_hellos": sum(self.pending_hellos.values()),
            "tombstones": len(self.tombstones),
            "counters": counters,
            "sessions": [r.status() for r in self.relays],
        }


async def run(cfg: ProxyConfig, stop: asyncio.Event | None = None) -> None:
    """Run until ``stop`` is set (or SIGINT/SIGTERM through the CLI)."""
    raise_nofile()
    proxy = Proxy(cfg)
    try:
        await proxy.start()
        await (stop or asyncio.Event()).wait()
    finally:
        await proxy.stop()
