"""The realistic profiles' channel models, seeded: path loss, shadowing, fading, noise,
error models and the ground-truth rule."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from manetkit.lab.medium.channel import Channel, usable_snr_db
from manetkit.lab.medium.errormodels import (
    SHARED_TABLE,
    cck_symbol_error,
    frame_layout,
    frame_success,
    log_success_per_bit,
    mode,
    sinr_for_success,
)
from manetkit.lab.medium.fading import NakagamiFading, coherence_time_s
from manetkit.lab.medium.mobility import Static, World
from manetkit.lab.medium.pathloss import LogDistance, friis_loss_db
from manetkit.lab.medium.power import noise_floor_dbm
from manetkit.lab.medium.profiles import profile_defaults
from manetkit.lab.medium.shadowing import CorrelatedShadowing


def test_friis_reference_and_log_distance():
    # 20 log10(4 pi f d0 / c) at 2412 MHz and 1 m
    assert friis_loss_db(2412e6, 1.0) == pytest.approx(40.0953, abs=1e-3)
    pl = LogDistance.friis_reference(2412e6, 3.0)
    assert pl.loss_db(1.0) == pytest.approx(40.0953, abs=1e-3)
    assert pl.loss_db(0.2) == pl.loss_db(1.0)  # no gain below the reference distance
    assert pl.loss_db(100.0) - pl.loss_db(10.0) == pytest.approx(30.0)  # 10 n dB/decade
    assert pl.distance_for_loss(pl.loss_db(137.0)) == pytest.approx(137.0)
    d = np.array([0.5, 1.0, 10.0, 250.0])
    assert pl.loss_db_array(d).tolist() == pytest.approx([pl.loss_db(x) for x in d])


def test_noise_floor_matches_ns3():
    # k T B F with ns-3's Boltzmann constant: -93.55 dBm at 22 MHz, -93.97 at 20 MHz (NF 7)
    assert noise_floor_dbm(22e6, 7.0) == pytest.approx(-93.55, abs=0.01)
    assert noise_floor_dbm(20e6, 7.0) == pytest.approx(-93.97, abs=0.01)


def test_shadowing_mean_sigma_and_symmetry():
    n = 80
    sh = CorrelatedShadowing(n, 4.0, 20.0, np.random.default_rng(1))
    pos = np.random.default_rng(2).uniform(0, 500, (n, 2))
    db = sh.update(pos)
    assert np.array_equal(db, db.T) and not db.diagonal().any()
    vals = db[np.triu_indices(n, 1)]
    assert abs(vals.mean()) < 0.15  # 3160 links: standard error 0.07 dB
    assert vals.std() == pytest.approx(4.0, rel=0.05)
    # static nodes keep their shadowing
    assert np.array_equal(sh.update(pos), db)


@pytest.mark.parametrize("moved", [5.0, 20.0, 60.0])
def test_shadowing_correlation_over_distance_is_gudmundson(moved):
    """Every link's relative vector moves by ``moved`` m: corr = exp(-moved / 20 m)."""
    n = 80
    sh = CorrelatedShadowing(n, 6.0, 20.0, np.random.default_rng(3))
    pos = np.random.default_rng(4).uniform(0, 500, (n, 2))
    before = sh.update(pos)[np.triu_indices(n, 1)]
    step = np.zeros((n, 2))
    step[:, 0] = moved * (np.arange(n) % 2)  # odd nodes move `moved` m east
    after = sh.update(pos + step)[np.triu_indices(n, 1)]
    a, b = np.triu_indices(n, 1)
    changed = (a % 2) != (b % 2)  # links with exactly one moving end: |delta| = moved
    r = np.corrcoef(before[changed], after[changed])[0, 1]
    assert r == pytest.approx(math.exp(-moved / 20.0), abs=0.06)
    same = ~changed  # both ends moved together (or neither): unchanged, ns-3's rule
    assert np.allclose(before[same], after[same])


def test_shadowing_refuses_negative_sigma():
    with pytest.raises(ValueError, match="sigma"):
        CorrelatedShadowing(3, -1.0, 20.0, np.random.default_rng(0))


