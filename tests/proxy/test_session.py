"""The resumable session protocol, driven without sockets or clocks (tests/proxy/sim.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from manetkit.proxy import frames as fr
from manetkit.proxy.session import (
    Closed,
    Role,
    SendBytes,
    Session,
    SessionConfig,
    SessionStateError,
    State,
)
from tests.proxy.sim import DST, Pair, pattern, sent, tokens


def expected(side_written: int, salt: int) -> bytes:
    return pattern(0, side_written, salt)


def assert_complete(p: Pair) -> None:
    assert bytes(p.a.received) == expected(p.i.written, p.i.salt)
    assert bytes(p.i.received) == expected(p.a.written, p.a.salt)


def test_plain_transfer_and_clean_close() -> None:
    p = Pair()
    p.write(p.i, 200_000)
    p.eof(p.i)
    p.settle()
    p.write(p.a, 5_000)
    p.eof(p.a)
    p.settle()
    assert_complete(p)
    assert p.i.eof == 1 and p.a.eof == 1
    assert p.si.state is State.CLOSED and p.sa.state is State.CLOSED
    assert p.i.closed == [Closed("done", True)] and p.a.closed == [Closed("done", True)]


def test_resume_replays_exactly_the_missing_range() -> None:
    p = Pair()
    p.write(p.i, 1000)
    p.deliver_i2a(len(p.i2a))  # OPEN + 1000 bytes arrive
    p.tick(1.0)  # acceptor's delayed ACK goes out ...
    p.deliver_a2i(len(p.a2i))  # ... and arrives: acked 1000
    assert p.si.acked == 1000
    p.write(p.i, 200)
    p.write(p.i, 300)
    frame_hdr = fr.HEADER.size + 8
    # the first DATA frame and part of the second arrive, then the transport dies;
    # the part of the second frame that arrived is delivered at once (streaming)
    p.deliver_i2a(frame_hdr + 200 + frame_hdr + 100)
    got = len(p.a.received)
    assert 1200 < got < 1300
    assert bytes(p.a.received) == expected(got, p.i.salt)
    p.cut()
    assert p.si.state is State.RESUMING
    p.reconnect()
    p.deliver_i2a(len(p.i2a))  # initiator's RESUME(epoch 1, delivered 0)
    # acceptor answers RESUME(epoch 1, delivered got) at once and the initiator replays
    assert p.sa.epoch == 1
    p.deliver_a2i(len(p.a2i))
    assert p.si.state is State.FLOWING and p.si.acked == got and p.si.sent == 1500
    replay = bytes(p.i2a)
    # exactly one DATA frame carrying offsets got..1500
    reader = fr.FrameReader()
    reader.feed(replay)
    frames = []
    while (f := reader.next_frame()) is not None:
        frames.append(f)
    data = [f for f in frames if isinstance(f, fr.Data)]
    assert [(d.offset, len(d.payload)) for d in data] == [(got, 1500 - got)]
    p.settle()
    assert_complete(p)
    assert p.sa.duplicate_bytes == 0
    assert p.si.resumes == 1 and p.sa.resumes == 1


def test_duplicate_and_reordered_acks_are_harmless() -> None:
    s = Session.initiate(0.0, DST, "elfn", token_bytes=tokens())
    s.new_transport(0.0)
    s.app_data(0.0, b"x" * 100)
    sent(s)
    s.transport_data(0.0, fr.pack_resume(s.sid, 0, 0, False))
    s.transport_data(0.0, fr.pack_ack(60, False) + fr.pack_ack(30, False) + fr.pack_ack(60, False))
    assert s.acked == 60 and s.replay_bytes == 40 and s.state is State.FLOWING
    s.transport_data(0.0, fr.pack_ack(100, False) + fr.pack_ack(0, False))
    assert s.acked == 100 and s.replay_bytes == 0


def test_ack_beyond_sent_is_a_protocol_error() -> None:
    s = Session.initiate(0.0, DST, "elfn", token_bytes=tokens())
    s.new_transport(0.0)
    s.app_data(0.0, b"x" * 10)
    sent(s)
    s.transport_data(0.0, fr.pack_ack(11, False))
    assert s.state is State.CLOSED and s.malformed == 1
    out = s.next_event()  # the RESET goes out before the session reports itself closed
    assert isinstance(out, SendBytes) and out.data[:1] == bytes([fr.FrameType.RESET])
    ev = s.next_event()
    assert isinstance(ev, Closed) and not ev.clean and "beyond sent" in ev.reason
    assert s.next_event() is None


def test_resume_reply_racing_data_in_flight_does_not_rewind() -> None:
    """The acceptor's RESUME for epoch 0 arrives after the initiator sent more data."""
    p = Pair()
    p.write(p.i, 100)
    # the acceptor answers OPEN with RESUME(0, delivered 0) before it reads the data
    p.deliver_i2a(len(p.i2a))
    p.write(p.i, 100_000)  # more data is in flight when that answer arrives
    in_flight = len(p.i2a)
    p.deliver_a2i(len(p.a2i))
    assert p.si.sent == 100_100 and p.si.acked == 0
    assert len(p.i2a) == in_flight  # nothing was sent again
    p.settle()
    assert_complete(p)
    assert p.sa.duplicate_bytes == 0


