"""Sans-I/O resumable stream between two peer proxies (h11/aioquic shape).

A *session* carries one application connection across any number of *transports*
(kernel TCP connections of the mesh leg). Each direction is a byte stream with 64-bit
offsets that the receiving proxy acknowledges once it has handed the bytes to its
application (docs/proxy.md). The sender keeps every unacknowledged byte
in a bounded replay buffer, so when a transport dies (or is replaced because the
kernel connection backed off, ELFN, Holland & Vaidya section 6) nothing is lost: on the
new transport (epoch + 1) both sides send RESUME with the offset they have delivered,
the sender replays from the peer's offset and the receiver drops what it already has.
An explicit FIN(final offset) means a dead transport is never read as end of stream.

Inputs (``now``, monotonic seconds, first after self, as in the routing engines):
  app_data, app_eof, transport_data, transport_lost, new_transport, handle_timer,
  freeze / probe / thaw (the decisions of :mod:`manetkit.proxy.policy`), reset.
Randomness (session ids, probe nonces) comes from the injected ``token_bytes``.
Outputs:
  data_to_send()  bytes for the current transport
  next_event()    DeliverData, AppEof, Frozen, Resumed, Closed
  get_timer()     the one deadline the session needs next

States: FLOWING (data moves), FROZEN (route reported down: hold data), PROBING (frozen,
a probe outstanding), RESUMING (transport lost or replaced, waiting for the peer's
RESUME), CLOSED. A refused transition raises :class:`SessionStateError` naming it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from ipaddress import IPv4Address, IPv6Address

from manetkit.proxy import frames as fr


class State(Enum):
    FLOWING = "flowing"
    FROZEN = "frozen"
    PROBING = "probing"
    RESUMING = "resuming"
    CLOSED = "closed"


class Role(Enum):
    INITIATOR = "initiator"  # the client side's proxy: opens every transport
    ACCEPTOR = "acceptor"  # the server side's proxy: accepts transports


class SessionStateError(RuntimeError):
    """An input that the session's current state does not allow."""

    def __init__(self, action: str, state: State, why: str = "") -> None:
        super().__init__(f"refused {action} in state {state.name}" + (f": {why}" if why else ""))
        self.action = action
        self.state = state


class StaleTransport(Exception):
    """A transport's hello carries an older epoch than the session's: close that transport."""


# --- events ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeliverData:
    """Bytes for the local application, in order, each byte exactly once."""

    data: bytes


@dataclass(frozen=True, slots=True)
class AppEof:
    """The peer's application closed its side after the last delivered byte."""


@dataclass(frozen=True, slots=True)
class Frozen:
    why: str


@dataclass(frozen=True, slots=True)
class Resumed:
    how: str  # "resume" (new transport), "probe", "route-up", "ersn"


@dataclass(frozen=True, slots=True)
class Closed:
    reason: str
    clean: bool  # True: both directions finished; False: reset (the app must see RST)


Event = DeliverData | AppEof | Frozen | Resumed | Closed


@dataclass(slots=True)
class SessionConfig:
    replay_limit: int = 4 * 1024 * 1024  # unacknowledged bytes before back-pressure
    ack_every: int = 64 * 1024  # acknowledge at once after this many delivered bytes
    ack_delay: float = 0.02  # otherwise within this delay
    keepalive: float = 1.0  # an ACK at least this often, so a live peer is never silent
    partition_timeout: float = 30.0  # reset after this long without a word from the peer


