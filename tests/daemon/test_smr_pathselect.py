"""SMR path selection (manetkit.daemon.engines.smr.pathselect) on hand-built topologies.

Nodes are small ints; a path runs source first, destination last (Lim/Xu/Gerla V-B).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from manetkit.daemon.engines.smr.pathselect import (
    Mode,
    PathSet,
    select_replies,
    shared_nodes,
    uses_link,
)

S, D = 0, 99


def test_shared_nodes_counts_intermediates_only() -> None:
    assert shared_nodes((S, 1, 2, D), (S, 2, 3, D)) == 1
    assert shared_nodes((S, 1, D), (S, 2, D)) == 0  # the ends never count
    assert shared_nodes((S, D), (S, 1, D)) == 0


def test_backup2_picks_the_maximally_disjoint_path() -> None:
    # Ladder: first copy came over 1-2-3; the later copies share 2 nodes, 1 node, none.
    first = (S, 1, 2, 3, D)
    later = [(S, 1, 2, 6, D), (S, 1, 5, 6, 7, D), (S, 4, 5, 6, 7, 8, D)]
    assert select_replies(Mode.BACKUP2, first, later, 1) == [(S, 4, 5, 6, 7, 8, D)]


def test_disjoint_ties_go_to_fewer_hops_then_arrival() -> None:
    first = (S, 1, 2, D)
    later = [(S, 3, 4, 5, D), (S, 6, 7, D), (S, 8, 9, D)]  # all disjoint
    assert select_replies(Mode.BACKUP2, first, later, 1) == [(S, 6, 7, D)]  # 3 hops, earlier
    assert select_replies(Mode.CONCURRENT, first, later, 2) == [(S, 6, 7, D), (S, 8, 9, D)]


def test_disjointness_beats_hops() -> None:
    first = (S, 1, 2, D)
    later = [(S, 1, D), (S, 3, 4, 5, 6, D)]  # the short one shares node 1
    assert select_replies(Mode.BACKUP2, first, later, 1) == [(S, 3, 4, 5, 6, D)]


def test_third_path_is_disjoint_from_both_chosen() -> None:
    first = (S, 1, 2, D)
    later = [(S, 3, 4, D), (S, 3, 5, D), (S, 6, 4, D), (S, 7, 8, 9, D)]
    # second: (S,3,4,D) (disjoint, 3 hops, first to arrive); third must avoid 1,2,3,4.
    got = select_replies(Mode.BACKUP2, first, later, 2)
    assert got == [(S, 3, 4, D), (S, 7, 8, 9, D)]


def test_backup1_picks_shortest_hop_ignoring_overlap() -> None:
    first = (S, 1, 2, 3, D)  # the shortest-delay path, already answered
    later = [(S, 1, 2, 3, 4, D), (S, 1, 5, D), (S, 6, 7, D)]
    assert select_replies(Mode.BACKUP1, first, later, 1) == [(S, 1, 5, D)]
    assert select_replies(Mode.BACKUP1, first, later, 2) == [(S, 1, 5, D), (S, 6, 7, D)]


def test_first_path_and_duplicates_are_never_chosen_again() -> None:
    first = (S, 1, D)
    assert select_replies(Mode.BACKUP1, first, [first, first], 1) == []
    assert select_replies(Mode.BACKUP2, first, [(S, 2, D), (S, 2, D)], 3) == [(S, 2, D)]


def test_scheme1_swaps_on_a_shorter_second_reply() -> None:
    ps: PathSet[int] = PathSet(Mode.BACKUP1, 2)
    added, sw = ps.offer(0.0, (S, 1, 2, 3, D))
    assert added and sw is not None and sw.reason == "first-reply"
    added, sw = ps.offer(0.1, (S, 4, 5, D))
    assert added and sw is not None
    assert (sw.old, sw.new, sw.reason) == ((S, 1, 2, 3, D), (S, 4, 5, D), "shorter-reply")
    assert ps.paths() == [(S, 4, 5, D), (S, 1, 2, 3, D)]


def test_scheme1_keeps_primary_on_equal_or_longer_reply() -> None:
    ps: PathSet[int] = PathSet(Mode.BACKUP1, 2)
    ps.offer(0.0, (S, 1, D))
    _, sw = ps.offer(0.1, (S, 2, D))
    assert sw is None and ps.primary == (S, 1, D)


def test_scheme2_never_swaps() -> None:
    ps: PathSet[int] = PathSet(Mode.BACKUP2, 2)
    ps.offer(0.0, (S, 1, 2, 3, D))
    _, sw = ps.offer(0.1, (S, 4, D))
    assert sw is None
    assert ps.primary == (S, 1, 2, 3, D)
    assert ps.paths()[1] == (S, 4, D)


def test_cut_switches_to_backup_and_reports_both_paths() -> None:
    ps: PathSet[int] = PathSet(Mode.BACKUP1, 2)
    ps.offer(0.0, (S, 1, D))
    ps.offer(0.1, (S, 2, 3, D))
    gone, sw = ps.cut(D, 1)  # reversed link direction still matches
    assert gone == [(S, 1, D)]
    assert sw is not None and (sw.old, sw.new) == ((S, 1, D), (S, 2, 3, D))
    gone, sw = ps.cut(2, 3)
    assert gone == [(S, 2, 3, D)] and sw is None and ps.route() is None


def test_cut_of_a_backup_is_no_switch() -> None:
    ps: PathSet[int] = PathSet(Mode.BACKUP2, 2)
    ps.offer(0.0, (S, 1, D))
    ps.offer(0.1, (S, 2, D))
    gone, sw = ps.cut(S, 2)
    assert gone == [(S, 2, D)] and sw is None and ps.primary == (S, 1, D)


def test_full_set_replaces_the_oldest_backup() -> None:
    ps: PathSet[int] = PathSet(Mode.BACKUP2, 3)
    ps.offer(0.0, (S, 1, D))
    ps.offer(1.0, (S, 2, D))
    ps.offer(2.0, (S, 3, D))
    ps.offer(3.0, (S, 4, D))
    assert ps.paths() == [(S, 1, D), (S, 3, D), (S, 4, D)]


def test_concurrent_round_robin_alternates() -> None:
    ps: PathSet[int] = PathSet(Mode.CONCURRENT, 2)
    ps.offer(0.0, (S, 1, D))
    ps.offer(0.0, (S, 2, D))
    got = [ps.route() for _ in range(4)]
    assert got == [(S, 2, D), (S, 1, D), (S, 2, D), (S, 1, D)]


def test_avoid_moves_primary_off_a_predicted_link() -> None:
    ps: PathSet[int] = PathSet(Mode.BACKUP2, 3)
    ps.offer(0.0, (S, 1, D))
    assert ps.avoid(S, 1) is None  # no backup
    ps.offer(0.1, (S, 1, 2, D))  # also through the failing link S-1
    ps.offer(0.2, (S, 3, D))
    assert ps.avoid(S, 3) is None  # the primary does not use S-3
    sw = ps.avoid(1, S)
    assert sw is not None and (sw.old, sw.new) == ((S, 1, D), (S, 3, D))
    assert ps.paths() == [(S, 3, D), (S, 1, 2, D), (S, 1, D)]


paths_st = st.lists(
    st.lists(st.integers(1, 12), min_size=0, max_size=5, unique=True).map(lambda m: (S, *m, D)),
    min_size=1,
    max_size=8,
)


@given(paths_st, st.integers(1, 4), st.sampled_from(list(Mode)))
def test_selection_properties(candidates, count, mode) -> None:
    first, later = candidates[0], candidates[1:]
    got = select_replies(mode, first, later, count)
    assert len(got) == len(set(got)) <= count
    assert first not in got and all(p in later for p in got)
    if got and mode is not Mode.BACKUP1:
        best = min(shared_nodes(first, p) for p in later if p != first)
        assert shared_nodes(first, got[0]) == best
    if got and mode is Mode.BACKUP1:
        assert len(got[0]) == min(len(p) for p in later if p != first)


@given(paths_st, st.integers(1, 4), st.sampled_from(list(Mode)))
def test_pathset_never_exceeds_limit(candidates, limit, mode) -> None:
    ps: PathSet[int] = PathSet(mode, limit)
    for i, p in enumerate(candidates):
        ps.offer(float(i), p)
        assert len(ps.paths()) <= limit and len(set(ps.paths())) == len(ps.paths())
    for p in list(ps.paths()):
        ps.cut(p[0], p[1])
        assert all(not uses_link(q, p[0], p[1]) for q in ps.paths())


def test_expire_drops_stale_alternates_never_the_primary() -> None:
    ps: PathSet[int] = PathSet(Mode.BACKUP2, limit=3)
    ps.offer(0.0, (S, 1, D))  # primary
    ps.offer(1.0, (S, 2, D))
    ps.offer(4.0, (S, 3, D))
    assert ps.next_expiry(5.0) == 6.0
    assert ps.expire(5.999, 5.0) == []
    assert ps.expire(6.0, 5.0) == [(S, 2, D)]  # exactly when next_expiry said
    assert ps.paths() == [(S, 1, D), (S, 3, D)]
    ps.offer(8.0, (S, 3, D))  # a new reply confirms it: its age restarts
    assert ps.expire(12.0, 5.0) == [] and ps.next_expiry(5.0) == 13.0
    assert ps.expire(100.0, 5.0) == [(S, 3, D)]
    assert ps.paths() == [(S, 1, D)] and ps.next_expiry(5.0) is None  # primary kept


def test_concurrent_paths_all_carry_data_and_never_expire() -> None:
    ps: PathSet[int] = PathSet(Mode.CONCURRENT, limit=2)
    ps.offer(0.0, (S, 1, D))
    ps.offer(0.0, (S, 2, D))
    assert ps.expire(1000.0, 5.0) == [] and ps.next_expiry(5.0) is None
    assert len(ps.paths()) == 2
