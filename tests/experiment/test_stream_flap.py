"""The stream traffic's arithmetic (manetkit/bench/stream.py), a traffic's link flap
schedule and the ``flap`` metric plug-in (configs/experiments/flap.yaml): no network."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from manetkit.bench.stream import BLOCK, goodput_kbps, recoveries, stream_block, stream_sha256
from manetkit.experiment import execute
from manetkit.experiment import spec as S
from manetkit.experiment.plugins import Connection, RunContext
from manetkit.experiment.plugins.flap import Flap, after_route, route_returns

REPO = Path(__file__).resolve().parents[2]


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


def test_a_link_flap_schedule_fits_its_window() -> None:
    flap = S.LinkFlap(a="n2", b="n3", down_s=3, period_s=15, first_s=5)
    assert flap.breaks(60) == [(5, 8), (20, 23), (35, 38), (50, 53)]
    assert flap.breaks(7) == []  # the first break would not end in the window
    two = S.LinkFlap(a="n2", b="n3", down_s=30, period_s=42, first_s=5, count=2)
    assert two.breaks(89) == [(5, 35), (47, 77)]  # flap-breaks.yaml's 30 s breaks
    with pytest.raises(ValueError, match="period_s 3 must be longer than down_s 3"):
        S.LinkFlap(a="n2", b="n3", down_s=3, period_s=3)
    with pytest.raises(ValueError, match="two different nodes"):
        S.LinkFlap(a="n2", b="n2")


def test_route_return_is_the_sources_first_route_up_after_each_link_up() -> None:
    evs = [
        {"node": "n1", "event": "route-up", "dst": "10.42.0.4", "time": 100.5},
        {"node": "n1", "event": "route-up", "dst": "10.42.0.3", "time": 100.2},  # not n4
        {"node": "n2", "event": "route-up", "dst": "10.42.0.4", "time": 100.1},  # not n1
        {"node": "n1", "event": "route-up", "dst": "10.42.0.4", "time": 100.9},  # later
        {"node": "n1", "event": "route-up", "dst": "10.42.0.4", "time": 99.0},  # before
    ]
    assert route_returns(evs, [100.0, 110.0], "n1", "10.42.0.4") == [0.5, None]
    assert after_route([1.7, 2.0], [0.5, None]) == [1.2, None]


class FakeEvents:
    def __init__(self, events: list[dict]) -> None:
        self.events = events

    def snapshot(self) -> list[dict]:
        return list(self.events)


def test_the_flap_plugin_times_each_restoration_of_the_first_flow() -> None:
    ctx = RunContext("lab", ["n1", "n2", "n3", "n4"], "dsr", "elfn", Path("."),
                     [Connection("n1", "n4", 5400)])  # fmt: skip
    ctx.window_mono = (10.0, 70.0)
    ctx.samples = [[(11.0, 100), (19.0, 200), (24.5, 300), (60.0, 400)]]
    ctx.stream_flows = [{"intact": True}]
    ctx.link_downs, ctx.link_ups = [15.0, 30.0], [18.0, 33.0]
    ctx.link_ups_wall = [1018.0, 1033.0]
    ctx.events = FakeEvents([{"node": "n1", "event": "route-up", "dst": "10.42.0.4",
                              "time": 1018.4}])  # type: ignore[assignment]  # fmt: skip
    got = Flap().result(ctx, [])
    assert got["intact"] is True and got["breaks"] == 2
    assert got["recovery_s"] == [1.0, 27.0]  # the first byte after each link up
    assert got["route_back_s"] == [0.4, None]
    assert got["recovery_after_route_s"] == [0.6, None]
    assert got["recovery_mean_s"] == 14.0 and got["recovery_max_s"] == 27.0
    rows = Flap.rows([{"params": {"scenario": "chain-4", "traffic": "flap3", "stack": "dsr",
                                  "proxy": "elfn", "speed": 0.0}, "flap": got}])  # fmt: skip
    assert rows[0]["variant"] == "dsr+elfn" and rows[0]["intact"] == "yes"
    assert rows[0]["recovery_s"] == 14.0 and rows[0]["unrecovered"] == 0


def test_the_flap_specs_load_and_give_each_break_length_its_partition_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flap = S.load_spec(REPO / "configs" / "experiments" / "flap.yaml")
    assert [r.proxy for r in flap.runs()] == ["none", "fixed-rto", "elfn", "bus"]
    breaks = S.load_spec(REPO / "configs" / "experiments" / "flap-breaks.yaml")
    run = next(r for r in breaks.runs() if r.traffic == "breaks30" and r.proxy == "elfn")
    assert execute.run_proxy_config(breaks, run) == {"partition_timeout": 60}
    # an ELFN probe variant adds its interval over the spec's and the traffic's fields
    sweep = S.spec_from_dict({**_raw(REPO / "configs" / "experiments" / "flap.yaml"),
                              "proxies": ["elfn-probe2"]})  # fmt: skip
    got = execute.run_proxy_config(sweep, sweep.runs()[0])
    assert got == {"partition_timeout": 33, "probe": "fixed", "probe_interval": 2.0}


def _raw(path: Path) -> dict:
    from manetkit.configfile import read_yaml_mapping

    return read_yaml_mapping(path)
