"""Two sessions wired back to back through an in-memory transport that can be cut.

The pair plays both shells: it attaches transports, moves bytes between the sessions in
whatever slices a test asks for, and records what each application received. Bytes in
flight when the transport is cut are lost, exactly as with a dead kernel connection.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from ipaddress import ip_address

from hypothesis import strategies as st

from manetkit.proxy import frames as fr
from manetkit.proxy.channel import Keyring, MeshKey, Refused, tombstone_reply
from manetkit.proxy.session import (
    AppEof,
    Closed,
    DeliverData,
    DropTransport,
    SendBytes,
    Session,
    SessionConfig,
)

DST = (ip_address("10.42.0.5"), 8080)


def tokens(seed: int = 0) -> Callable[[int], bytes]:
    """Deterministic stand-in for secrets.token_bytes (session ids, probe nonces)."""
    return random.Random(seed).randbytes


def sent(session: Session) -> bytes:
    """Drain a session's outputs; the bytes it wrote to its transport (tests that drive one
    session alone)."""
    out = bytearray()
    while (ev := session.next_event()) is not None:
        if isinstance(ev, SendBytes):
            out += ev.data
    return bytes(out)


def pattern(offset: int, n: int, salt: int) -> bytes:
    """Deterministic, position-dependent bytes, so a shifted or repeated range shows."""
    return bytes(((i * 7 + (i >> 8) * 13 + salt) & 0xFF) for i in range(offset, offset + n))


class Side:
    def __init__(self, salt: int) -> None:
        self.session: Session | None = None
        self.salt = salt
        self.written = 0
        self.received = bytearray()
        self.eof = 0
        self.closed: list[Closed] = []
        self.dropped: list[str] = []

    def drain(self, out: bytearray) -> None:
        """Everything the session produced: bytes for the transport go to ``out``."""
        assert self.session is not None
        while (ev := self.session.next_event()) is not None:
            if isinstance(ev, SendBytes):
                out += ev.data
            elif isinstance(ev, DeliverData):
                self.received += ev.data
            elif isinstance(ev, AppEof):
                self.eof += 1
            elif isinstance(ev, Closed):
                self.closed.append(ev)
            elif isinstance(ev, DropTransport):
                self.dropped.append(ev.reason)


class Pair:
    def __init__(
        self,
        config: SessionConfig | None = None,
        seed: int = 0,
        mesh_key: MeshKey | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        self.now = 0.0
        self.cfg = config or SessionConfig(partition_timeout=1e9)
        self.i = Side(salt=1)
        self.a = Side(salt=2)
        self.tokens = tokens(seed)
        self.keyring = keyring or Keyring((mesh_key,) if mesh_key else ())
        self.refused: list[str] = []  # the acceptor shell's refusals (counters)
        self.i.session = Session.initiate(
            self.now, DST, "elfn", self.cfg, token_bytes=self.tokens, mesh_key=mesh_key
        )
        self.i2a = bytearray()
        self.a2i = bytearray()
        self.a_attached = False
        self.a_eof = False  # the acceptor closed the transport after a clean finish
        self.stale = 0
        self.i.session.new_transport(self.now)
        self._collect()

    @property
    def si(self) -> Session:
        assert self.i.session is not None
        return self.i.session

    @property
    def sa(self) -> Session | None:
        return self.a.session

    def _collect(self) -> None:
        drops = len(self.i.dropped) + len(self.a.dropped)
        self.i.drain(self.i2a)
        if self.sa is not None:
            self.a.drain(self.a2i)
        if len(self.i.dropped) + len(self.a.dropped) > drops:
            # the shell closes a dropped transport with RST: the other side loses it too
            self.cut()
            return
        sa = self.sa
        if (
            sa is not None
            and self.a_attached
            and sa.state.value == "closed"
            and self.a.closed[-1].clean
        ):
            self.a_eof = True  # the acceptor's shell closes the transport when done

    # --- operations ---------------------------------------------------------------------

    def write(self, side: Side, n: int) -> None:
        s = side.session
        if s is None or not s.can_accept_app_data():
            return
        s.app_data(self.now, pattern(side.written, n, side.salt))
        side.written += n
        self._collect()

    def eof(self, side: Side) -> None:
        s = side.session
        if s is None or not s.can_accept_app_data():
            return
        s.app_eof(self.now)
        self._collect()

    def deliver_i2a(self, n: int) -> None:
        if not self.i2a:
            return
        if not self.a_attached:
            # what the acceptor's shell does: read the hello, find or make the session
            reader = fr.FrameReader()
            reader.feed(self.i2a)
            rec = reader.peek()
            if rec is None:
                return  # wait for the whole hello (the shell buffers it)
            hello = rec.frame
            assert isinstance(hello, fr.Open | fr.Resume)
            if self.sa is not None and self.sa.state.value == "closed":
                # the acceptor's shell remembers a finished session (tombstone)
                assert isinstance(hello, fr.Resume) and self.a.closed[-1].clean
                tomb = self.sa.tombstone()
                assert tomb is not None
                reply = tombstone_reply(tomb.keys, rec, hello.sid, tomb.delivered)
                assert reply is not None, "a tombstone answers a proven RESUME"
                self.i2a.clear()
                self.a2i += reply
                self.a_attached = True
                self.a_eof = True
                return
            try:
                if self.sa is None:
                    self.a.session = Session.accept(
                        self.now, rec, self.cfg, token_bytes=self.tokens, keyring=self.keyring
                    )
                else:
                    self.sa.check_hello(rec)
            except Refused as r:
                self.refused.append(r.counter)
                if r.counter in ("stale_transports", "stale_epochs"):
                    self.stale += 1
                self.i2a.clear()
                self.a2i += r.reply  # a tagged STALE, if any
                return
            assert self.sa is not None
            self.sa.new_transport(self.now)
            self.a_attached = True
        chunk = bytes(self.i2a[:n])
        del self.i2a[:n]
        assert self.sa is not None
        self.sa.transport_data(self.now, chunk)
        self._collect()

    def deliver_a2i(self, n: int) -> None:
        if self.a2i:
            chunk = bytes(self.a2i[:n])
            del self.a2i[:n]
            self.si.transport_data(self.now, chunk)
            self._collect()
        if not self.a2i and self.a_eof and self.si.state.value != "closed":
            self.a_eof = False
            self.a_attached = False
            self.i2a.clear()
            self.si.transport_eof(self.now)
            self._collect()

    def cut(self) -> None:
        """The kernel connection dies: bytes in flight are lost, both sides notice."""
        self.i2a.clear()
        self.a2i.clear()
        self.si.transport_lost(self.now)
        if self.sa is not None:
            self.sa.transport_lost(self.now)
        self.a_attached = False
        self.a_eof = False
        self._collect()

    def reconnect(self) -> None:
        if self.si.state.value != "resuming" or self.si.state.value == "closed":
            return
        self.i2a.clear()
        self.a2i.clear()
        self.a_attached = False
        self.a_eof = False
        if self.sa is not None:
            self.sa.transport_lost(self.now)
        self.si.new_transport(self.now)
        self._collect()

    def tick(self, dt: float) -> None:
        self.now += dt
        for s in (self.si, self.sa):
            if s is None:
                continue
            t = s.get_timer()
            if t is not None and t <= self.now:
                s.handle_timer(self.now)
        self._collect()

    def settle(self, rounds: int = 10_000) -> None:
        """Run with a healthy transport until nothing moves any more."""
        for _ in range(rounds):
            if self.si.state.value == "resuming" and not self.i2a and not self.a2i:
                self.reconnect()
            moved = bool(self.i2a or self.a2i or self.a_eof)
            self.deliver_i2a(1 << 20)
            self.deliver_a2i(1 << 20)
            for side in (self.i, self.a):
                s = side.session
                if s is not None and s.state.value in ("frozen", "probing"):
                    s.thaw(self.now, "test")
                    self._collect()
            if not moved:
                self.tick(self.cfg.ack_delay + 0.01)  # a delayed ACK is due by then
                if not (self.i2a or self.a2i):
                    return


# --- random scripts (hypothesis) ------------------------------------------------------------

# The operations every random script of a pair draws from, as (name, n): a write of n bytes
# by the initiator (wi) or the acceptor (wa), a delivery of n bytes in flight towards the
# acceptor (di) or the initiator (da), a cut, a reconnect, and n ms of fake time (tick).
COMMON_OPS = (
    st.tuples(st.just("wi"), st.integers(1, 70_000)),
    st.tuples(st.just("wa"), st.integers(1, 70_000)),
    st.tuples(st.just("di"), st.integers(1, 150_000)),
    st.tuples(st.just("da"), st.integers(1, 150_000)),
    st.tuples(st.just("cut"), st.just(0)),
    st.tuples(st.just("reconnect"), st.just(0)),
    st.tuples(st.just("tick"), st.integers(1, 500)),
)


def apply_common_op(p: Pair, op: str, n: int) -> bool:
    """Apply one of :data:`COMMON_OPS` to ``p``; False if ``op`` is not one of them (a
    test's own operation, which the test applies)."""
    if op == "wi":
        p.write(p.i, n)
    elif op == "wa":
        p.write(p.a, n)
    elif op == "di":
        p.deliver_i2a(n)
    elif op == "da":
        p.deliver_a2i(n)
    elif op == "cut":
        p.cut()
    elif op == "reconnect":
        p.reconnect()
    elif op == "tick":
        p.tick(n / 1000)
    else:
        return False
    return True
