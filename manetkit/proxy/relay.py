"""One application connection and its session across mesh legs (the proxy's asyncio shell
around :class:`manetkit.proxy.session.Session` and :class:`manetkit.proxy.policy.Policy`).

On the client's laptop (initiator) a relay owns the intercepted app socket and opens mesh
legs to the peer proxy; on the server's laptop (acceptor) it owns the connection to the
real server and adopts mesh legs as they arrive. Bytes flow through the session; this
module only moves them, applies back-pressure (pause reading one side while the other
cannot take more), turns the session's events and the policy's actions into socket
actions, and keeps one timer at the earlier of the two cores' deadlines.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
from ipaddress import IPv4Address
from typing import Any, Protocol

from manetkit import events
from manetkit.proxy import intercept, modes
from manetkit.proxy import policy as pol
from manetkit.proxy.config import ProxyConfig
from manetkit.proxy.session import (
    AppEof,
    Closed,
    DeliverData,
    DropTransport,
    Frozen,
    PeerBusy,
    Resumed,
    Role,
    SendBytes,
    Session,
    State,
)
from manetkit.proxy.sockets import Side, apply_options, graceful_close, reset_socket, tcp_info

log = logging.getLogger("manetkit.proxy")

RECONNECT_MIN, RECONNECT_MAX = 0.2, 2.0
# the event fields worth a log line (the rest, e.g. paths, is in the daemon's stream)
_EVENT_KEYS = ("dst", "src", "sport", "dport", "seq", "last_ack", "pivot", "reason", "hops")


class Host(Protocol):
    """What a relay needs from the proxy around it (:class:`manetkit.proxy.server.Proxy`)."""

    cfg: ProxyConfig
    loop: asyncio.AbstractEventLoop
    counters: dict[str, int]
    over_budget: bool  # all replay buffers together are at the memory budget
    mesh_write_cap: int  # a leg queueing more than this is not read

    def account(self, relay: Relay, replay_bytes: int) -> None: ...
    def ask_discover(self, dst: IPv4Address) -> None: ...
    def remember_done(self, session: Session, peer: IPv4Address) -> None: ...
    def forget(self, relay: Relay) -> None: ...


def policy_config(cfg: ProxyConfig, mode: str) -> pol.PolicyConfig:
    return pol.PolicyConfig(
        mode=mode, probe=cfg.probe, probe_interval=cfg.probe_interval, bus_wait=cfg.bus_wait
    )


class Relay:
    """One application connection and its session across mesh legs."""

    def __init__(self, proxy: Host, session: Session, peer: IPv4Address) -> None:
        self.proxy = proxy
        self.session = session
        self.peer = peer
        self.policy = pol.Policy(policy_config(proxy.cfg, session.mode), str(peer))
        self.loop = proxy.loop
        self.app: Side | None = None
        self.mesh: Side | None = None
        self.app_pending: list[bytes] = []  # acceptor: bytes for a server not yet connected
        self.app_eof_pending = False
        self.app_read_paused = False
        self.mesh_read_paused = False
        self.app_write_blocked = False
        self.mesh_write_blocked = False
        self.timer: asyncio.TimerHandle | None = None
        self.dials: set[asyncio.Task[None]] = set()  # leg connects under way (at most 2)
        self.reconnect_delay = RECONNECT_MIN
        self.bytes_from_app = 0
        self.bytes_to_app = 0
        self.started = time.time()
        self.closed = False
        self.last_tcp_info: modes.TcpInfo | None = None
        self.charged = 0  # replay bytes counted in the proxy's memory total

    @property
    def connecting(self) -> bool:
        return bool(self.dials)

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
        info = tcp_info(sock) if sock is not None else None
        if info is not None:
            self.last_tcp_info = info
        return info

    def leg_view(self) -> pol.Leg:
        """The policy's input: the session's state and the kernel connection's back-off."""
        info = self.tcp_info()
        return pol.Leg(
            state=self.session.state,
            initiator=self.session.role is Role.INITIATOR,
            has_leg=self.mesh is not None,
            backed_off=modes.backed_off(info),
            rtt_ms=info.rtt_ms if info is not None else None,
        )

    def leg_status(self) -> dict[str, Any] | None:
        ports = self.leg_ports()
        if ports is None:
            return None
        (_, lport), rport = ports
        return {"local_port": lport, "remote_port": rport}

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
            "channel": s.channel.mode,
            "bad_tags": s.bad_tags,
            "stale_epochs": s.stale_epochs,
            "frozen_by": self.policy.frozen_by,
            "leg": self.leg_status(),
            "age_s": round(time.time() - self.started, 1),
            "tcp_info": info.as_dict() if info else None,
        }

    # --- socket callbacks ---------------------------------------------------------------

    def on_data(self, side: Side, data: bytes) -> None:
        now = self.loop.time()
        if side is self.app:
            self.bytes_from_app += len(data)
            if self.session.state is State.CLOSED:
                return
            self.session.app_data(now, data)
        elif side is self.mesh:
            self.session.transport_data(now, data)
        else:
            return  # a replaced leg's last bytes: meaningless now
        self.flush()

    def on_eof(self, side: Side) -> bool:
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

    def on_lost(self, side: Side, exc: Exception | None) -> None:
        now = self.loop.time()
        if side is self.app:
            if self.closed:
                return
            why = f"application connection lost ({exc or 'closed'})"
            log.info("session %s: %s", self.session.sid_hex[:8], why)
            self.session.reset(now, why)
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

    def on_pause(self, side: Side, paused: bool) -> None:
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
            and not self.proxy.over_budget
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
            if (
                want_mesh
                and self.mesh_write_blocked
                and self.mesh.transport.get_write_buffer_size() >= self.proxy.mesh_write_cap
            ):
                # the peer does not read what we owe it: no more answers (PROBE_ACKs) to queue
                want_mesh = False
                if not self.mesh_read_paused:
                    self.proxy.counters["mesh_backpressure"] += 1
            if want_mesh and self.mesh_read_paused:
                self.mesh.transport.resume_reading()
                self.mesh_read_paused = False
            elif not want_mesh and not self.mesh_read_paused:
                self.mesh.transport.pause_reading()
                self.mesh_read_paused = True

    # --- the cores' outputs -----------------------------------------------------------------

    def flush(self) -> None:
        """Send what the session produced, act on its events, re-arm the timer."""
        s = self.session
        while (ev := s.next_event()) is not None:
            if isinstance(ev, SendBytes):
                if self.mesh is not None and self.mesh.transport is not None:
                    self.mesh.transport.write(ev.data)
            elif isinstance(ev, DeliverData):
                self.deliver(ev.data)
            elif isinstance(ev, AppEof):
                self.deliver_eof()
            elif isinstance(ev, Frozen):
                self.proxy.counters["freezes"] += 1
                log.info("session %s to %s frozen: %s", s.sid_hex[:8], self.peer, ev.why)
            elif isinstance(ev, Resumed):
                self.proxy.counters["thaws"] += 1
                log.info("session %s resumed (%s)", s.sid_hex[:8], ev.how)
                self.policy.resumed(self.loop.time())
            elif isinstance(ev, DropTransport):
                self.drop_leg(ev.reason)
            elif isinstance(ev, PeerBusy):
                self.peer_busy(ev.retry_after)
            elif isinstance(ev, Closed):
                self.finish(ev)
                return
        self.proxy.account(self, s.replay_bytes)
        self.update_flow()
        self.arm_timer()

    def drop_leg(self, why: str) -> None:
        """The session refused what the leg carried: close it with RST; an initiator
        dials a new one (the session itself already counts the leg as lost)."""
        self.proxy.counters["dropped_transports"] += 1
        log.warning("session %s: dropping mesh leg to %s: %s", self.session.sid_hex[:8],
                    self.peer, why)  # fmt: skip
        old, self.mesh = self.mesh, None
        if old is not None:
            reset_socket(old.transport)
        if self.session.role is Role.INITIATOR:
            self.schedule_reconnect()

    def peer_busy(self, retry_after: float) -> None:
        """The peer proxy is at a session limit: close the leg, dial again later. The
        delay is what BUSY asks, at least the reconnect back-off, spread x0.5 to x1.5 so
        a burst of waiting sessions does not return as one burst, and at most the
        back-off's ceiling (a BUSY is not tagged: one asking for an hour must not park
        the session)."""
        self.proxy.counters["peer_busy"] += 1
        log.debug("session %s: %s is busy, dialling again in %.2fs", self.session.sid_hex[:8],
                  self.peer, retry_after)  # fmt: skip
        old, self.mesh = self.mesh, None
        if old is not None and old.transport is not None:
            old.transport.close()
        delay = max(retry_after, self.reconnect_delay) * random.uniform(0.5, 1.5)
        self.schedule_reconnect(min(delay, RECONNECT_MAX))

    def apply_policy(self) -> None:
        """Carry out the policy's actions on the session and the legs."""
        s = self.session
        while (act := self.policy.next_event()) is not None:
            now = self.loop.time()
            if isinstance(act, pol.Freeze):
                s.freeze(now, act.why)
            elif isinstance(act, pol.Thaw):
                s.thaw(now, act.how)
            elif isinstance(act, pol.SendProbe):
                s.probe(now)
            elif isinstance(act, pol.Discover):
                self.proxy.ask_discover(IPv4Address(act.dst))
            elif isinstance(act, pol.ReplaceLeg):
                self.replace_leg(act.why)
            elif isinstance(act, pol.Reconnect):
                self.redial()
        self.flush()

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

    def app_connected(self, side: Side) -> None:
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
        self.policy.closed(self.loop.time())
        if self.timer is not None:
            self.timer.cancel()
        mesh = self.mesh.transport if self.mesh else None
        app = self.app.transport if self.app else None
        self.proxy.counters["done" if ev.clean else "resets"] += 1
        if ev.reason.startswith("protocol error"):
            self.proxy.counters["protocol_errors"] += 1
        if ev.clean:
            log.info("session %s done", self.session.sid_hex[:8])
            if app is not None:
                graceful_close(app)
        else:
            log.warning(
                "session %s to %s (%s) reset: %s",
                self.session.sid_hex[:8],
                self.peer,
                self.session.mode,
                ev.reason,
            )
            reset_socket(app)
        if mesh is not None:
            if ev.clean and self.session.role is Role.ACCEPTOR and mesh.can_write_eof():
                # the initiator closes first: closing here with its last keepalive still
                # unread would send RST and could destroy our final ACK in flight
                mesh.write_eof()
                self.loop.call_later(5.0, mesh.close)
            else:
                mesh.close()  # the RESET frame (if any) goes out first
        if ev.clean and self.session.role is Role.ACCEPTOR:
            self.proxy.remember_done(self.session, self.peer)
        self.proxy.forget(self)

    def arm_timer(self) -> None:
        """One timer: the earlier of the session's and the policy's deadlines."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        deadlines = [
            t for t in (self.session.get_timer(), self.policy.get_timer()) if t is not None
        ]
        if deadlines:
            self.timer = self.loop.call_at(max(min(deadlines), self.loop.time()), self.on_timer)

    def on_timer(self) -> None:
        self.timer = None
        now = self.loop.time()
        self.session.handle_timer(now)
        if self.session.state is not State.CLOSED:
            self.policy.handle_timer(now, self.leg_view())
            self.apply_policy()
        else:
            self.flush()

    # --- mesh legs (initiator) -------------------------------------------------------------

    def schedule_reconnect(self, delay: float | None = None) -> None:
        if self.connecting or self.closed:
            return
        d = self.reconnect_delay if delay is None else delay
        self.reconnect_delay = min(RECONNECT_MAX, self.reconnect_delay * 2)
        self.loop.call_later(d, self.dial)

    def replace_leg(self, why: str) -> None:
        """Drop a backed-off kernel connection and RESUME on a fresh one (ELFN, BuS)."""
        if self.session.role is not Role.INITIATOR or self.connecting or self.closed:
            return
        log.info("session %s: replacing mesh leg (%s)", self.session.sid_hex[:8], why)
        self.proxy.counters["legs_replaced"] += 1
        old = self.mesh
        self.mesh = None
        if old is not None and old.transport is not None:
            reset_socket(old.transport)
        self.session.transport_lost(self.loop.time())
        self.dial()

    def dial(self) -> None:
        """Start a leg connection (if none is up or under way)."""
        if not (self.connecting or self.closed or self.mesh is not None):
            self._start_dial()

    def _start_dial(self) -> None:
        task = self.loop.create_task(self.connect_leg())
        self.dials.add(task)
        task.add_done_callback(self.dials.discard)

    def redial(self) -> None:
        """The route is back while the leg is gone: dial again now, beside the dial under
        way (if any), and keep whichever connects first. The SYN of a dial made during the
        outage usually waits in the daemon's send buffer (DSR and AODV hold packets while
        they look for a route and release them in order at route-up), so that dial
        connects at once; cancelling it, as before, left its SYN to go out first anyway
        and cost a SYN-ACK and a RST ahead of the fresh SYN. If its SYN is gone (dropped,
        expired, or lost on the broken route), the kernel would resend it only after its
        back-off (1, 2, 4 ... s): the fresh dial covers that case."""
        if self.closed or self.mesh is not None or self.session.role is not Role.INITIATOR:
            return
        if len(self.dials) < 2:
            self._start_dial()

    def _dial_timeout(self) -> float | None:
        """None during an outage that a route event reported: the dial's SYN then waits in
        the daemon's send buffer for the route, and a dial abandoned on a timeout would
        leave it there to be released at route-up ahead of the next dial's (ELFN's probe
        is the policy's discovery request, not a new SYN). Otherwise a dial that is not
        answered within the probe interval (at least 1 s) is retried."""
        if self.policy.outage:
            return None
        rtt = self.last_tcp_info.rtt_ms if self.last_tcp_info else None
        return max(1.0, pol.probe_interval(self.policy.cfg, rtt))

    async def connect_leg(self) -> None:
        if self.closed or self.mesh is not None:
            return
        cfg = self.proxy.cfg
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            intercept.mark(sock, cfg.own_mark)
            apply_options(sock, modes.leg_options(self.mode, cfg))
            await asyncio.wait_for(
                self.loop.sock_connect(sock, (str(self.peer), cfg.peer_port)),
                self._dial_timeout(),
            )
        except asyncio.CancelledError:
            sock.close()
            return  # another dial connected first, or the session ended
        except (TimeoutError, OSError) as exc:
            sock.close()
            log.debug("session %s: leg connect failed: %r", self.session.sid_hex[:8], exc)
            self.dials.discard(asyncio.current_task())  # type: ignore[arg-type]
            if not self.dials:
                self.schedule_reconnect()
            return
        if self.closed or self.mesh is not None:
            sock.close()
            return
        me = asyncio.current_task()
        for other in list(self.dials):
            if other is not me:
                other.cancel()
        side = Side(self, "mesh", on_made=self._leg_made)
        await self.loop.connect_accepted_socket(lambda: side, sock)

    def _leg_made(self, side: Side) -> None:
        # the dial is over once its leg exists: the leg may end (EOF, RST) before the dial
        # task finishes, and that end must find no dial under way, or no one dials again
        self.dials.clear()
        self.mesh = side
        self.mesh_read_paused = False
        self.mesh_write_blocked = False
        self.reconnect_delay = RECONNECT_MIN
        self.session.new_transport(self.loop.time())
        self.flush()

    # --- ELFN / BuS ---------------------------------------------------------------------------

    def on_route_event(self, ev: events.Event) -> None:
        """A daemon event that concerns this session's flow: the policy decides."""
        s = self.session
        if s.state is State.CLOSED or not self.policy.reacts:
            return
        fields = {k: v for k, v in events.fields_of(ev).items() if k in _EVENT_KEYS}
        log.info("session %s (%s): %s %s", s.sid_hex[:8], s.state.value, events.name_of(ev),
                 fields)  # fmt: skip
        self.policy.route_event(self.loop.time(), ev, self.leg_view())
        self.apply_policy()
