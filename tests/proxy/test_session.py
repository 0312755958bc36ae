"""The resumable session protocol, driven without sockets or clocks (tests/proxy/sim.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from manetkit.proxy import frames as fr
from manetkit.proxy.channel import Refused, Tagger
from manetkit.proxy.session import (
    Closed,
    PeerBusy,
    SendBytes,
    Session,
    SessionConfig,
    SessionStateError,
    State,
)
from tests.proxy.sim import COMMON_OPS, DST, Pair, apply_common_op, pattern, sent, tokens


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


def frame_lengths(stream: bytes) -> list[int]:
    """The length on the wire of each whole frame in ``stream``."""
    out, at = [], 0
    while at + fr.HEADER.size <= len(stream):
        _, n = fr.HEADER.unpack_from(stream, at)
        out.append(fr.HEADER.size + n)
        at += fr.HEADER.size + n
    return out


def records(stream: bytes) -> list[fr.Record]:
    reader = fr.FrameReader()
    reader.feed(stream)
    return list(iter(reader.next_record, None))


def test_resume_replays_exactly_the_missing_range() -> None:
    p = Pair()
    p.write(p.i, 1000)
    p.deliver_i2a(len(p.i2a))  # OPEN + 1000 bytes arrive
    p.tick(1.0)  # acceptor's delayed ACK goes out ...
    p.deliver_a2i(len(p.a2i))  # ... and arrives: acked 1000
    assert p.si.acked == 1000
    p.deliver_i2a(len(p.i2a))  # the initiator's first frame under the session key
    p.write(p.i, 200)
    p.write(p.i, 300)
    # the first DATA frame and part of the second arrive, then the transport dies; a
    # tagged frame counts only once all of it is in, so nothing of the second is delivered
    first, second = frame_lengths(bytes(p.i2a))
    p.deliver_i2a(first + second - 10)
    got = len(p.a.received)
    assert got == 1200
    assert bytes(p.a.received) == expected(got, p.i.salt)
    p.cut()
    assert p.si.state is State.RESUMING
    p.reconnect()
    p.deliver_i2a(len(p.i2a))  # initiator's RESUME(epoch 1, delivered 0)
    # acceptor answers RESUME(epoch 1, delivered got) at once and the initiator replays
    assert p.sa.epoch == 1
    p.deliver_a2i(len(p.a2i))
    assert p.si.state is State.FLOWING and p.si.acked == got and p.si.sent == 1500
    # exactly one DATA frame carrying offsets got..1500
    data = [r.frame for r in records(bytes(p.i2a)) if isinstance(r.frame, fr.Data)]
    assert [(d.offset, len(d.payload)) for d in data] == [(got, 1500 - got)]
    p.settle()
    assert_complete(p)
    assert p.sa.duplicate_bytes == 0
    assert p.si.resumes == 1 and p.sa.resumes == 1


def flowing_pair() -> Pair:
    """Two sessions past OPEN/ACCEPT, 100 bytes written by the initiator and delivered,
    none acknowledged yet (the acceptor's ACK is delayed)."""
    p = Pair()
    p.write(p.i, 100)
    p.deliver_i2a(len(p.i2a))
    p.deliver_a2i(len(p.a2i))  # ACCEPT: the initiator switches to the session key
    p.deliver_i2a(len(p.i2a))
    assert p.si.acked == 0 and p.sa.delivered == 100
    return p


def test_duplicate_and_reordered_acks_are_harmless() -> None:
    p = flowing_pair()
    peer = p.sa.channel  # frames as the acceptor would tag them, in order
    for n in (60, 30, 60):
        p.si.transport_data(p.now, peer.seal(fr.pack_ack(n, False)))
    assert p.si.acked == 60 and p.si.replay_bytes == 40 and p.si.state is State.FLOWING
    for n in (100, 0):
        p.si.transport_data(p.now, peer.seal(fr.pack_ack(n, False)))
    assert p.si.acked == 100 and p.si.replay_bytes == 0


def test_ack_beyond_sent_is_a_protocol_error() -> None:
    p = flowing_pair()
    p.si.transport_data(p.now, p.sa.channel.seal(fr.pack_ack(101, False)))
    s = p.si
    assert s.state is State.CLOSED and s.malformed == 1
    out = s.next_event()  # the RESET goes out before the session reports itself closed
    assert isinstance(out, SendBytes) and out.data[0] & fr.TYPE_MASK == fr.FrameType.RESET
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
    # nothing was sent again: only the ACK that proves the session key follows
    assert [type(r.frame) for r in records(bytes(p.i2a[in_flight:]))] == [fr.Ack]
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
    cfg = SessionConfig(partition_timeout=3.0, idle_timeout=10.0)
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
    # the acceptor had an idle stream when the cut came (the 100 new bytes never reached
    # it): it waits the idle timeout, then gives up too, so no server connection waits
    # forever for an initiator that has gone
    assert p.sa.state is State.RESUMING
    for _ in range(70):
        p.tick(0.1)
    assert p.sa.state is State.CLOSED and "idle stream" in p.a.closed[0].reason


def test_an_idle_stream_rides_out_a_silence_longer_than_the_partition_timeout() -> None:
    """Nothing owed and no DATA for a while when the transport died (an iperf3 control
    connection during the test, a keep-alive HTTP connection): a plain TCP connection
    would not even notice the outage, so the session waits the idle timeout, not the
    partition timeout, and carries on once a transport is back."""
    p = Pair(SessionConfig(partition_timeout=3.0, idle_timeout=60.0))
    p.write(p.i, 100)
    p.settle()  # delivered and acknowledged, then idle for a long while
    p.cut()
    for _ in range(200):  # 20 s of outage
        p.tick(0.1)
    assert p.si.state is State.RESUMING and p.sa.state is State.RESUMING
    p.write(p.i, 100)
    p.settle()
    assert_complete(p)


def test_bytes_written_after_a_long_silence_get_the_whole_partition_timeout() -> None:
    """The debt's clock starts when the app writes, as a TCP retransmission timer starts
    with its segment: an idle stream whose app writes 10 s into an outage is not reset
    at once, but ``partition_timeout`` later if the peer is still silent."""
    p = Pair(SessionConfig(partition_timeout=3.0, idle_timeout=60.0))
    p.write(p.i, 100)
    p.settle()
    p.cut()
    for _ in range(100):
        p.tick(0.1)
    p.write(p.i, 1)
    for _ in range(25):
        p.tick(0.1)
    assert p.si.state is State.RESUMING
    for _ in range(10):
        p.tick(0.1)
    assert p.si.state is State.CLOSED and "idle" not in p.i.closed[0].reason


def test_a_moving_stream_is_reset_after_the_partition_timeout_with_nothing_owed() -> None:
    """The acceptor owes nothing but was receiving when the transport died: the peer
    likely owes it the rest, so the partition timeout applies (never left hanging)."""
    p = Pair(SessionConfig(partition_timeout=3.0, idle_timeout=60.0))
    p.write(p.i, 100)
    p.deliver_i2a(len(p.i2a))
    p.deliver_a2i(len(p.a2i))
    p.cut()
    for _ in range(40):
        p.tick(0.1)
    assert p.sa.state is State.CLOSED
    assert "partition timeout" in p.a.closed[0].reason and "idle" not in p.a.closed[0].reason


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


def test_a_malformed_frame_drops_the_transport_not_the_session() -> None:
    """Bytes that cannot be a frame (an injected segment) are counted and the transport
    dropped; the session resumes on a new one, so an injection cannot end it."""
    p = flowing_pair()
    p.sa.transport_data(p.now, fr.HEADER.pack(3, fr.MAX_BODY + 1))
    p._collect()
    assert p.sa.malformed == 1 and p.sa.state is State.RESUMING
    assert p.a.dropped and "malformed" in p.a.dropped[0]
    p.write(p.i, 5000)
    p.settle()
    assert_complete(p)


def test_a_frame_with_a_bad_tag_drops_the_transport() -> None:
    p = flowing_pair()
    forged = bytearray(p.si.channel.seal(fr.pack_ack(0, False)))
    forged[-1] ^= 1
    p.sa.transport_data(p.now, bytes(forged))
    p._collect()
    assert p.sa.bad_tags == 1 and p.a.dropped == ["Ack's tag does not verify"]
    p.write(p.i, 5000)
    p.settle()
    assert_complete(p)


def test_unknown_frame_types_are_skipped() -> None:
    p = flowing_pair()
    p.sa.transport_data(p.now, p.si.channel.seal(fr.HEADER.pack(60, 3) + b"abc"))
    assert p.sa.unknown_frames == 1 and p.sa.state is State.FLOWING


def test_a_replayed_or_stale_resume_does_not_displace_the_live_transport() -> None:
    p = flowing_pair()
    p.cut()
    p.reconnect()
    resume_1 = records(bytes(p.i2a))[0]  # captured on the air
    p.settle()
    assert p.sa.epoch == 1
    # the same RESUME again: the proof is good but the epoch is not the next one
    with pytest.raises(Refused) as stale:
        p.sa.check_hello(resume_1)
    assert stale.value.counter == "stale_epochs"
    assert records(stale.value.reply)[0].frame == fr.Stale(p.si.sid, 1)
    # a RESUME with any epoch but no session key: refused before anything else
    for epoch in (2, 0xFFFFFFFF):
        forged = records(fr.pack_resume(p.si.sid, epoch, 0, False))[0]
        with pytest.raises(Refused, match="proof") as bad:
            p.sa.check_hello(forged)
        assert bad.value.counter == "bad_proof"


def test_open_retried_when_the_first_transport_died_unanswered() -> None:
    p = Pair()
    p.write(p.i, 100)
    p.cut()  # OPEN never reached the acceptor
    p.reconnect()
    reader = fr.FrameReader()
    reader.feed(p.i2a)
    rec = reader.peek()
    assert rec is not None and isinstance(rec.frame, fr.Open) and rec.frame.epoch == 1
    p.settle()
    assert_complete(p)


def test_a_busy_acceptor_ends_the_transport_and_the_open_is_made_again() -> None:
    """BUSY (the acceptor is at a session limit, it took nothing) ends this transport
    and asks for a later dial; the OPEN and its 0-RTT bytes go out again on the next
    one, and nothing is lost."""
    p = Pair()
    p.write(p.i, 300)
    p.i2a.clear()  # the acceptor's shell refused the OPEN before any session existed
    p.si.transport_data(p.now, fr.pack_busy(250))
    events = list(iter(p.si.next_event, None))
    assert events == [PeerBusy(0.25)]
    assert p.si.state is State.RESUMING and p.si.busy_answers == 1
    p.reconnect()
    (hello, *_) = records(bytes(p.i2a))
    assert isinstance(hello.frame, fr.Open) and hello.frame.epoch == 1
    p.settle()
    assert_complete(p)


def test_a_busy_acceptor_does_not_hold_the_app_past_the_partition_timeout() -> None:
    """A BUSY is no word from the session: an acceptor that stays full resets the app
    after the partition timeout, as a route that stays broken does."""
    p = Pair(SessionConfig(partition_timeout=3.0))
    p.write(p.i, 100)
    for _ in range(5):
        p.i2a.clear()
        p.si.transport_data(p.now, fr.pack_busy(250))
        p._collect()
        p.tick(0.5)
        p.reconnect()
    for _ in range(10):
        p.tick(0.1)
    assert p.si.state is State.CLOSED and p.si.busy_answers == 5
    assert "partition timeout" in p.i.closed[0].reason


def test_busy_sent_to_an_acceptor_is_a_protocol_error() -> None:
    p = flowing_pair()
    p.sa.transport_data(p.now, p.si.channel.seal(fr.pack_busy(1)))
    p._collect()
    assert p.sa.state is State.CLOSED and "BUSY to an acceptor" in p.a.closed[0].reason


ops = st.lists(
    st.one_of(
        *COMMON_OPS,
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
        if not apply_common_op(p, op, n):  # then one of the session's own operations
            if op == "freeze" and p.si.state is State.FLOWING:
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
    p = flowing_pair()
    p.cut()
    p.reconnect()  # RESUME, epoch 1
    keys = p.si.channel.keys
    assert keys is not None
    answer = Tagger(keys.acceptor, 1)  # the acceptor's first frame on that transport
    reply = fr.tagged_header(fr.pack_resume(p.si.sid, 1, 999, False), fr.TAGGED)
    p.si.transport_data(1.0, reply + answer.tag(reply))
    (ev,) = [e for e in iter(p.si.next_event, None) if not isinstance(e, SendBytes)]
    assert isinstance(ev, Closed) and not ev.clean
    assert "peer delivered 999 outside [0, 100]" in ev.reason