class Session:
    """One resumable application stream; see the module docstring."""

    def __init__(
        self,
        role: Role,
        sid: bytes,
        now: float,
        config: SessionConfig | None = None,
        dst: tuple[IPv4Address | IPv6Address, int] | None = None,
        mode: str = "elfn",
        *,
        token_bytes: Callable[[int], bytes],
    ) -> None:
        if len(sid) != fr.SID_LEN:
            raise ValueError("session id must be 16 bytes")
        self.role = role
        self.sid = sid
        self.cfg = config or SessionConfig()
        self.dst = dst
        self.mode = mode
        self._token_bytes = token_bytes  # injected randomness: probe nonces
        self.state = State.RESUMING  # until the first transport is attached
        self.epoch = 0
        self._ever_attached = False
        self._has_transport = False
        self._awaiting_hello = False  # acceptor: OPEN/RESUME not yet read on this transport
        self._hello_seen = False  # acceptor: some transport's hello was accepted
        self._confirmed = False  # initiator: the peer has spoken at least once
        self._reader = fr.FrameReader()
        self._out = bytearray()
        self._events: deque[Event] = deque()
        # send direction: _buf holds bytes [acked, written)
        self._buf = bytearray()
        self.acked = 0
        self.sent = 0
        self.sent_high = 0
        self.written = 0
        self._fin_requested = False
        self._fin_sent_epoch = -1
        self._fin_acked = False
        # receive direction
        self.delivered = 0
        self._peer_final: int | None = None
        self._eof_delivered = False
        self._acked_out = 0  # last delivered offset we told the peer
        self._ack_deadline: float | None = None
        self._last_sent = now
        self._last_heard = now
        self._probe_nonce: int | None = None
        self.finished = False  # initiator: both directions done, waiting for the close
        # counters for status
        self.resumes = 0
        self.probes = 0
        self.duplicate_bytes = 0
        self.malformed = 0
        self.unknown_frames = 0

    @classmethod
    def initiate(
        cls,
        now: float,
        dst: tuple[IPv4Address | IPv6Address, int],
        mode: str,
        config: SessionConfig | None = None,
        *,
        token_bytes: Callable[[int], bytes],
    ) -> Session:
        """A new session for the client side's proxy, its id 128 bits from
        ``token_bytes`` (the shell passes :func:`secrets.token_bytes`: the acceptor lets
        only the peer that opened a session resume it, and the id must be unguessable)."""
        sid = token_bytes(fr.SID_LEN)
        return cls(Role.INITIATOR, sid, now, config, dst, mode, token_bytes=token_bytes)

    # --- properties ----------------------------------------------------------------

    @property
    def sid_hex(self) -> str:
        return self.sid.hex()

    @property
    def replay_bytes(self) -> int:
        return len(self._buf)

    def can_accept_app_data(self) -> bool:
        """False when the replay buffer is full: the shell stops reading the app."""
        return (
            self.state is not State.CLOSED
            and not self._fin_requested
            and len(self._buf) < self.cfg.replay_limit
        )

    # --- application inputs ------------------------------------------------------------

    def app_data(self, now: float, data: bytes) -> None:
        if self.state is State.CLOSED:
            raise SessionStateError("app_data", self.state)
        if self._fin_requested:
            raise SessionStateError("app_data", self.state, "after app_eof")
        self._buf += data
        self.written += len(data)
        self._pump(now)

    def app_eof(self, now: float) -> None:
        """The local app closed its sending side: FIN once every byte is sent."""
        if self.state is State.CLOSED:
            raise SessionStateError("app_eof", self.state)
        self._fin_requested = True
        self._pump(now)

    def reset(self, now: float, reason: str) -> None:
        """Give up (app reset, partition timeout): RESET to the peer, CLOSED locally."""
        if self.state is State.CLOSED:
            return
        if self._has_transport:
            self._out += fr.pack_reset(reason)
        self._close(reason, clean=False)

    def accepts_hello(self, frame: fr.Open | fr.Resume) -> bool:
        """Acceptor: would a transport starting with ``frame`` be newer than the current one?

        The shell asks before attaching, so a late, stale connection never displaces the
        live transport."""
        return not self._hello_seen or frame.epoch > self.epoch

    def resume_refusal(self, frame: fr.Open | fr.Resume) -> str | None:
        """Acceptor: why a hello's offsets cannot come from our peer (None: plausible).

        A RESUME may only claim delivery of bytes we sent and have not yet seen
        acknowledged, ``[acked, sent_high]``: the shell refuses anything else with RESET
        before the live transport is touched, so a forged hello cannot break it."""
        if isinstance(frame, fr.Resume) and not self.acked <= frame.delivered <= self.sent_high:
            return f"RESUME delivered {frame.delivered} outside [{self.acked}, {self.sent_high}]"
        return None

    # --- transport inputs --------------------------------------------------------------

    def new_transport(self, now: float) -> None:
        """A fresh kernel connection is attached; the previous one (if any) is gone."""
        if self.state is State.CLOSED:
            raise SessionStateError("new_transport", self.state)
        self._reader.clear()
        self._out.clear()  # bytes for the old transport are moot: RESUME decides replay
        self._has_transport = True
        self._ack_deadline = None
        if self.role is Role.ACCEPTOR:
            self._awaiting_hello = True
            self.state = State.RESUMING
            self._ever_attached = True
            return
        if not self._ever_attached:
            self._ever_attached = True
            # epoch 0: the peer has nothing, so data can follow OPEN at once (0-RTT)
            assert self.dst is not None
            self._out += fr.pack_open(self.sid, 0, self.dst[0], self.dst[1], self.mode)
            self._last_sent = now
            self.state = State.FLOWING
            self._pump(now)
            return
        self.epoch += 1
        self.sent = self.acked  # beyond this, only the peer's RESUME says what arrived
        if self._confirmed:
            hello = fr.pack_resume(self.sid, self.epoch, self.delivered, self._eof_seen())
            self._acked_out = self.delivered
        else:
            # the peer may never have seen our OPEN: repeat it (it resumes if it had)
            assert self.dst is not None
            hello = fr.pack_open(self.sid, self.epoch, self.dst[0], self.dst[1], self.mode)
        self._out += hello
        self._last_sent = now
        self.state = State.RESUMING

    def transport_lost(self, now: float) -> None:
        """The current transport died (reset, user timeout, replaced): wait for a new one."""
        if self.state is State.CLOSED:
            return
        self._has_transport = False
        self._ack_deadline = None  # the RESUME on the next transport carries the offset
        self._reader.clear()
        self._out.clear()
        self.state = State.RESUMING

    def transport_eof(self, now: float) -> None:
        """The peer closed the transport. Only a finished initiator reads that as the end
        (the acceptor closes once it is done); otherwise it is just a lost transport."""
        if self.role is Role.INITIATOR and self.finished and self.state is not State.CLOSED:
            self._close("done", clean=True)
        else:
            self.transport_lost(now)

    def transport_data(self, now: float, data: bytes | memoryview) -> None:
        if self.state is State.CLOSED:
            return  # late bytes after a reset or a clean close are meaningless
        if not self._has_transport:
            raise SessionStateError("transport_data", self.state, "no transport attached")
        self._reader.feed(data)
        while self.state is not State.CLOSED:
            try:
                frame = self._reader.next_frame()
            except fr.MalformedFrame as exc:
                self.malformed += 1
                self.reset(now, f"malformed frame: {exc}")
                return
            if frame is None:
                break
            self._last_heard = now
            self._handle(now, frame)
        self._maybe_ack(now)

    # --- mode policy inputs (ELFN, TCP-BuS) ---------------------------------------------

    def freeze(self, now: float, why: str) -> None:
        """Route reported down: stop sending data (ACKs and probes still go out)."""
        if self.state in (State.FROZEN, State.PROBING):
            return
        if self.state is not State.FLOWING:
            raise SessionStateError("freeze", self.state)
        self.state = State.FROZEN
        self._events.append(Frozen(why))

    def probe(self, now: float) -> None:
        """Send a PROBE on the current transport; its PROBE_ACK thaws the session."""
        if self.state not in (State.FROZEN, State.PROBING) or not self._has_transport:
            raise SessionStateError("probe", self.state)
        self._probe_nonce = int.from_bytes(self._token_bytes(8), "big")
        self.probes += 1
        self._out += fr.pack_probe(self._probe_nonce)
        self._last_sent = now
        self.state = State.PROBING

    def thaw(self, now: float, how: str) -> None:
        """Route back (route-up, ERSN): send again."""
        if self.state not in (State.FROZEN, State.PROBING):
            raise SessionStateError("thaw", self.state)
        self._probe_nonce = None
        self.state = State.FLOWING
        self._events.append(Resumed(how))
        self._pump(now)

    # --- timers ----------------------------------------------------------------------

    def _stalled(self) -> bool:
        """Something is owed that only a live peer can settle."""
        return (
            self.state is not State.FLOWING
            or self.acked < self.written
            or (self._fin_requested and not self._fin_acked)
        )

    def get_timer(self) -> float | None:
        if self.state is State.CLOSED:
            return None
        deadlines = []
        if self._ack_deadline is not None:
            deadlines.append(self._ack_deadline)
        if self._can_talk():
            deadlines.append(self._last_sent + self.cfg.keepalive)
        if self._stalled():
            deadlines.append(self._last_heard + self.cfg.partition_timeout)
        return min(deadlines) if deadlines else None

    def handle_timer(self, now: float) -> None:
        if self.state is State.CLOSED:
            return
        if self._stalled() and now >= self._last_heard + self.cfg.partition_timeout:
            self.reset(
                now,
                f"partition timeout: no word from the peer for "
                f"{now - self._last_heard:.1f}s (state {self.state.value})",
            )
            return
        if not self._can_talk():
            return
        ack_due = self._ack_deadline is not None and now >= self._ack_deadline
        keepalive_due = now >= self._last_sent + self.cfg.keepalive
        if ack_due or keepalive_due:
            self._send_ack(now)

    # --- outputs -----------------------------------------------------------------------

    def data_to_send(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    # --- internals ---------------------------------------------------------------------

    def _can_talk(self) -> bool:
        return self._has_transport and not self._awaiting_hello and self.state is not State.CLOSED

    def _eof_seen(self) -> bool:
        return self._peer_final is not None and self.delivered == self._peer_final

    def _close(self, reason: str, clean: bool) -> None:
        self.state = State.CLOSED
        self._buf.clear()
        self._ack_deadline = None
        self._events.append(Closed(reason, clean))

    def _protocol_error(self, now: float, why: str) -> None:
        self.malformed += 1
        self.reset(now, f"protocol error: {why}")

    def _handle(self, now: float, frame: fr.Frame) -> None:
        if self._awaiting_hello and not isinstance(frame, fr.Open | fr.Resume):
            self._protocol_error(now, f"{type(frame).__name__} before OPEN/RESUME")
            return
        if isinstance(frame, fr.Data):
            self._on_data(now, frame)
        elif isinstance(frame, fr.Ack):
            self._on_peer_delivered(now, frame.delivered, frame.fin_seen)
        elif isinstance(frame, fr.Resume | fr.Open):
            self._on_hello(now, frame)
        elif isinstance(frame, fr.Fin):
            self._on_fin(now, frame.final)
        elif isinstance(frame, fr.Reset):
            self._close(f"peer reset: {frame.reason}", clean=False)
        elif isinstance(frame, fr.Probe):
            self._out += fr.pack_probe_ack(frame.nonce)
            self._last_sent = now
        elif isinstance(frame, fr.ProbeAck):
            if self.state is State.PROBING and frame.nonce == self._probe_nonce:
                self.thaw(now, "probe")
        else:
            self.unknown_frames += 1

    def _on_hello(self, now: float, frame: fr.Open | fr.Resume) -> None:
        if frame.sid != self.sid:
            self._protocol_error(now, "hello for another session")
            return
        peer_delivered = frame.delivered if isinstance(frame, fr.Resume) else 0
        peer_fin = frame.fin_seen if isinstance(frame, fr.Resume) else False
        if self.role is Role.ACCEPTOR:
            if not self._awaiting_hello:
                self._protocol_error(now, "second hello on one transport")
                return
            if not self.accepts_hello(frame):
                raise StaleTransport(f"epoch {frame.epoch} <= {self.epoch}")
            first = not self._hello_seen
            self._hello_seen = True
            self._awaiting_hello = False
            self.epoch = frame.epoch
            if not self._apply_resume(now, peer_delivered, peer_fin, rewind=True):
                return
            self._send_hello_reply(now)
            self.state = State.FLOWING
            if not first:
                self.resumes += 1
                self._events.append(Resumed("resume"))
            self._pump(now)
            return
        # initiator: the acceptor's answer to our OPEN or RESUME
        if isinstance(frame, fr.Open) or frame.epoch != self.epoch:
            self._protocol_error(now, f"unexpected hello (epoch {frame.epoch})")
            return
        was_resuming = self.state is State.RESUMING
        self._confirmed = True
        if not self._apply_resume(now, peer_delivered, peer_fin, rewind=was_resuming):
            return
        if was_resuming:
            self.resumes += 1
            self.state = State.FLOWING
            self._events.append(Resumed("resume"))
            self._pump(now)

    def _send_hello_reply(self, now: float) -> None:
        self._out += fr.pack_resume(self.sid, self.epoch, self.delivered, self._eof_seen())
        self._acked_out = self.delivered
        self._last_sent = now

    def _apply_resume(self, now: float, peer_delivered: int, peer_fin: bool, rewind: bool) -> bool:
        """The peer's delivered offset: everything below is settled; on a new transport
        (``rewind``) the rest is replayed from there."""
        if peer_delivered < self.acked or peer_delivered > self.sent_high:
            self._protocol_error(
                f"peer delivered {peer_delivered} outside [{self.acked}, {self.sent_high}]", now
            )
            return False
        self._settle(peer_delivered, peer_fin)
        if rewind:
            self.sent = peer_delivered
            self._fin_sent_epoch = -1
        return self.state is not State.CLOSED

    def _settle(self, peer_delivered: int, peer_fin: bool) -> None:
        if peer_delivered > self.acked:
            del self._buf[: peer_delivered - self.acked]
            self.acked = peer_delivered
            self.sent = max(self.sent, self.acked)
        if peer_fin and self._fin_requested and self.acked == self.written:
            self._fin_acked = True
            self._maybe_done()

    def _on_peer_delivered(self, now: float, delivered: int, fin_seen: bool) -> None:
        if delivered > self.sent_high:
            self._protocol_error(now, f"ACK {delivered} beyond sent {self.sent_high}")
            return
        if delivered < self.acked:
            return  # duplicate or reordered acknowledgement: nothing new
        if fin_seen and not self._fin_requested:
            self._protocol_error(now, "FIN acknowledged before it was sent")
            return
        self._settle(delivered, fin_seen)

    def _on_data(self, now: float, frame: fr.Data) -> None:
        end = frame.offset + len(frame.payload)
        if frame.offset > self.delivered:
            self._protocol_error(now, f"DATA at {frame.offset} leaves a gap after {self.delivered}")
            return
        if self._peer_final is not None and end > self._peer_final:
            self._protocol_error(now, f"DATA to {end} beyond FIN {self._peer_final}")
            return
        if end <= self.delivered:
            self.duplicate_bytes += len(frame.payload)
            return
        skip = self.delivered - frame.offset
        self.duplicate_bytes += skip
        self._events.append(DeliverData(frame.payload[skip:] if skip else frame.payload))
        self.delivered = end
        self._check_eof()

    def _on_fin(self, now: float, final: int) -> None:
        if self._peer_final is not None and final != self._peer_final:
            self._protocol_error(now, f"FIN moved from {self._peer_final} to {final}")
            return
        if final < self.delivered:
            self._protocol_error(now, f"FIN at {final} before delivered {self.delivered}")
            return
        self._peer_final = final
        self._check_eof()

    def _check_eof(self) -> None:
        if not self._eof_delivered and self._eof_seen():
            self._eof_delivered = True
            self._events.append(AppEof())
            self._ack_deadline = -1.0  # tell the peer at once: it may be waiting to close
            self._maybe_done()

    def _maybe_done(self) -> None:
        if self._eof_delivered and self._fin_acked and self.state is not State.CLOSED:
            if self._acked_out < self.delivered or self._ack_deadline is not None:
                return  # the final ACK still has to go out (see _maybe_ack)
            if self.role is Role.INITIATOR:
                # Our final ACK may still die with the transport, and only we can dial a
                # new one: stay until the acceptor, done too, closes the transport
                # (transport_eof), as TCP's TIME_WAIT keeps the last ACK's sender around.
                self.finished = True
                return
            self._close("done", clean=True)

    def _maybe_ack(self, now: float) -> None:
        if not self._can_talk():
            return
        pending = self.delivered - self._acked_out
        if self._ack_deadline == -1.0 or pending >= self.cfg.ack_every:
            self._send_ack(now)
        elif pending > 0 and self._ack_deadline is None:
            self._ack_deadline = now + self.cfg.ack_delay

    def _send_ack(self, now: float) -> None:
        self._out += fr.pack_ack(self.delivered, self._eof_seen())
        self._acked_out = self.delivered
        self._ack_deadline = None
        self._last_sent = now
        self._maybe_done()

    def _pump(self, now: float) -> None:
        """Send what the state allows: new or replayed DATA, then FIN."""
        if self.state is not State.FLOWING or not self._can_talk():
            return
        buf = memoryview(self._buf)
        try:
            while self.sent < self.written:
                start = self.sent - self.acked
                n = min(fr.MAX_DATA, self.written - self.sent)
                self._out += fr.pack_data(self.sent, buf[start : start + n])
                self.sent += n
                self._last_sent = now
        finally:
            buf.release()
        self.sent_high = max(self.sent_high, self.sent)
        if (
            self._fin_requested
            and not self._fin_acked
            and self.sent == self.written
            and self._fin_sent_epoch != self.epoch
        ):
            self._out += fr.pack_fin(self.written)
            self._fin_sent_epoch = self.epoch
            self._last_sent = now
