"""Atra RFP (Anantharaman et al. IV-A) with a fake clock and the lab's two-ray powers."""

from __future__ import annotations

import math
import random
import statistics
from ipaddress import IPv4Address

import pytest
from pydantic import ValidationError

from manetkit.daemon.engines.atra import AtraConfig, RfpPredictor
from manetkit.lab.medium.propagation import TwoRayGround

NB = IPv4Address("10.42.0.2")
POLL = 0.2  # the daemon's station-table poll (link_sensing.poll_s)
MODEL = TwoRayGround()
EDGE = MODEL.range_m()


def _walk(speed: float, start_m: float = 100.0, noise_db: float = 0.0, seed: int = 1):
    """Feed a neighbour walking away at ``speed``; return (prediction, time of the edge)."""
    rfp = RfpPredictor(AtraConfig(rfp=True))
    rng = random.Random(seed)
    t_edge = (EDGE - start_m) / speed
    t = 0.0
    while t < t_edge:
        dbm = MODEL.rx_power_dbm(start_m + speed * t) + rng.uniform(-noise_db, noise_db)
        pred = rfp.sample(t, NB, dbm)
        if pred is not None:
            return pred, t_edge
        t = round(t + POLL, 6)
    return None, t_edge


def test_k_matches_the_lab_two_ray() -> None:
    rfp = RfpPredictor(AtraConfig())
    k_lab = MODEL.pt_w * (MODEL.ht_m * MODEL.hr_m) ** 2
    assert rfp.k_w == pytest.approx(k_lab, rel=1e-3)
    assert rfp.distance_m(MODEL.rx_power_dbm(180.0)) == pytest.approx(180.0, rel=1e-3)
    # P_RFP = K/(r - s t)^4: at 10 m/s and t = 2 s, the power at 230 m
    assert rfp.threshold_dbm(10.0) == pytest.approx(MODEL.rx_power_dbm(230.0), abs=0.01)


@pytest.mark.parametrize("speed", [10.0, 20.0])
def test_walking_away_is_predicted_about_the_lookahead_before_the_edge(speed: float) -> None:
    pred, t_edge = _walk(speed)
    assert pred is not None, "a neighbour walking out of range was not predicted"
    lead = t_edge - pred.at
    assert 1.5 <= lead <= 2.5, lead
    assert pred.speed_mps == pytest.approx(speed, rel=0.05)
    assert pred.slope_db_per_s < 0
    assert 1.5 <= pred.eta_s <= 2.5


@pytest.mark.parametrize("speed", [10.0, 20.0])
def test_walking_away_with_fading_noise_is_still_predicted_in_time(speed: float) -> None:
    """+-1 dB of noise on every poll: every walk is predicted before the edge, typically
    about the look-ahead before it."""
    leads = []
    for seed in range(20):
        pred, t_edge = _walk(speed, noise_db=1.0, seed=seed)
        assert pred is not None, seed
        leads.append(t_edge - pred.at)
    assert min(leads) > 0.3
    assert 1.5 <= statistics.median(leads) <= 2.5, leads


@pytest.mark.parametrize("seed", range(5))
def test_stationary_neighbour_near_the_edge_with_noise_is_not_predicted(seed: int) -> None:
    rfp = RfpPredictor(AtraConfig(rfp=True))
    rng = random.Random(seed)
    base = MODEL.rx_power_dbm(240.0)
    for i in range(int(120 / POLL)):  # two minutes of polls
        assert rfp.sample(i * POLL, NB, base + rng.uniform(-2.0, 2.0)) is None, i
    assert rfp.predictions == 0


def test_single_fading_dips_do_not_trigger() -> None:
    rfp = RfpPredictor(AtraConfig(rfp=True))
    base = MODEL.rx_power_dbm(200.0)
    for i in range(600):
        dip = -15.0 if i % 7 == 3 else 0.0  # one sample in seven fades 15 dB
        assert rfp.sample(i * POLL, NB, base + dip) is None, i


def test_slowly_approaching_neighbour_is_not_predicted() -> None:
    rfp = RfpPredictor(AtraConfig(rfp=True))
    for i in range(100):
        assert rfp.sample(i * POLL, NB, MODEL.rx_power_dbm(249.0 - i)) is None


def test_hits_false_alarms_and_missed_breaks_are_counted() -> None:
    cfg = AtraConfig(rfp=True)
    pred, t_edge = _walk(20.0)
    assert pred is not None
    rfp = RfpPredictor(cfg)
    t = 0.0
    while rfp.sample(t, NB, MODEL.rx_power_dbm(100 + 20 * t)) is None:
        t = round(t + POLL, 6)
    assert rfp.predicted(NB, t)
    assert rfp.get_timer() == pytest.approx(t + 2 * cfg.lookahead_s)
    assert rfp.link_failed(t + 1.9, NB) == "hit"
    assert not rfp.predicted(NB, t + 2.0)
    # a second neighbour predicted but never failing: a false alarm at 2x the look-ahead
    other = IPv4Address("10.42.0.3")
    t2 = 100.0
    while rfp.sample(t2, other, MODEL.rx_power_dbm(100 + 20 * (t2 - 100))) is None:
        t2 = round(t2 + POLL, 6)
    assert rfp.handle_timer(t2 + 3.9) == []
    assert [p.neighbour for p in rfp.handle_timer(t2 + 4.01)] == [other]
    # a failure nothing predicted (of a link that was heard), reported twice
    third = IPv4Address("10.42.0.4")
    assert rfp.link_failed(199.0, third) == "repeat"  # never heard: not scored
    for i in range(5):
        rfp.sample(199.0 + i * POLL, third, MODEL.rx_power_dbm(200.0))
    assert rfp.link_failed(200.0, third) == "missed"
    assert rfp.link_failed(200.5, third) == "repeat"  # TxFailed, then LinkDown
    # a heard neighbour no route used: its break is not RFP's to predict (not counted)
    fourth = IPv4Address("10.42.0.5")
    for i in range(5):
        rfp.sample(300.0 + i * POLL, fourth, MODEL.rx_power_dbm(200.0))
    assert rfp.link_failed(301.0, fourth, in_use=False) == "idle"
    assert rfp.counters() == {
        "predictions": 2,
        "hits": 1,
        "false_alarms": 1,
        "breaks_not_predicted": 1,
    }


def test_log_distance_exponent_for_real_wifi() -> None:
    cfg = AtraConfig(rfp=True, path_loss_exponent=3.0, rx_threshold_dbm=-82.0, range_m=120.0)
    rfp = RfpPredictor(cfg)

    # power with exponent 3 referenced to -82 dBm at 120 m; walking away at 5 m/s
    def dbm(d: float) -> float:
        return -82.0 - 30.0 * math.log10(d / 120.0)

    t = 0.0
    pred = None
    while pred is None and 40 + 5 * t < 120:
        pred = rfp.sample(t, NB, dbm(40 + 5 * t))
        t = round(t + POLL, 6)
    assert pred is not None
    assert 1.5 <= (120 - 40) / 5 - pred.at <= 2.5


def test_config_refuses_unknown_and_bad_fields() -> None:
    with pytest.raises(ValidationError, match="rfq"):
        AtraConfig.model_validate({"rfq": True})
    with pytest.raises(ValidationError, match="lookahead_s"):
        AtraConfig.model_validate({"lookahead_s": -1})
    assert not AtraConfig().enabled
    assert AtraConfig(pre=True).enabled