@pytest.mark.parametrize("m", [1.0, 1.5, 3.0])
def test_nakagami_power_gain_statistics(m):
    f = NakagamiFading(m, random.Random(5))
    g = np.array([f.draw() for _ in range(40000)])
    assert g.mean() == pytest.approx(1.0, abs=0.02)
    assert g.var() == pytest.approx(1.0 / m, rel=0.05)  # Gamma(m, 1/m): variance 1/m
    if m == 1.0:  # Rayleigh: P(g < x) = 1 - exp(-x)
        assert (g < 0.1).mean() == pytest.approx(1 - math.exp(-0.1), abs=0.01)


def test_fading_held_for_the_coherence_time():
    f = NakagamiFading(1.0, random.Random(6))
    g0 = f.gain(7, 0.0, 0.1)
    assert f.gain(7, 0.05, 0.1) == g0  # same fade within the coherence time
    assert f.gain(7, 0.1, 0.1) != g0  # a new one after it
    assert f.gain(8, 0.1, 0.1) != f.gain(7, 0.1, 0.1)  # links fade independently
    # Clarke: Tc = 0.423 c / (v f); static links use the floor speed
    assert coherence_time_s(1.0, 2.412e9, 0.5) == pytest.approx(0.0526, abs=1e-4)
    assert coherence_time_s(0.0, 2.412e9, 0.5) == pytest.approx(0.1051, abs=1e-4)
    assert coherence_time_s(20.0, 2.412e9, 0.5) == pytest.approx(0.00263, abs=1e-5)


def test_error_models_known_points():
    # DBPSK: BER = exp(-22 SINR) / 2: at SINR 0 dB a bit survives with 1 - e^-22 / 2
    assert math.exp(log_success_per_bit(mode(1.0), 1.0)) == pytest.approx(1 - 0.5 * math.exp(-22.0))
    # 16-ary biorthogonal symbol error (Pursley & Royster): high at low energy, tiny at high
    assert cck_symbol_error(0.0) == pytest.approx(1 - 1 / 16, abs=0.01)
    assert cck_symbol_error(20.0) < 1e-4
    # NIST BPSK 1/2 at 10 dB: no error in a 1000-byte frame
    assert frame_success(SHARED_TABLE, frame_layout(1000, 6.0), 10.0) > 0.999
    # success rises with SINR, falls with the rate and with the length
    for rate in (1.0, 2.0, 5.5, 11.0, 6.0, 24.0, 54.0):
        lay = frame_layout(1000, rate)
        curve = [frame_success(SHARED_TABLE, lay, s / 2) for s in range(-20, 60)]
        assert curve == sorted(curve) and curve[0] < 0.01 and curve[-1] > 0.99
    s50 = {r: sinr_for_success(SHARED_TABLE, frame_layout(1000, r), 0.5) for r in (1, 11, 6, 54)}
    assert s50[1] < s50[11] and s50[6] < s50[54]
    assert s50[1] == pytest.approx(-4.0, abs=0.3) and s50[54] == pytest.approx(21.9, abs=0.5)
    short = sinr_for_success(SHARED_TABLE, frame_layout(60, 1.0), 0.5)
    assert short < s50[1]


def test_usable_link_rule_and_forced_links():
    prof = profile_defaults("outdoor", "802.11b").with_(shadowing_sigma_db=0.0)
    snr = usable_snr_db(prof)
    # PER of a 1500-byte packet at 11 Mbit/s <= 0.1 on the mean SNR
    lay = frame_layout(1536, 11.0)
    assert (
        frame_success(SHARED_TABLE, lay, snr) >= 0.9 > frame_success(SHARED_TABLE, lay, snr - 0.1)
    )
    noise = noise_floor_dbm(22e6, 7.0)
    edge = LogDistance.friis_reference(2412e6, 3.0).distance_for_loss(
        prof.tx_power_dbm - noise - snr
    )
    world = World(Static([(0, 0), (edge - 1, 0), (2 * edge + 1, 0)]), 3)
    ch = Channel(prof, world, seed=1)
    snap = ch.snapshot(0.0)
    assert snap.edges() == [(0, 1)]  # n2-n3 is just beyond the edge
    assert "PER of a 1500-byte packet at 11 Mbit/s <= 0.1" in ch.link_rule()
    world.set_link(1, 2, "up")
    world.set_link(0, 1, "down")
    snap = ch.snapshot(0.1)
    assert snap.edges() == [(1, 2)]
    assert snap.dbm[1][2] >= noise + snr + 10.0  # forced up: 10 dB above the usable level
    assert {0 * 3 + 1, 1 * 3 + 0} <= snap.blocked  # n1-n2 down: no reception either way


