"""Every received frame's RSSI reaches Atra's route failure prediction (RFP), with a fake clock.

The chain the daemon runs in a lab, without sockets: the lab radio's station table
(``manetkit.lab.stations``) accounts each frame's power, the ``lab`` link-sensing backend
turns two polls into the mean power of the frames between them (one sample per neighbour
per poll), the hysteresis passes it on as a ``Signal``, and the DSR engine's RFP
(Anantharaman et al. IV-A) predicts. The rows' last-frame signal fields are blanked, so
the prediction can only come from the frames' sums.
"""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Callable, Iterator

import pytest

from manetkit.daemon.engines.atra import AtraConfig
from manetkit.daemon.engines.base import SignalSample
from manetkit.daemon.linksense.base import StationEvent, StationSeen
from manetkit.daemon.linksense.hysteresis import LinkMonitor, Signal
from manetkit.daemon.linksense.lab import LabBackend
from manetkit.lab.medium.propagation import TwoRayGround
from manetkit.lab.stations import StationTable
from tests.daemon.dsrutil import A, dsr_net

MAC2 = bytes.fromhex("026d6b000002")
MAC3 = bytes.fromhex("026d6b000003")
POLL = 0.2
MODEL = TwoRayGround()
EDGE = MODEL.range_m()


class Polled:
    """A station table polled by a ``LabBackend`` on a fake clock."""

    def __init__(self, blank_signal: bool = False, sums: bool = True) -> None:
        self.now = 0.0
        self.table = StationTable()
        self.seen: list[tuple[float, StationEvent]] = []
        self.backend = LabBackend(
            "radio0",
            lambda now, e: self.seen.append((now, e)),
            None,
            lambda: self.now,  # type: ignore[arg-type]
        )
        self.blank_signal = blank_signal
        self.sums = sums

    def poll(self) -> list[StationSeen]:
        rows = self.table.dump(self.now)
        if self.blank_signal:  # only the per-frame sums are left
            for r in rows:
                r["signal_dbm"] = r["signal_avg_dbm"] = None
        if not self.sums:  # a radio without per-frame sums: the last frame's signal
            for r in rows:
                del r["rx_signal_frames"], r["rx_signal_sum_dbm"]
        n = len(self.seen)
        self.backend.on_table(json.dumps({"ok": True, "stations": rows}).encode())
        return [e for _, e in self.seen[n:] if isinstance(e, StationSeen)]


def test_one_sample_per_poll_is_the_mean_of_the_frames_since_the_last() -> None:
    p = Polled()
    for dbm in (-60.0, -62.0, -64.0):
        p.table.received(MAC2, dbm, 100, p.now)
    assert p.poll() == [StationSeen(MAC2, -62.0)]
    p.now = 0.2
    assert p.poll() == []  # no frame since: not heard, no sample
    # an overheard unicast counts for the power, not for "heard"
    p.table.overheard(MAC2, -70.0, p.now)
    p.now = 0.4
    assert p.poll() == []
    p.table.received(MAC2, -66.0, 100, p.now)
    p.table.received(MAC2, -68.0, 100, p.now)
    p.now = 0.6
    assert p.poll() == [StationSeen(MAC2, -67.0)]  # the overheard frame was the last poll's
    # a second station, and a radio restart (counters begin again): last frame's signal
    p.table.received(MAC3, -50.0, 100, p.now)
    p.table.by_mac[MAC2].rx_signal_frames = 1
    p.table.by_mac[MAC2].rx_packets += 1
    p.now = 0.8
    got = p.poll()
    assert StationSeen(MAC3, -50.0) in got and StationSeen(MAC2, -68.0) in got
    # rows the radio dropped are forgotten
    del p.table.by_mac[MAC3]
    p.now = 1.0
    p.poll()
    assert MAC3 not in p.backend._signal_seen and MAC3 not in p.backend._rx_seen


