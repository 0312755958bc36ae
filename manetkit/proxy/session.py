"""Sans-I/O resumable stream between two peer proxies (h11/aioquic shape).

A *session* carries one application connection across any number of *transports*
(kernel TCP connections of the mesh leg). Each direction is a byte stream with 64-bit
offsets that the receiving proxy acknowledges once it has handed the bytes to its
application (docs/proxy.md). The sender keeps every unacknowledged byte
in a bounded replay buffer, so when a transport dies (or is replaced because the
kernel connection backed off, ELFN, Holland & Vaidya section 6) nothing is lost: on the
new transport both sides send RESUME with the offset they have delivered, the sender
replays from the peer's offset and the receiver drops what it already has. An explicit
FIN(final offset) means a dead transport is never read as end of stream.

The channel is authenticated (:mod:`manetkit.proxy.channel`): OPEN and ACCEPT agree on
session keys, and every later frame carries a MAC tag bound to its transport (epoch) and
its place in the stream. A RESUME is honoured only with the session key's tag and the
exact next epoch, ``acceptor's epoch + 1``: the initiator numbers a RESUME one past the
last epoch the acceptor confirmed (its ACCEPT or RESUME answer), and an acceptor that
already had that epoch (its answer was lost) says so with a tagged STALE, after which
the initiator dials again with the epoch after it.

Inputs (``now``, monotonic seconds, first after self, as in the routing engines):
  app_data, app_eof, transport_data, transport_lost, transport_eof, new_transport,
  handle_timer, freeze / probe / thaw (the decisions of :mod:`manetkit.proxy.policy`),
  reset.
Randomness (session ids, probe nonces, X25519 private keys) comes from the injected
``token_bytes``.
Outputs (the project's core contract, docs/style.md), drained with ``next_event()`` until
it returns None: SendBytes (bytes for the current transport, consecutive frames in one
event), DeliverData (bytes for the local application), AppEof, Frozen, Resumed,
DropTransport (close the current transport, it carried what the channel refuses; an
initiator dials again), PeerBusy (the acceptor is at a session limit: dial again
later), Closed; in the order they happened (a RESET's SendBytes comes
before its Closed). ``get_timer()`` is the one deadline the session needs next,
``handle_timer(now)`` its input.

States: FLOWING (data moves), FROZEN (route reported down: hold data), PROBING (frozen,
a probe outstanding), RESUMING (transport lost or replaced, waiting for the peer's
RESUME), CLOSED. A refused transition raises :class:`SessionStateError` naming it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from ipaddress import IPv4Address, IPv6Address

from manetkit.proxy import frames as fr
from manetkit.proxy.channel import (
    KeyAgreementError,
    Keyring,
    MeshKey,
    PeerChannel,
    Refused,
    SessionKeys,
    check_open,
)

MIN_FRAME = 2048  # first DATA frame on a transport (or after an idle second), then doubling
IDLE_S = 1.0  # a sender idle this long starts again with small frames


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


# --- events ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SendBytes:
    """Bytes for the current transport (the mesh leg), to be written in order."""

    data: bytes


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
class DropTransport:
    """Close the current transport (with RST): it carried a frame the channel refuses
    (bad tag, malformed, a stale epoch). The session itself goes on: an initiator dials
    a new transport, an acceptor waits for one."""

    reason: str


@dataclass(frozen=True, slots=True)
class PeerBusy:
    """The acceptor is at a session limit and took nothing of this transport: close it
    and dial again after ``retry_after`` seconds. The application waits meanwhile (as
    for a server's full listen queue); the silence limit bounds the wait (the partition
    timeout, or an idle stream's ``idle_timeout``), since a BUSY is no word from the
    session."""

    retry_after: float


@dataclass(frozen=True, slots=True)
class Closed:
    reason: str
    clean: bool  # True: both directions finished; False: reset (the app must see RST)


Event = SendBytes | DeliverData | AppEof | Frozen | Resumed | DropTransport | PeerBusy | Closed


# 120 s: at least RFC 1122's 100 s for giving up on data (section 4.2.3.5, R2), so the
# proxy does not reset an app that plain TCP would carry over a break (Linux gives up
# only after tcp_retries2, ~15 min); at 30 s the proxies reset runs that plain TCP finished
PARTITION_TIMEOUT_DEFAULT = 120.0


@dataclass(slots=True)
class SessionConfig:
    replay_limit: int = 4 * 1024 * 1024  # unacknowledged bytes before back-pressure
    ack_every: int = 64 * 1024  # acknowledge at once after this many delivered bytes
    # Otherwise within this delay. Each ACK frame the receiver writes is a packet of its
    # own on the reverse path, competing for the same 802.11 channel as the data: at 20 ms
    # a 2 Mbit/s transfer lost 4 % (1 hop) and 9 % (3 hops) of its goodput to them
    # (docs/proxy.md, "Overhead with no breaks"). The ACK only frees the sender's replay
    # buffer (RESUME replays from the receiver's own offset), so it can wait for the
    # keepalive.
    ack_delay: float = 1.0
    keepalive: float = 1.0  # an ACK at least this often, so a live peer is never silent
    partition_timeout: float = PARTITION_TIMEOUT_DEFAULT  # reset after this long unheard
    # ... unless the stream was idle when the silence began: an idle TCP connection rides
    # out any outage (it sends nothing), so an idle session waits this long instead
    idle_timeout: float = 900.0


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What an acceptor keeps of a cleanly finished session: enough to tell a late,
    proven RESUME that everything was delivered (docs/proxy.md, "Closing")."""

    sid: bytes
    delivered: int
    keys: SessionKeys = field(repr=False)


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
        channel: PeerChannel,
    ) -> None:
        if len(sid) != fr.SID_LEN:
            raise ValueError("session id must be 16 bytes")
        self.role = role
        self.sid = sid
        self.cfg = config or SessionConfig()
        self.dst = dst
        self.mode = mode
        self.channel = channel
        self._token_bytes = token_bytes  # injected randomness: probe nonces
        self.state = State.RESUMING  # until the first transport is attached
        self.epoch = 0
        self._ever_attached = False
        self._has_transport = False
        self._awaiting_hello = False  # acceptor: OPEN/RESUME not yet read on this transport
        self._hello_seen = False  # acceptor: some transport's hello was accepted
        self._confirmed_epoch: int | None = None  # initiator: the acceptor's last answer
        self._reader = fr.FrameReader()
        self._out = bytearray()
        self._events: deque[Event] = deque()
        # send direction: _buf holds bytes [acked, written)
        self._buf = bytearray()
        self.acked = 0
        self.sent = 0
        self.sent_high = 0
        self.written = 0
        self._frame_size = MIN_FRAME
        self._last_data_sent = now
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
        self._last_data = now  # DATA sent or received: was the stream moving?
        self._owed_since: float | None = None  # when the oldest unsettled byte was written
        self._probe_nonce: int | None = None
        self.finished = False  # initiator: both directions done, waiting for the close
        # counters for status
        self.resumes = 0
        self.probes = 0
        self.duplicate_bytes = 0
        self.malformed = 0
        self.bad_tags = 0
        self.stale_epochs = 0
        self.unknown_frames = 0
        self.busy_answers = 0  # initiator: BUSY answers to our hellos

    @classmethod
    def initiate(
        cls,
        now: float,
        dst: tuple[IPv4Address | IPv6Address, int],
        mode: str,
        config: SessionConfig | None = None,
        *,
        token_bytes: Callable[[int], bytes],
        mesh_key: MeshKey | None = None,
    ) -> Session:
        """A new session for the client side's proxy, its id 128 bits from
        ``token_bytes`` (the shell passes :func:`secrets.token_bytes`), its X25519 key
        from 32 more; ``mesh_key``: tag OPEN with the mesh key (config ``auth``)."""
        sid = token_bytes(fr.SID_LEN)
        channel = PeerChannel(True, sid, token_bytes(32), mesh_key)
        return cls(
            Role.INITIATOR, sid, now, config, dst, mode, token_bytes=token_bytes, channel=channel
        )

    @classmethod
    def accept(
        cls,
        now: float,
        rec: fr.Record,
        config: SessionConfig | None = None,
        *,
        token_bytes: Callable[[int], bytes],
        keyring: Keyring,
    ) -> Session:
        """A new acceptor session from a transport's first frame, an OPEN; raises
        :class:`Refused` (counter and reason) when ``keyring`` does not let it in."""
        frame = rec.frame
        if not isinstance(frame, fr.Open):
            raise Refused("unknown_session", "unknown session")
        mesh = check_open(rec, keyring)
        try:
            channel = PeerChannel(False, frame.sid, token_bytes(32), mesh, peer_open=frame)
        except KeyAgreementError as exc:
            raise Refused("bad_proof", str(exc)) from None
        return cls(
            Role.ACCEPTOR, frame.sid, now, config, (frame.addr, frame.port), frame.mode,
            token_bytes=token_bytes, channel=channel,
        )  # fmt: skip

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

    def tombstone(self) -> Tombstone | None:
        """Acceptor, cleanly finished: what to remember (None before the keys exist)."""
        keys = self.channel.keys
        return None if keys is None else Tombstone(self.sid, self.delivered, keys)

    # --- application inputs ------------------------------------------------------------

    def app_data(self, now: float, data: bytes) -> None:
        if self.state is State.CLOSED:
            raise SessionStateError("app_data", self.state)
        if self._fin_requested:
            raise SessionStateError("app_data", self.state, "after app_eof")
        if not self._owes():
            self._owed_since = now
        self._buf += data
        self.written += len(data)
        self._pump(now)

    def app_eof(self, now: float) -> None:
        """The local app closed its sending side: FIN once every byte is sent."""
        if self.state is State.CLOSED:
            raise SessionStateError("app_eof", self.state)
        if not self._owes():
            self._owed_since = now
        self._fin_requested = True
        self._pump(now)

    def reset(self, now: float, reason: str) -> None:
        """Give up (app reset, partition timeout): RESET to the peer, CLOSED locally."""
        if self.state is State.CLOSED:
            return
        if self._has_transport:
            self._send(now, fr.pack_reset(reason))
        self._close(reason, clean=False)

    def check_hello(self, rec: fr.Record) -> None:
        """Acceptor: may a transport that starts with ``rec`` (a repeated OPEN or a RESUME
        of this session) replace the current one? :class:`Refused` (counter, reason, and
        for a stale epoch the tagged STALE to send back) if not.

        The shell asks before attaching, so a forged, replayed or stale hello never
        touches the live transport: the hello must carry the session key's tag (the
        early key's for a repeated OPEN with a mesh key), a RESUME the exact next epoch,
        and its delivered offset must lie in ``[acked, sent_high]``."""
        frame = rec.frame
        assert isinstance(frame, fr.Open | fr.Resume)
        self.channel.check_hello(rec)
        if isinstance(frame, fr.Open):
            if self._hello_seen and frame.epoch <= self.epoch:
                raise Refused("stale_transports", f"OPEN epoch {frame.epoch} <= {self.epoch}")
            return
        if frame.epoch != self.epoch + 1:
            raise Refused(
                "stale_epochs",
                f"RESUME epoch {frame.epoch}, expected {self.epoch + 1}",
                self.channel.stale_reply(frame.epoch, self.epoch),
            )
        if not self.acked <= frame.delivered <= self.sent_high:
            raise Refused(
                "bogus_offset",
                f"RESUME delivered {frame.delivered} outside [{self.acked}, {self.sent_high}]",
            )

    # --- transport inputs --------------------------------------------------------------

    def new_transport(self, now: float) -> None:
        """A fresh kernel connection is attached; the previous one (if any) is gone."""
        if self.state is State.CLOSED:
            raise SessionStateError("new_transport", self.state)
        self._reader.clear()
        self._drop_pending_bytes()
        self._has_transport = True
        self._ack_deadline = None
        self._frame_size = MIN_FRAME
        self.channel.end_transport()
        if self.role is Role.ACCEPTOR:
            self._awaiting_hello = True
            self.state = State.RESUMING
            self._ever_attached = True
            return
        assert self.dst is not None
        if not self._ever_attached:
            self._ever_attached = True
            # epoch 0: the peer has nothing, so data can follow OPEN at once (0-RTT)
            self.channel.begin_open(0)
            self._send(now, self._open_frame())
            self.state = State.FLOWING
            self._pump(now)
            return
        self.sent = self.acked  # beyond this, only the peer's answer says what arrived
        if self._confirmed_epoch is None:
            # the peer may never have seen our OPEN: repeat it (it resumes if it had)
            self.epoch += 1
            self.channel.begin_open(self.epoch)
            self._send(now, self._open_frame())
        else:
            self.epoch = self._confirmed_epoch + 1
            self.channel.begin_resume(self.epoch)
            self._send(now, fr.pack_resume(self.sid, self.epoch, self.delivered, self._eof_seen()))
            self._acked_out = self.delivered
        self.state = State.RESUMING

    def _open_frame(self) -> bytes:
        assert self.dst is not None
        ch = self.channel
        return fr.pack_open(
            self.sid, self.epoch, self.dst[0], self.dst[1], self.mode, ch.key_id, ch.pub_i
        )

    def transport_lost(self, now: float) -> None:
        """The current transport died (reset, user timeout, replaced): wait for a new one."""
        if self.state is State.CLOSED:
            return
        self._has_transport = False
        self._awaiting_hello = False
        self._ack_deadline = None  # the RESUME on the next transport carries the offset
        self._reader.clear()
        self._drop_pending_bytes()
        self.channel.end_transport()
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
        while self.state is not State.CLOSED and self._has_transport:
            try:
                rec = self._reader.next_record()
            except fr.MalformedFrame as exc:
                # not reset: an injected byte must not end a session; a new transport can
                self.malformed += 1
                self._drop_transport(now, f"malformed frame: {exc}")
                return
            if rec is None:
                break
            why = self._unseal(rec)
            if why is not None:
                self.bad_tags += 1
                self._drop_transport(now, why)
                return
            if not isinstance(rec.frame, fr.Busy):
                self._last_heard = now
            self._handle(now, rec.frame)
        self._maybe_ack(now)

    def _unseal(self, rec: fr.Record) -> str | None:
        """Check a received frame against the channel (None: it may be acted on)."""
        ch = self.channel
        if self.role is Role.ACCEPTOR and self._awaiting_hello:
            return ch.begin(rec)
        if self.role is Role.INITIATOR and isinstance(rec.frame, fr.Accept):
            if not ch.open_transport:
                return "ACCEPT on a RESUME transport"
            return ch.on_accept(rec, self.epoch)
        return ch.unseal(rec)

    def _drop_transport(self, now: float, why: str) -> None:
        self.transport_lost(now)
        self._emit(DropTransport(why))

    # --- mode policy inputs (ELFN, TCP-BuS) ---------------------------------------------

    def freeze(self, now: float, why: str) -> None:
        """Route reported down: stop sending data (ACKs and probes still go out)."""
        if self.state in (State.FROZEN, State.PROBING):
            return
        if self.state is not State.FLOWING:
            raise SessionStateError("freeze", self.state)
        self.state = State.FROZEN
        self._emit(Frozen(why))

    def probe(self, now: float) -> None:
        """Send a PROBE on the current transport; its PROBE_ACK thaws the session."""
        if self.state not in (State.FROZEN, State.PROBING) or not self._has_transport:
            raise SessionStateError("probe", self.state)
        self._probe_nonce = int.from_bytes(self._token_bytes(8), "big")
        self.probes += 1
        self._send(now, fr.pack_probe(self._probe_nonce))
        self.state = State.PROBING

    def thaw(self, now: float, how: str) -> None:
        """Route back (route-up, ERSN): send again."""
        if self.state not in (State.FROZEN, State.PROBING):
            raise SessionStateError("thaw", self.state)
        self._probe_nonce = None
        self.state = State.FLOWING
        self._emit(Resumed(how))
        self._pump(now)

    # --- timers ----------------------------------------------------------------------

    def _owes(self) -> bool:
        """Something is owed that only a live peer can settle (bytes or our FIN)."""
        return self.acked < self.written or (self._fin_requested and not self._fin_acked)

    def _silence_deadline(self) -> tuple[float, bool] | None:
        """When the peer's silence resets the app, and whether as an idle stream's
        (None: no limit now).

        ``partition_timeout`` after the later of the last word from the peer and the
        moment the debt began while something is owed (data written after a long quiet
        spell gets its full timeout, as a TCP retransmission timer starts with the
        segment); and ``partition_timeout`` after the last word while the stream has no
        working transport and was moving when the silence began (the peer likely owes
        us the rest). A stream that was idle then (no DATA either way for
        ``partition_timeout`` before it) waits ``idle_timeout``: an idle TCP connection
        sends nothing and rides out any outage, and the proxy must not do worse (an
        iperf3 control connection, a keep-alive HTTP connection, an FTP control
        channel), yet a peer that is gone for good is not waited on forever."""
        heard, cfg = self._last_heard, self.cfg
        if self._owes():
            since = heard if self._owed_since is None else max(heard, self._owed_since)
            return since + cfg.partition_timeout, False
        if self.state is State.FLOWING:
            return None
        if self._last_data >= heard - cfg.partition_timeout:
            return heard + cfg.partition_timeout, False  # it was moving
        return heard + cfg.idle_timeout, True

    def idle_without_leg_since(self) -> float | None:
        """The last word from the peer, if this is an idle stream waiting without a
        transport (its silence limit is ``idle_timeout``); else None."""
        if self.state in (State.CLOSED, State.FLOWING) or self._has_transport:
            return None
        silence = self._silence_deadline()
        return self._last_heard if silence is not None and silence[1] else None

    def get_timer(self) -> float | None:
        if self.state is State.CLOSED:
            return None
        deadlines = []
        if self._ack_deadline is not None:
            deadlines.append(self._ack_deadline)
        if self._can_talk():
            deadlines.append(self._last_sent + self.cfg.keepalive)
        silence = self._silence_deadline()
        if silence is not None:
            deadlines.append(silence[0])
        return min(deadlines) if deadlines else None

    def handle_timer(self, now: float) -> None:
        if self.state is State.CLOSED:
            return
        silence = self._silence_deadline()
        if silence is not None and now >= silence[0]:
            idle = silence[1]
            self.reset(
                now,
                f"partition timeout: no word from the peer for "
                f"{now - self._last_heard:.1f}s ({'idle stream, ' if idle else ''}"
                f"state {self.state.value})",
            )
            return
        if not self._can_talk():
            return
        ack_due = self._ack_deadline is not None and now >= self._ack_deadline
        keepalive_due = now >= self._last_sent + self.cfg.keepalive
        if ack_due or keepalive_due:
            self._send_ack(now)

    # --- outputs -----------------------------------------------------------------------

    def next_event(self) -> Event | None:
        """The next output, None when there is none (drain until None after every input)."""
        if self._events:
            return self._events.popleft()
        if self._out:
            out = SendBytes(bytes(self._out))
            self._out.clear()
            return out
        return None

    def _emit(self, event: Event) -> None:
        """Queue an event after the bytes produced before it (order is the shell's order)."""
        if self._out:
            self._events.append(SendBytes(bytes(self._out)))
            self._out.clear()
        self._events.append(event)

    def _drop_pending_bytes(self) -> None:
        """Bytes for a transport that is gone are moot: RESUME decides what is replayed."""
        self._out.clear()
        if any(isinstance(e, SendBytes) for e in self._events):
            self._events = deque(e for e in self._events if not isinstance(e, SendBytes))

    def _send(self, now: float, frame: bytes) -> None:
        """One frame for the current transport, tagged when the channel has a key."""
        self._out += self.channel.seal(frame)
        self._last_sent = now

    # --- internals ---------------------------------------------------------------------

    def _can_talk(self) -> bool:
        return self._has_transport and not self._awaiting_hello and self.state is not State.CLOSED

    def _eof_seen(self) -> bool:
        return self._peer_final is not None and self.delivered == self._peer_final

    def _close(self, reason: str, clean: bool) -> None:
        self.state = State.CLOSED
        self._buf.clear()
        self._ack_deadline = None
        self._emit(Closed(reason, clean))

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
        elif isinstance(frame, fr.Resume | fr.Open | fr.Accept):
            self._on_hello(now, frame)
        elif isinstance(frame, fr.Stale):
            self._on_stale(now, frame)
        elif isinstance(frame, fr.Fin):
            self._on_fin(now, frame.final)
        elif isinstance(frame, fr.Reset):
            self._close(f"peer reset: {frame.reason}", clean=False)
        elif isinstance(frame, fr.Busy):
            self._on_busy(now, frame)
        elif isinstance(frame, fr.Probe):
            self._send(now, fr.pack_probe_ack(frame.nonce))
        elif isinstance(frame, fr.ProbeAck):
            if self.state is State.PROBING and frame.nonce == self._probe_nonce:
                self.thaw(now, "probe")
        else:
            self.unknown_frames += 1

    def _on_hello(self, now: float, frame: fr.Open | fr.Resume | fr.Accept) -> None:
        if frame.sid != self.sid:
            self._protocol_error(now, "hello for another session")
            return
        if self.role is Role.ACCEPTOR:
            self._on_hello_acceptor(now, frame)
            return
        # initiator: the acceptor's answer to our OPEN (ACCEPT) or RESUME (RESUME)
        expected = fr.Accept if self.channel.open_transport else fr.Resume
        if not isinstance(frame, expected) or frame.epoch != self.epoch:
            self._protocol_error(
                now, f"unexpected {type(frame).__name__} (epoch {frame.epoch}, ours {self.epoch})"
            )
            return
        was_resuming = self.state is State.RESUMING
        self._confirmed_epoch = self.epoch
        if not self._apply_resume(now, frame.delivered, frame.fin_seen, rewind=was_resuming):
            return
        if isinstance(frame, fr.Accept):
            self._send_ack(now)  # our first frame under the session key: the proof
        if was_resuming:
            self.resumes += 1
            self.state = State.FLOWING
            self._emit(Resumed("resume"))
            self._pump(now)

    def _on_hello_acceptor(self, now: float, frame: fr.Open | fr.Resume | fr.Accept) -> None:
        if not self._awaiting_hello or isinstance(frame, fr.Accept):
            self._protocol_error(now, f"{type(frame).__name__} after the transport's hello")
            return
        stale = (
            frame.epoch != self.epoch + 1
            if isinstance(frame, fr.Resume)
            else self._hello_seen and frame.epoch <= self.epoch
        )
        if stale:
            # the shell checks before attaching: only a race gets here
            self.stale_epochs += 1
            if isinstance(frame, fr.Resume):
                self._out += self.channel.stale_reply(frame.epoch, self.epoch)
            self._drop_transport(now, f"stale epoch {frame.epoch} (ours {self.epoch})")
            return
        first = not self._hello_seen
        self._hello_seen = True
        self._awaiting_hello = False
        self.epoch = frame.epoch
        delivered = frame.delivered if isinstance(frame, fr.Resume) else 0
        fin = frame.fin_seen if isinstance(frame, fr.Resume) else False
        if not self._apply_resume(now, delivered, fin, rewind=True):
            return
        self._send_hello_reply(now, isinstance(frame, fr.Open))
        self.state = State.FLOWING
        if not first:
            self.resumes += 1
            self._emit(Resumed("resume"))
        self._pump(now)

    def _on_stale(self, now: float, frame: fr.Stale) -> None:
        """The acceptor already has our RESUME's epoch (its answer was lost): dial again,
        numbering the next RESUME after the epoch it names."""
        if self.role is not Role.INITIATOR or frame.sid != self.sid:
            self._protocol_error(now, "STALE to an acceptor or for another session")
            return
        if frame.epoch < (self._confirmed_epoch or 0):
            self._protocol_error(now, f"STALE epoch {frame.epoch} went back")
            return
        self.stale_epochs += 1
        self._confirmed_epoch = frame.epoch
        self._drop_transport(now, f"acceptor is at epoch {frame.epoch}")

    def _on_busy(self, now: float, frame: fr.Busy) -> None:
        """The acceptor did not take this transport's hello for now (a session limit):
        the transport is over; the session waits and dials again (docs/proxy.md,
        "Limits and robustness")."""
        if self.role is not Role.INITIATOR:
            self._protocol_error(now, "BUSY to an acceptor")
            return
        self.busy_answers += 1
        self.transport_lost(now)
        self._emit(PeerBusy(frame.retry_after_ms / 1000))

    def _send_hello_reply(self, now: float, to_open: bool) -> None:
        if to_open:
            ch = self.channel
            frame = fr.pack_accept(self.sid, self.epoch, self.delivered, self._eof_seen(), ch.pub_a)
        else:
            frame = fr.pack_resume(self.sid, self.epoch, self.delivered, self._eof_seen())
        self._send(now, frame)
        self._acked_out = self.delivered

    def _apply_resume(self, now: float, peer_delivered: int, peer_fin: bool, rewind: bool) -> bool:
        """The peer's delivered offset: everything below is settled; on a new transport
        (``rewind``) the rest is replayed from there."""
        if peer_delivered < self.acked or peer_delivered > self.sent_high:
            self._protocol_error(
                now, f"peer delivered {peer_delivered} outside [{self.acked}, {self.sent_high}]"
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
        if not self._owes():
            self._owed_since = None

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
        self._last_data = now
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
        self._emit(DeliverData(frame.payload[skip:] if skip else frame.payload))
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
            self._emit(AppEof())
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
        self._send(now, fr.pack_ack(self.delivered, self._eof_seen()))
        self._acked_out = self.delivered
        self._ack_deadline = None
        self._maybe_done()

    def _pump(self, now: float) -> None:
        """Send what the state allows: new or replayed DATA, then FIN.

        A transport's first DATA frames are small (``MIN_FRAME``, doubling up to
        ``MAX_DATA``; again after an idle second), as TLS stacks size their first records:
        the receiver can use a tagged frame only once all of it is in, and the first
        bytes after a RESUME should not wait for 16 KiB to cross a slow path."""
        if self.state is not State.FLOWING or not self._can_talk():
            return
        if self.sent < self.written and now - self._last_data_sent > IDLE_S:
            self._frame_size = MIN_FRAME
        buf = memoryview(self._buf)
        out = self._out
        ch = self.channel
        try:
            while self.sent < self.written:
                start = self.sent - self.acked
                n = min(self._frame_size, self.written - self.sent)
                payload = buf[start : start + n]
                head, tag = ch.seal_data(self.sent, payload)
                out += head
                out += payload
                out += tag
                self.sent += n
                self._frame_size = min(fr.MAX_DATA, self._frame_size * 2)
                self._last_sent = self._last_data_sent = self._last_data = now
        finally:
            buf.release()
        self.sent_high = max(self.sent_high, self.sent)
        if (
            self._fin_requested
            and not self._fin_acked
            and self.sent == self.written
            and self._fin_sent_epoch != self.epoch
        ):
            self._send(now, fr.pack_fin(self.written))
            self._fin_sent_epoch = self.epoch