def test_noise_figure_offset_makes_a_link_one_way_unusable():
    from manetkit.lab.medium.profiles import NodeOffset

    prof = profile_defaults("outdoor", "802.11b").with_(
        shadowing_sigma_db=0.0, node_offsets={1: NodeOffset(noise_figure_db=6.0)}
    )
    ch = Channel(prof, World(Static([(0, 0), (100, 0)]), 2), seed=1)
    snap = ch.snapshot(0.0)
    assert snap.dbm[0][1] == pytest.approx(snap.dbm[1][0])  # same path, same power
    assert snap.noise_w[1] > 3.9 * snap.noise_w[0]  # but n2 is 6 dB noisier
    far = Channel(prof, World(Static([(0, 0), (120, 0)]), 2), seed=1).snapshot(0.0)
    assert far.edges() == []  # usable from n2 to n1 only: not an edge (both ways needed)


def test_channel_shadowing_is_the_same_however_often_it_is_sampled():
    from manetkit.lab.medium.mobility import RandomWaypoint

    prof = profile_defaults("indoor", "802.11g")
    a = Channel(prof, World(RandomWaypoint(6, (300.0, 300.0), 5.0, seed=3), 6), seed=9)
    b = Channel(prof, World(RandomWaypoint(6, (300.0, 300.0), 5.0, seed=3), 6), seed=9)
    for k in range(1, 41):
        a.snapshot(k * 0.05)
    for t in (0.3, 1.1, 2.0):
        b.snapshot(t)
    assert np.array_equal(a.shadowing.db, b.shadowing.db)


def test_ground_truth_log_states_its_rule_and_the_scenario_events_follow_it(tmp_path):
    from manetkit.lab.build import medium_from_scenario, scenario_events
    from manetkit.lab.medium.groundtruth import GroundTruthLog, link_rule, snapshot_edges
    from manetkit.lab.scenario import scenario_from_dict

    sc = scenario_from_dict(
        {
            "nodes": 3,
            "radio": {"profile": "outdoor", "rate_mbps": 11, "shadowing_sigma_db": 0},
            "mobility": {"model": "static", "layout": {"kind": "line", "spacing": 100}},
        }
    )
    events = scenario_events(sc)
    assert events[0]["edges"] == [["n1", "n2"], ["n2", "n3"]]  # 200 m is beyond 119 m
    assert link_rule(events).startswith("outdoor 802.11b: PER of a 1500-byte packet at 11")
    m = medium_from_scenario(sc)
    log = GroundTruthLog(None, 0.0, m.link_rule())
    ev = log.observe(0.0, snapshot_edges(m.refresh(0.0, force=True)))
    assert ev["edges"] == events[0]["edges"] and ev["rule"] == link_rule(events)
    assert "rule" not in log.observe(1.0, [["n1", "n2"]])  # only the first line carries it


def test_every_profile_parameter_is_documented():
    from pathlib import Path

    from manetkit.lab.medium.profiles import PARAMETERS

    docs = Path(__file__).resolve().parents[2] / "docs"
    medium, scenario = (docs / "medium.md").read_text(), (docs / "scenario.md").read_text()
    for name in [*PARAMETERS, "node_offsets", "standard"]:
        assert f"`{name}`" in medium and f"`{name}" in scenario, name