def _frames(
    dist: Callable[[float], float], fading_db: float, seed: int, until: float
) -> Iterator[tuple[float, float | None]]:
    """(time, dBm) of the frames n2 sends every 20 ms, n2 at ``dist(t)`` metres from n1,
    each with independent uniform fading of +-``fading_db``; dBm None beyond the range
    edge (n1 does not hear it)."""
    rng = random.Random(seed)
    t = 0.0
    while t < until:
        d = dist(t)
        fade = rng.uniform(-fading_db, fading_db)
        yield t, MODEL.rx_power_dbm(d) + fade if d <= EDGE else None
        t = round(t + 0.02, 6)


def _predict(
    frames: Iterator[tuple[float, float | None]], sums: bool = True
) -> list[tuple[float, dict]]:
    """Feed frames through table -> backend -> hysteresis -> DSR engine (RFP on); (time,
    fields) of each ``predicted-failure`` n1 emits. ``sums=False``: the rows lack the
    per-frame sums, as from the radio before them (the last frame's signal per poll)."""
    sim = dsr_net(2, [(1, 2)], atra=AtraConfig(rfp=True))
    p = Polled(blank_signal=sums, sums=sums)
    monitor = LinkMonitor(silence_s=3.0)
    next_poll = POLL
    got: list[tuple[float, dict]] = []
    for t, dbm in frames:
        while t >= next_poll:
            p.now = next_poll
            sim.run(until=p.now)
            for seen in p.poll():
                assert seen.signal_dbm is not None
                monitor.heard(p.now, seen.mac, seen.signal_dbm)
                while (d := monitor.next_event()) is not None:
                    if isinstance(d, Signal):
                        sim.link_event(A(1), SignalSample(A(2), d.signal_dbm, p.now))
            got += [(p.now, e) for e in sim.events(A(1), "predicted-failure")[len(got) :]]
            next_poll = round(next_poll + POLL, 6)
        if dbm is not None:
            p.table.received(MAC2, dbm, 1500, t)
    return got


def _leads(speed: float, sums: bool = True, seeds: int = 20) -> list[float | None]:
    """Per seed, how long before the range edge n2 (walking away from 100 m at ``speed``,
    +-3 dB of fading per frame) was predicted; None when it was not."""
    t_edge = (EDGE - 100.0) / speed
    out: list[float | None] = []
    for seed in range(seeds):
        frames = _frames(lambda t: 100.0 + speed * t, 3.0, seed, t_edge + 1.0)
        events = _predict(frames, sums)
        assert len(events) <= 1, events
        out.append(t_edge - events[0][0] if events else None)
        assert not events or events[0][1]["neighbour"] == "10.42.0.2"
    return out


@pytest.mark.parametrize("speed", [10.0, 20.0])
def test_a_walk_away_is_predicted_from_the_frames_alone(speed: float) -> None:
    """The rows' last-frame signals are blanked: the predictions come from the frames'
    mean powers, about the look-ahead (2 s) before n2 crosses the range edge."""
    leads = _leads(speed)
    assert all(x is not None for x in leads), leads
    before = [x for x in leads if x is not None and x > 0]
    assert len(before) >= 19, leads
    assert 1.5 <= statistics.median(before) <= 2.5, leads


def test_the_frames_mean_predicts_walks_the_last_frame_misses() -> None:
    """At 10 m/s with +-3 dB per frame, the last frame's power per poll (what the
    predictor got before) predicts 6 of 20 walks before the edge; the frames' mean 19."""
    with_sums = [x for x in _leads(10.0) if x is not None and x > 0]
    last_frame = [x for x in _leads(10.0, sums=False) if x is not None and x > 0]
    assert len(with_sums) >= 19
    assert len(last_frame) <= 10


@pytest.mark.parametrize("seed", range(3))
def test_a_stationary_neighbour_near_the_edge_is_not_predicted_from_frames(seed: int) -> None:
    """240 m, +-3 dB per frame, two minutes: no prediction."""
    assert _predict(_frames(lambda t: 240.0, 3.0, seed, 120.0)) == []
