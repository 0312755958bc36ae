"""Property tests of AODV's route table (RFC 3561 6.1, 6.2, 6.11): whatever order
updates, neighbour contacts and expiry come in, the freshness rule holds."""

from __future__ import annotations

from ipaddress import IPv4Address

from hypothesis import given
from hypothesis import strategies as st

from manetkit.daemon.engines.aodv.routetable import (
    INVALID,
    REPAIRING,
    VALID,
    RouteTable,
    seq_newer,
    seq_next,
)

DST = IPv4Address("10.42.0.9")
HOPS = [IPv4Address(f"10.42.0.{i}") for i in range(1, 5)]
seqs = st.integers(0, 0xFFFFFFFF)

update = st.tuples(
    st.just("update"), st.sampled_from(HOPS), st.integers(1, 20), seqs, st.floats(0.1, 10)
)
touch = st.tuples(st.just("touch"), st.sampled_from(HOPS + [DST]))
tick = st.tuples(st.just("tick"), st.floats(0, 20))


@given(seqs, seqs)
def test_seq_newer_is_antisymmetric_and_seq_next_is_newer_and_never_zero(a, b):
    assert not (seq_newer(a, b) and seq_newer(b, a))
    assert not seq_newer(a, a)
    assert seq_next(a) != 0
    if a != 0xFFFFFFFF:
        assert seq_newer(seq_next(a), a)


@given(st.lists(st.one_of(update, touch, tick), max_size=40))
def test_an_update_never_makes_a_known_number_older_or_a_valid_route_longer(ops):
    table = RouteTable()
    now = 0.0
    for op in ops:
        before = table.get(DST.packed)
        snap = None if before is None else (before.seq, before.valid_seq, before.state, before.hops)
        if op[0] == "update":
            _, nh, hops, seq, life = op
            got = table.update(now, DST, nh, hops, seq, life)
            r = table.get(DST.packed)
            assert r is not None
            if got is None:
                # refused: the entry is untouched
                assert snap == (r.seq, r.valid_seq, r.state, r.hops)
            else:
                assert got[0] is r and r.state is VALID and r.seq == seq and r.valid_seq
                assert r.expires >= now + life - 1e-9
                if snap is not None and snap[1]:
                    old_seq, _, old_state, old_hops = snap
                    # 6.2: only newer, or equal and (invalid before or shorter)
                    assert seq_newer(seq, old_seq) or (
                        seq == old_seq and (old_state is not VALID or hops < old_hops)
                    )
        elif op[0] == "touch":
            nb = op[1]
            r, _was = table.touch_neighbour(now, nb, 3.0)
            assert r.state is VALID and r.next_hop == nb and r.hops == 1
            assert r.dst == nb
        else:
            now += op[1]
            seq_before = None if before is None else before.seq
            state_before = None if before is None else before.state
            due = before is not None and before.expires <= now
            table.expire(now, 15.0)
            r = table.get(DST.packed)
            if before is not None and state_before is VALID and due:
                # expired: invalid now, its number bumped if it was known (6.1)
                assert r is before and r.state is INVALID
                if before.valid_seq:
                    assert r.seq == seq_next(seq_before)
                assert not r.precursors
        for r in table:
            assert r.state in (VALID, INVALID, REPAIRING)
            assert r.next_hop_b == r.next_hop.packed and r.dst_b == r.dst.packed


def test_expiry_invalidates_then_deletes_and_leaves_repairs_alone():
    table = RouteTable()
    r, was = table.update(0.0, DST, HOPS[0], 2, 7, 3.0)  # type: ignore[misc]
    assert was is None
    other, _ = table.touch_neighbour(0.0, HOPS[1], 3.0)
    other.state = REPAIRING
    assert table.expire(2.9, 15.0) == 0 and r.state is VALID
    assert table.expire(3.0, 15.0) == 1
    assert r.state is INVALID and r.seq == 8 and r.expires == 18.0
    assert other.state is REPAIRING  # 6.12: the repair decides, not the lifetime
    table.expire(18.0, 15.0)
    assert table.get(DST.packed) is None and table.get(HOPS[1].packed) is other
    # an invalid entry takes the same number back (it is invalid), a valid one does not
    r, _ = table.update(20.0, DST, HOPS[0], 3, 8, 3.0)  # type: ignore[misc]
    assert table.update(20.5, DST, HOPS[2], 3, 8, 3.0) is None
    assert table.update(20.5, DST, HOPS[2], 2, 8, 3.0) is not None and r.next_hop == HOPS[2]
