"""The flap benchmark's arithmetic (manetkit/bench/flap.py): no network needed."""

from __future__ import annotations

import hashlib

from manetkit.bench.flap import BLOCK, goodput_kbps, recoveries, stream_block, stream_sha256


def test_stream_prefix_hash_matches_the_blocks_and_detects_an_offset_error() -> None:
    data = stream_block(0) + stream_block(1) + stream_block(2)
    n = 2 * BLOCK + 1000
    assert stream_sha256(n) == hashlib.sha256(data[:n]).hexdigest()
    # a block delivered twice (a duplicated resume) must not hash like the real stream
    wrong = stream_block(0) + stream_block(0) + stream_block(2)
    assert stream_sha256(n) != hashlib.sha256(wrong[:n]).hexdigest()


def test_goodput_counts_only_the_window() -> None:
    samples = [(0.5, 1000), (1.0, 2000), (2.0, 127_000), (3.5, 252_000)]
    # window [1, 3]: 125,000 bytes in 2 s = 500 kbit/s; the read at 3.5 s is outside
    assert abs(goodput_kbps(samples, 1.0 + 1e-9, 3.0) - 500.0) < 1e-3


def test_recovery_is_the_first_byte_after_each_restoration() -> None:
    samples = [(1.0, 10), (2.0, 20), (7.5, 30), (8.0, 40)]
    assert recoveries(samples, [5.0, 7.9, 9.0], t1=10.0) == [2.5, 0.1, None]


def test_breaks_give_one_window_per_length_with_the_default_up_time() -> None:
    import argparse

    import pytest

    from manetkit.bench.flap import Schedule, register, schedules
    from manetkit.errors import UserError

    p = argparse.ArgumentParser()
    register(p)
    assert schedules(p.parse_args([])) == [Schedule(3.0, 15.0, 5.0, 60.0, 4.0)]
    got = schedules(p.parse_args(["--breaks", "3,10,30", "--count", "2"]))
    # 12 s up between breaks (15 - 3), two breaks, the window ends 12 s after the last
    assert [(s.down, s.period, s.duration) for s in got] == [
        (3.0, 15.0, 35.0),
        (10.0, 22.0, 49.0),
        (30.0, 42.0, 89.0),
    ]
    for bad in (["--breaks", "3,x"], ["--breaks", "0"], ["--breaks", "3", "--count", "0"]):
        with pytest.raises(UserError, match="--breaks|--count"):
            schedules(p.parse_args(bad))


def test_route_return_is_the_sources_first_route_up_after_each_link_up() -> None:
    from manetkit.bench.flap import after_route, route_returns

    evs = [
        {"node": "n1", "event": "route-up", "dst": "10.42.0.4", "time": 100.5},
        {"node": "n1", "event": "route-up", "dst": "10.42.0.3", "time": 100.2},  # not n4
        {"node": "n2", "event": "route-up", "dst": "10.42.0.4", "time": 100.1},  # not n1
        {"node": "n1", "event": "route-up", "dst": "10.42.0.4", "time": 100.9},  # later
        {"node": "n1", "event": "route-up", "dst": "10.42.0.4", "time": 99.0},  # before
    ]
    assert route_returns(evs, [100.0, 110.0]) == [0.5, None]
    assert after_route([1.7, 2.0], [0.5, None]) == [1.2, None]


def test_probe_sweep_gives_elfn_its_fixed_interval_and_keeps_the_partition_timeout() -> None:
    """``--probe-intervals`` (Holland & Vaidya Fig. 12): each elfn run's proxies get a
    fixed probe period; every run keeps the longer partition timeout; bad lists refused."""
    import argparse

    import pytest

    from manetkit.bench.flap import Schedule, probe_intervals, proxy_extra, register, run
    from manetkit.errors import UserError

    sch = Schedule(10.0, 22.0, 5.0, 49.0, 4.0)
    assert proxy_extra(sch, None) == {"partition_timeout": 40.0}
    assert proxy_extra(sch, 0.5) == {
        "partition_timeout": 40.0, "probe": "fixed", "probe_interval": 0.5,
    }  # fmt: skip
    assert probe_intervals("0.5,2,30") == [0.5, 2.0, 30.0]
    assert probe_intervals(None) == []
    for bad in ("x", "0.01", "61", ","):
        with pytest.raises(UserError, match="--probe-intervals"):
            probe_intervals(bad)
    p = argparse.ArgumentParser()
    register(p)
    # a sweep needs elfn among the modes (refused before any lab is made)
    args = p.parse_args(["--modes", "plain", "--probe-intervals", "1,2"])
    args.out = "/nonexistent"
    with pytest.raises(UserError, match="only mode elfn"):
        run(args)
