"""The authenticated peer channel (manetkit/proxy/channel.py) through real sessions on a
fake clock (tests/proxy/sim.py): keys agreed at OPEN, a tag on every frame, RESUME only
with the session key's proof and the exact next epoch."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from manetkit.proxy import frames as fr
from manetkit.proxy.channel import (
    Ephemeral,
    Keyring,
    MeshKey,
    Refused,
    Tagger,
    early_key,
    session_keys,
    tombstone_reply,
)
from manetkit.proxy.session import Session, SessionConfig, State
from tests.proxy.sim import COMMON_OPS, Pair, apply_common_op, pattern, tokens

KEY = MeshKey(1, bytes(range(32)))
OTHER = MeshKey(2, bytes(range(1, 33)))


def records(stream: bytes) -> list[fr.Record]:
    reader = fr.FrameReader()
    reader.feed(stream)
    return list(iter(reader.next_record, None))


def complete(p: Pair) -> bool:
    return bytes(p.a.received) == pattern(0, p.i.written, p.i.salt) and bytes(
        p.i.received
    ) == pattern(0, p.a.written, p.a.salt)


def test_a_tag_binds_key_epoch_and_place_and_a_forgery_does_not_advance() -> None:
    frame = fr.tagged_header(fr.pack_ack(5, False), fr.TAGGED)
    tag = Tagger(b"k" * 32, 3).tag(frame)
    assert len(tag) == 16
    assert Tagger(b"k" * 32, 3).check(frame, tag)
    assert not Tagger(b"x" * 32, 3).check(frame, tag)  # another key
    assert not Tagger(b"k" * 32, 4).check(frame, tag)  # another transport
    rx = Tagger(b"k" * 32, 3)
    rx.seq = 1
    assert not rx.check(frame, tag)  # another place in the stream (a replay)
    rx = Tagger(b"k" * 32, 3)
    assert not rx.check(frame[:-1] + b"\x01", tag) and rx.seq == 0  # forged: no advance
    assert rx.check(frame, tag) and rx.seq == 1


def test_both_sides_derive_the_same_keys_and_the_mesh_key_changes_them() -> None:
    sid = bytes(16)
    a, b = Ephemeral(bytes([1]) * 32), Ephemeral(bytes([2]) * 32)
    k1 = session_keys(a.shared(b.public), None, sid, a.public, b.public)
    k2 = session_keys(b.shared(a.public), None, sid, a.public, b.public)
    assert k1 == k2 and k1.initiator != k1.acceptor
    assert session_keys(a.shared(b.public), KEY, sid, a.public, b.public) != k1
    assert early_key(KEY, sid, a.public) != early_key(OTHER, sid, a.public)
    assert "secret" not in repr(k1) and repr(KEY).count("\\x") == 0  # keys never shown


def test_a_public_key_of_low_order_is_refused() -> None:
    open_ = fr.pack_open(bytes([7]) * 16, 0, fr.ip_address("10.42.0.5"), 80, "elfn", 0, bytes(32))
    with pytest.raises(Refused) as r:
        Session.accept(0.0, records(open_)[0], token_bytes=tokens(), keyring=Keyring())
    assert r.value.counter == "bad_proof"


def test_a_hijacking_resume_is_refused_and_the_live_transport_is_untouched() -> None:
    """The attack: the session id travels in clear, so an attacker in radio range sends
    RESUME(sid, epoch 0xFFFFFFFF) from the initiator's address. Without the session key
    it has no valid tag: refused before the live transport is touched, and the transfer
    goes on (before the channel was authenticated, the acceptor adopted it, replayed
    the server's bytes to the attacker and locked the initiator out)."""
    p = Pair()
    p.write(p.i, 50_000)
    p.settle()
    sid = p.si.sid  # as seen on the air in OPEN
    for flags, tag in ((0, b""), (fr.TAGGED, bytes(16))):
        raw = fr.pack_resume(sid, 0xFFFFFFFF, 0, False)
        if flags:
            raw = fr.tagged_header(raw, flags) + tag
        with pytest.raises(Refused) as r:
            p.sa.check_hello(records(raw)[0])
        assert r.value.counter == "bad_proof" and not r.value.reply
    assert p.sa.epoch == 0 and p.sa.state is State.FLOWING
    p.write(p.i, 10_000)
    p.write(p.a, 7_000)
    p.settle()
    assert complete(p) and p.si.resumes == 0


def test_a_lost_answer_is_recovered_through_stale_with_the_exact_next_epoch() -> None:
    """RESUME(1) reaches the acceptor but its answer dies with the transport: the
    initiator (still at confirmed epoch 0) sends RESUME(1) again, the acceptor (at 1)
    answers with a tagged STALE(1), and the initiator dials RESUME(2), which is taken."""
    p = Pair()
    p.write(p.i, 5000)
    p.settle()
    p.cut()
    p.reconnect()
    p.deliver_i2a(len(p.i2a))  # RESUME(1) arrives and is taken ...
    assert p.sa.epoch == 1
    p.cut()  # ... its answer is lost
    p.reconnect()
    (again,) = [r.frame for r in records(bytes(p.i2a))]
    assert isinstance(again, fr.Resume) and again.epoch == 1
    p.deliver_i2a(len(p.i2a))
    assert p.refused == ["stale_epochs"] and p.sa.epoch == 1
    p.deliver_a2i(len(p.a2i))  # the STALE: the initiator drops that transport
    assert p.si.stale_epochs == 1 and p.i.dropped == ["acceptor is at epoch 1"]
    p.reconnect()
    (third,) = [r.frame for r in records(bytes(p.i2a))]
    assert isinstance(third, fr.Resume) and third.epoch == 2
    p.write(p.i, 3000)
    p.settle()
    assert complete(p) and p.sa.epoch == 2


def test_a_resume_lost_before_the_acceptor_is_sent_again_with_the_same_epoch() -> None:
    p = Pair()
    p.write(p.i, 5000)
    p.settle()
    for _ in range(3):  # three transports die before their RESUME arrives
        p.cut()
        p.reconnect()
        (r,) = [x.frame for x in records(bytes(p.i2a))]
        assert isinstance(r, fr.Resume) and r.epoch == 1
    p.settle()
    assert p.sa.epoch == 1 and p.refused == []
    p.write(p.i, 100)
    p.settle()
    assert complete(p)


def test_every_frame_after_the_handshake_carries_a_session_key_tag() -> None:
    p = Pair()
    p.write(p.i, 40_000)
    i2a = bytes(p.i2a)
    p.settle()
    p.write(p.a, 40_000)
    a2i = bytes(p.a2i)
    p.settle()
    first = records(i2a)
    # ephemeral keys: OPEN and the 0-RTT data before ACCEPT are untagged
    assert isinstance(first[0].frame, fr.Open) and first[0].flags == 0
    assert all(r.flags == fr.TAGGED for r in records(a2i))
    assert records(a2i)[0].frame.__class__ is fr.Data  # after ACCEPT: data, tagged
    assert complete(p)


def test_after_the_initiator_proved_the_key_untagged_frames_are_refused() -> None:
    """The 0-RTT window of ephemeral keys closes with the initiator's first tagged frame:
    an injected untagged DATA (an attacker who saw OPEN) is refused, nothing delivered."""
    p = Pair()
    p.write(p.i, 100)
    p.settle()
    assert p.sa.channel.peer_proved
    before = len(p.a.received)
    p.sa.transport_data(p.now, fr.pack_data(100, b"evil"))
    p._collect()
    assert len(p.a.received) == before and p.sa.bad_tags == 1
    assert p.a.dropped == ["untagged Data after the session key"]
    # and a repeated OPEN, which an attacker could copy from the air, is refused too
    p.cut()
    p.reconnect()
    p.settle()
    open_again = fr.pack_open(p.si.sid, 9, *p.si.dst, "elfn", 0, p.si.channel.pub_i)  # type: ignore[misc]
    with pytest.raises(Refused) as r:
        p.sa.check_hello(records(open_again)[0])
    assert r.value.counter == "bad_hellos"


def test_with_a_mesh_key_only_a_key_holder_opens_and_the_first_flight_is_tagged() -> None:
    p = Pair(mesh_key=KEY)
    p.write(p.i, 30_000)
    first = records(bytes(p.i2a))
    assert isinstance(first[0].frame, fr.Open) and first[0].frame.key_id == 1
    assert all(r.flags == fr.TAGGED | fr.EARLY for r in first)  # OPEN and 0-RTT data
    p.settle()
    p.write(p.a, 1000)
    p.eof(p.i)
    p.eof(p.a)
    p.settle()
    assert complete(p) and p.si.state is State.CLOSED and p.si.channel.mode == "psk (key 1)"
    # an acceptor with another key, or one that requires a key, refuses the OPEN
    for keyring, counter in (
        (Keyring((OTHER,)), "bad_proof"),
        (Keyring((MeshKey(1, bytes(32)),)), "bad_proof"),
    ):
        with pytest.raises(Refused) as r:
            Session.accept(0.0, first[0], token_bytes=tokens(), keyring=keyring)
        assert r.value.counter == counter
    plain = Pair()  # no mesh key at the initiator
    hello = records(bytes(plain.i2a))[0]
    with pytest.raises(Refused) as r:
        Session.accept(0.0, hello, token_bytes=tokens(), keyring=Keyring((KEY,)))
    assert r.value.counter == "refused_unauthenticated"
    assert (
        Session.accept(
            0.0, hello, token_bytes=tokens(), keyring=Keyring((KEY,), required=False)
        ).channel.mode
        == "ephemeral"
    )


def test_key_roll_over_any_listed_key_opens() -> None:
    p = Pair(mesh_key=OTHER, keyring=Keyring((KEY, OTHER)))
    p.write(p.i, 1000)
    p.settle()
    assert complete(p) and p.sa.channel.mesh == OTHER


def test_a_finished_session_answers_only_a_proven_resume() -> None:
    p = Pair()
    p.write(p.i, 100)
    p.eof(p.i)
    p.settle()
    p.eof(p.a)
    p.settle()
    assert p.sa.state is State.CLOSED
    tomb = p.sa.tombstone()
    assert tomb is not None
    forged = records(fr.pack_resume(p.si.sid, 5, 0, False))[0]
    assert tombstone_reply(tomb.keys, forged, p.si.sid, tomb.delivered) is None


def test_a_transport_starts_with_small_frames_then_16_kib() -> None:
    p = Pair()
    p.write(p.i, 100_000)
    sizes = [len(r.frame.payload) for r in records(bytes(p.i2a)) if isinstance(r.frame, fr.Data)]
    assert sizes[:5] == [2048, 4096, 8192, 16384, 16384]
    assert max(sizes) == fr.MAX_DATA


ops = st.lists(
    st.one_of(*COMMON_OPS),
    max_size=40,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_random_cuts_with_a_mesh_key_never_lose_or_duplicate(script: list[tuple[str, int]]) -> None:
    cfg = SessionConfig(replay_limit=200_000, partition_timeout=1e9, ack_every=8192)
    p = Pair(cfg, mesh_key=KEY)
    for op, n in script:
        assert apply_common_op(p, op, n)
        assert bytes(p.a.received) == pattern(0, len(p.a.received), 1)
        assert bytes(p.i.received) == pattern(0, len(p.i.received), 2)
    p.settle()
    p.eof(p.i)
    p.eof(p.a)
    p.settle()
    assert complete(p)
    assert p.si.state is State.CLOSED and p.sa.state is State.CLOSED
    assert p.si.bad_tags == 0 and p.sa.bad_tags == 0


def test_the_channel_bench_measures_the_tags_side_by_side() -> None:
    """``bench proxy --parts channel``: the tags cost 16 bytes per DATA frame on the wire
    (and CPU), the same for ephemeral and mesh keys."""
    from manetkit.bench.proxy_channel import bench_channel

    rows = {r["variant"]: r for r in bench_channel(2)}
    assert set(rows) == {"untagged", "ephemeral", "psk"}
    per_frame = 1e6 / fr.MAX_DATA * fr.TAG_LEN  # 16 bytes per 16 KiB frame, per MB
    extra = rows["ephemeral"]["wire_bytes_per_mb"] - rows["untagged"]["wire_bytes_per_mb"]
    assert per_frame * 0.95 < extra < per_frame * 1.1
    assert rows["psk"]["wire_bytes_per_mb"] == rows["ephemeral"]["wire_bytes_per_mb"]
    assert rows["ephemeral"]["cpu_s_per_mb"] > rows["untagged"]["cpu_s_per_mb"]