def test_fin_lost_in_a_cut_is_sent_again_after_resume() -> None:
    p = Pair()
    p.write(p.i, 5000)
    p.eof(p.i)
    p.deliver_i2a(len(p.i2a) - fr.HEADER.size - 8)  # everything but the FIN
    assert p.a.eof == 0 and len(p.a.received) == 5000
    p.cut()
    p.reconnect()
    p.settle()
    assert p.a.eof == 1
    assert bytes(p.a.received) == expected(5000, 1)
    p.eof(p.a)
    p.settle()
    assert p.si.state is State.CLOSED and p.sa.state is State.CLOSED
    assert p.i.closed[-1].clean and p.a.closed[-1].clean


def test_back_pressure_when_the_replay_buffer_is_full() -> None:
    cfg = SessionConfig(replay_limit=10_000, partition_timeout=1e9)
    p = Pair(cfg)
    p.write(p.i, 6000)
    p.write(p.i, 6000)
    assert not p.si.can_accept_app_data()
    p.write(p.i, 6000)  # refused by the pair, as the shell would stop reading
    assert p.i.written == 12_000
    p.deliver_i2a(len(p.i2a))
    p.deliver_a2i(len(p.a2i))  # the hello answer acknowledges nothing yet (delivered 0)
    p.tick(1.0)
    p.deliver_a2i(len(p.a2i))
    assert p.si.acked == 12_000 and p.si.can_accept_app_data()


def test_refused_transitions_name_themselves() -> None:
    s = Session.initiate(0.0, DST, "elfn", token_bytes=tokens())
    s.new_transport(0.0)
    with pytest.raises(SessionStateError, match="refused thaw in state FLOWING"):
        s.thaw(0.0, "route-up")
    s.transport_lost(0.0)
    with pytest.raises(SessionStateError, match="refused freeze in state RESUMING"):
        s.freeze(0.0, "route-down")
    s.reset(0.0, "test")
    with pytest.raises(SessionStateError, match="refused app_data in state CLOSED"):
        s.app_data(0.0, b"x")


def test_elfn_freeze_holds_data_and_probe_thaws() -> None:
    p = Pair()
    p.write(p.i, 10)
    p.settle()
    p.si.freeze(p.now, "route-down")
    p.write(p.i, 1000)
    assert fr.FrameType.DATA not in p.i2a[:1]  # nothing but maybe ACKs
    assert p.si.sent == 10
    p.si.probe(p.now)
    p._collect()
    assert p.si.state is State.PROBING
    p.deliver_i2a(len(p.i2a))
    p.deliver_a2i(len(p.a2i))  # PROBE_ACK
    assert p.si.state is State.FLOWING and p.si.sent == 1010
    p.settle()
    assert_complete(p)
    assert p.si.probes == 1


def test_partition_timeout_resets_with_a_reason() -> None:
    cfg = SessionConfig(partition_timeout=3.0)
    p = Pair(cfg)
    p.write(p.i, 100)
    p.settle()
    p.write(p.i, 100)
    p.cut()
    for _ in range(40):
        p.tick(0.1)
    assert p.si.state is State.CLOSED
    (closed,) = p.i.closed
    assert not closed.clean and "partition timeout" in closed.reason
    # the acceptor has no transport either: it gives up too, so no server connection
    # waits forever for an initiator that has gone
    assert p.sa.state is State.CLOSED and "partition timeout" in p.a.closed[0].reason


def test_idle_session_is_not_timed_out_by_a_quiet_peer() -> None:
    cfg = SessionConfig(partition_timeout=3.0)
    p = Pair(cfg)
    p.write(p.i, 100)
    p.settle()
    for _ in range(100):  # 10 s of keepalives
        p.tick(0.1)
        p.deliver_i2a(1 << 20)
        p.deliver_a2i(1 << 20)
    assert p.si.state is State.FLOWING and p.sa.state is State.FLOWING


def test_malformed_length_is_counted_and_resets() -> None:
    s = Session(Role.ACCEPTOR, b"\x01" * 16, 0.0, token_bytes=tokens())
    s.new_transport(0.0)
    s.transport_data(0.0, fr.HEADER.pack(3, fr.MAX_BODY + 1))
    assert s.state is State.CLOSED and s.malformed == 1


def test_unknown_frame_types_are_skipped() -> None:
    p = Pair()
    p.write(p.i, 10)
    p.settle()
    p.sa.transport_data(p.now, fr.HEADER.pack(99, 3) + b"abc")
    assert p.sa.unknown_frames == 1 and p.sa.state is State.FLOWING


def test_stale_transport_does_not_displace_the_live_one() -> None:
    p = Pair()
    p.write(p.i, 10)
    p.settle()
    p.cut()
    p.reconnect()
    p.settle()
    assert p.sa.epoch == 1
    old = fr.Resume(p.si.sid, 1, 0, False)
    assert not p.sa.accepts_hello(old)
    assert p.sa.accepts_hello(fr.Resume(p.si.sid, 2, 0, False))


def test_open_retried_when_the_first_transport_died_unanswered() -> None:
    p = Pair()
    p.write(p.i, 100)
    p.cut()  # OPEN never reached the acceptor
    p.reconnect()
    reader = fr.FrameReader()
    reader.feed(p.i2a)
    assert isinstance(reader.peek(), fr.Open)  # OPEN again, epoch 1
    p.settle()
    assert_complete(p)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("wi"), st.integers(1, 70_000)),
        st.tuples(st.just("wa"), st.integers(1, 70_000)),
        st.tuples(st.just("di"), st.integers(1, 150_000)),
        st.tuples(st.just("da"), st.integers(1, 150_000)),
        st.tuples(st.just("cut"), st.just(0)),
        st.tuples(st.just("reconnect"), st.just(0)),
        st.tuples(st.just("tick"), st.integers(1, 500)),
        st.tuples(st.just("freeze"), st.just(0)),
        st.tuples(st.just("probe"), st.just(0)),
        st.tuples(st.just("eofi"), st.just(0)),
        st.tuples(st.just("eofa"), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_random_cuts_never_lose_or_duplicate(script: list[tuple[str, int]]) -> None:
    """Whatever the cuts, slices and freezes, each side receives exactly what was sent."""
    cfg = SessionConfig(replay_limit=200_000, partition_timeout=1e9, ack_every=8192)
    p = Pair(cfg)
    for op, n in script:
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
        elif op == "freeze" and p.si.state is State.FLOWING:
            p.si.freeze(p.now, "route-down")
        elif op == "probe" and p.si.state in (State.FROZEN, State.PROBING):
            p.si.probe(p.now)
            p._collect()
        elif op == "eofi":
            p.eof(p.i)
        elif op == "eofa":
            p.eof(p.a)
        # every prefix: nothing delivered that was not sent, in order
        assert bytes(p.a.received) == expected(len(p.a.received), 1)
        assert bytes(p.i.received) == expected(len(p.i.received), 2)
    p.settle()
    p.eof(p.i)
    p.eof(p.a)
    p.settle()
    assert_complete(p)
    assert p.i.eof == 1 and p.a.eof == 1
    assert p.si.state is State.CLOSED and p.sa.state is State.CLOSED
    assert all(c.clean for c in p.i.closed + p.a.closed)
    assert p.stale == 0


def test_session_ids_and_probe_nonces_come_from_the_injected_source(monkeypatch) -> None:
    import os
    import secrets

    def boom(n: int) -> bytes:
        raise AssertionError("the session must not draw its own randomness")

    monkeypatch.setattr(os, "urandom", boom)
    monkeypatch.setattr(secrets, "token_bytes", boom)
    a, b, c = Pair(seed=3), Pair(seed=3), Pair(seed=4)
    assert a.si.sid == b.si.sid != c.si.sid
    for p in (a, b):
        p.si.freeze(p.now, "route-down")
        p.si.probe(p.now)
    assert sent(a.si) == sent(b.si)  # the same PROBE nonce


def test_a_data_frame_is_delivered_as_its_bytes_arrive() -> None:
    """A 64 KiB DATA frame over a slow leg must not wait for its last segment: each
    slice is delivered at once, in order, exactly once (the 1.2 s stall after RESUME)."""
    p = Pair()
    p.write(p.i, 60_000)  # one DATA frame (MAX_DATA is 64 KiB)
    p.deliver_i2a(100)  # OPEN and the frame's first bytes
    first = len(p.a.received)
    assert first > 0
    sizes = [first]
    while p.i2a:
        p.deliver_i2a(1448)
        sizes.append(len(p.a.received))
    assert sizes == sorted(sizes) and len(set(sizes)) > 40  # grew with every segment
    assert bytes(p.a.received) == expected(60_000, p.i.salt)
    assert p.sa.duplicate_bytes == 0


def test_the_reader_splits_a_data_frame_and_keeps_the_rest_framed() -> None:
    stream = fr.pack_data(1000, b"a" * 50) + fr.pack_ack(7, False)
    reader = fr.FrameReader()
    got = []
    for i in range(len(stream)):
        reader.feed(stream[i : i + 1])
        while (f := reader.next_frame()) is not None:
            got.append(f)
    data = [f for f in got if isinstance(f, fr.Data)]
    assert b"".join(d.payload for d in data) == b"a" * 50
    assert [d.offset for d in data] == list(range(1000, 1050))
    assert got[-1] == fr.Ack(7, False)


def test_a_hello_reply_claiming_bytes_never_sent_names_the_offsets() -> None:
    """The initiator's answer check reports the offending offsets (and is stamped with
    ``now``), so the log line says what the peer claimed."""
    s = Session.initiate(0.0, DST, "elfn", token_bytes=tokens())
    s.new_transport(0.0)
    s.app_data(0.0, b"x" * 10)
    sent(s)
    s.transport_data(1.0, fr.pack_resume(s.sid, 0, 999, False))
    (ev,) = [e for e in iter(s.next_event, None) if not isinstance(e, SendBytes)]
    assert isinstance(ev, Closed) and not ev.clean
    assert "peer delivered 999 outside [0, 10]" in ev.reason
