"""Link quality's parts on their own, with a fake clock: smoothing, the beacon history,
the estimator's ETX, admission with hysteresis, the veto, better request copies, the
ETX metric's learnt costs, and the ``link_quality:`` settings."""

from __future__ import annotations

import random
from collections import Counter
from ipaddress import IPv4Address

import pytest
from pydantic import ValidationError

from manetkit.daemon.config import parse_config
from manetkit.daemon.engines.base import BeaconHeard, SignalSample, TxReport
from manetkit.daemon.engines.linkquality import LinkQuality, LinkQualityConfig
from manetkit.daemon.engines.linkquality.config import (
    AdmissionConfig,
    MetricConfig,
    VetoConfig,
)
from manetkit.daemon.engines.linkquality.copies import BestCopies
from manetkit.daemon.engines.linkquality.estimator import Beacons
from manetkit.daemon.engines.linkquality.smoothing import DecayedRatio, Ewma, KalmanTrend
from manetkit.errors import UserError

ME, NB = IPv4Address("10.42.0.1"), IPv4Address("10.42.0.2")


def lq(**sections) -> LinkQuality:
    return LinkQuality(LinkQualityConfig(**sections), ME, Counter())


# -- smoothing ---------------------------------------------------------------------


def test_ewma_half_life_is_in_seconds_not_samples():
    e = Ewma(half_life=1.0)
    e.update(0.0, -60.0)
    assert e.update(1.0, -80.0) == pytest.approx(-70.0)  # one half-life: half way
    e2 = Ewma(half_life=1.0)
    e2.update(0.0, -60.0)
    for i in range(1, 11):
        e2.update(i * 0.1, -80.0)  # ten samples over the same second: the same weight
    assert e2.value == pytest.approx(-70.0)


def test_decayed_ratio_forgets_old_attempts():
    r = DecayedRatio(half_life=5.0)
    r.add(0.0, 100, 10)  # a bad minute long ago
    r.add(50.0, 10, 10)  # recent frames all delivered
    assert r.ratio() > 0.95
    assert r.weight(55.0) == pytest.approx((100 * 2**-10 + 10) * 0.5, rel=0.01)


def test_kalman_finds_a_slope_under_fading_and_a_fade_moves_it_little():
    rng = random.Random(3)
    k = KalmanTrend(accel=1.0, noise_db=3.0)
    for i in range(60):  # 12 s of 0.2 s polls, falling 2 dB/s, +-4 dB of noise
        t = i * 0.2
        k.update(t, -60.0 - 2.0 * t + rng.uniform(-4, 4))
    assert k.slope == pytest.approx(-2.0, abs=0.7)
    flat = KalmanTrend(accel=1.0, noise_db=3.0)
    for i in range(30):
        flat.update(i * 0.2, -70.0)
    flat.update(6.0, -95.0)  # one 25 dB fade
    assert flat.level > -74.0  # gated: a bounded step, not the fade


# -- beacons -----------------------------------------------------------------------


def test_beacon_history_counts_heard_of_the_last_m_and_silence_as_missed():
    b = Beacons(seq=1, at=0.0, interval=1.0)
    for seq in (2, 4, 5):  # 3 lost
        b.heard(seq - 1.0, seq, 1.0)
    assert b.counts(4.0, 4) == (3, 4)
    assert b.counts(4.0, 10) == (4, 5)  # a neighbour known for 5 beacons: 5 covered
    assert b.counts(6.6, 4) == (2, 4)  # beacons 6 and 7 due, not come: 5 and 4 of 4
    assert b.counts(20.0, 4) == (0, 4)
    b.heard(20.0, 5, 1.0)  # a duplicate changes nothing
    assert b.counts(4.0, 4) == (3, 4)


# -- estimator's ETX ---------------------------------------------------------------


def test_etx_from_the_data_path_replaces_the_beacons_once_enough_attempts():
    q = lq(metric=MetricConfig(kind="etx"))
    for s in range(1, 11):
        q.observe(float(s), BeaconHeard(NB, s, 1.0))
    assert q.estimates.etx(10.0, NB) == pytest.approx(1.0)  # every beacon came
    q.observe(10.1, TxReport(NB, 2, 1))  # too few attempts to say anything
    assert q.estimates.etx(10.2, NB) == pytest.approx(1.0)
    q.observe(10.3, TxReport(NB, 30, 10))  # 1 frame in 3 gets through per attempt
    assert q.estimates.etx(10.4, NB) == pytest.approx(32 / 11, rel=0.05)


def test_etx_from_beacons_is_one_over_dr_squared():
    q = lq(metric=MetricConfig(kind="etx", hello_window=10))
    for s in range(1, 11):
        if s % 2:
            q.observe(float(s), BeaconHeard(NB, s, 1.0))  # every other beacon
    assert q.estimates.etx(9.2, NB) == pytest.approx(1 / (5 / 9) ** 2, rel=0.01)


# -- admission ---------------------------------------------------------------------


def test_signal_admission_has_hysteresis_and_does_not_flap_with_fading():
    q = lq(admission=AdmissionConfig(signal=True, admit_dbm=-86, release_dbm=-89))
    adm = q.admission
    rng = random.Random(1)
    flips, last = 0, None
    for i in range(200):  # a link at -87.5 dBm mean, +-5 dB per poll
        t = 0.2 * i
        q.observe(t, SignalSample(NB, -87.5 + rng.uniform(-5, 5), t))
        now = adm.admits(t, NB, None)
        flips += last is not None and now != last
        last = now
    assert flips <= 4  # between the thresholds it stays what it was
    # walking away: refused below -89 (smoothed), admitted again above -86
    for i in range(30):
        q.observe(40 + 0.2 * i, SignalSample(NB, -95.0, 40 + 0.2 * i))
    assert not adm.admits(46.0, NB, None)
    assert q.counters["admission-refused-signal"] >= 1
    for i in range(30):
        q.observe(50 + 0.2 * i, SignalSample(NB, -80.0, 50 + 0.2 * i))
    assert adm.admits(56.0, NB, None)


def test_a_link_is_refused_until_its_signal_has_settled():
    q = lq(admission=AdmissionConfig(signal=True, signal_half_life_s=1.0))
    assert not q.admission.admits(0.0, NB, -50.0)  # never heard: one frame's RSSI is not used
    q.observe(0.1, SignalSample(NB, -60.0, 0.1))
    assert not q.admission.admits(0.5, NB, None)  # one loud sample: not yet
    q.observe(1.2, SignalSample(NB, -60.0, 1.2))
    assert q.admission.admits(1.2, NB, None)
    c = q.counters
    assert c["admission-refused-unheard"] == 1 and c["admission-refused-settling"] == 1


def test_n_of_m_beacons():
    q = lq(admission=AdmissionConfig(hellos=True, hellos_heard=3, hellos_window=4))
    adm = q.admission
    q.observe(1.0, BeaconHeard(NB, 1, 1.0))
    q.observe(2.0, BeaconHeard(NB, 2, 1.0))
    assert not adm.admits(2.1, NB, None)  # 2 of 4: a new neighbour needs N beacons
    q.observe(3.0, BeaconHeard(NB, 3, 1.0))
    assert adm.admits(3.1, NB, None)
    q.observe(5.0, BeaconHeard(NB, 5, 1.0))  # 4 lost: 3 of the last 4 still
    assert adm.admits(5.1, NB, None)
    assert not adm.admits(6.6, NB, None)  # 6 due, not come: 2 of the last 4
    assert q.counters["admission-refused-hellos"] == 2


# -- the veto ----------------------------------------------------------------------


def _alive(q: LinkQuality, until: float, dbm: float = -70.0) -> None:
    for i in range(int(until / 0.2)):
        t = 0.2 * i
        q.observe(t, SignalSample(NB, dbm, t))


def test_veto_keeps_a_heard_steady_link_until_n_consecutive_failures():
    q = lq(veto=VetoConfig(enabled=True, failures=3))
    _alive(q, 5.0)
    assert not q.tx_failed(5.0, NB)
    assert not q.tx_failed(5.05, NB)
    assert q.down_vetoed(5.05, NB, "tx-failed")  # link sensing's LinkDown follows
    assert q.tx_failed(5.1, NB)  # the third in a row breaks it
    c = q.counters
    assert c["veto-vetoed"] == 2 and c["veto-break-failures"] == 1
    assert c["veto-delayed-breaks"] == 1 and c["veto-delay-ms"] == 100
    assert c["veto-linkdown-ignored"] == 1


def test_a_delivery_between_failures_restarts_the_count_and_confirms_the_veto():
    q = lq(veto=VetoConfig(enabled=True, failures=2))
    _alive(q, 5.0)
    assert not q.tx_failed(5.0, NB)
    q.observe(5.2, TxReport(NB, 9, 1))
    assert q.counters["veto-confirmed"] == 1
    assert not q.tx_failed(5.3, NB)  # a new streak


def test_failures_corroborated_by_silence_weak_signal_or_a_falling_trend_break_at_once():
    q = lq(veto=VetoConfig(enabled=True, silence_s=1.0))
    _alive(q, 2.0)
    assert q.tx_failed(3.5, NB)  # silent for 1.7 s
    assert q.counters["veto-break-silent"] == 1
    q = lq(veto=VetoConfig(enabled=True, floor_dbm=-88.0))
    _alive(q, 5.0, dbm=-91.0)
    assert q.tx_failed(5.0, NB)
    assert q.counters["veto-break-weak"] == 1
    q = lq(veto=VetoConfig(enabled=True, trend_db_per_s=2.0))
    for i in range(25):  # walking away: -4 dB/s
        t = 0.2 * i
        q.observe(t, SignalSample(NB, -60.0 - 4.0 * t, t))
    assert q.tx_failed(5.0, NB)
    assert q.counters["veto-break-falling"] == 1


def test_without_the_veto_every_failure_breaks():
    q = lq(metric=MetricConfig(kind="etx"), veto=VetoConfig(enabled=False))
    _alive(q, 2.0)
    assert q.tx_failed(2.0, NB)
    assert q.down_vetoed(2.0, NB, "tx-failed") is False


# -- better copies and learnt costs -------------------------------------------------


def test_better_copies_are_bounded_by_margin_and_count():
    c: Counter[str] = Counter()
    b = BestCopies(MetricConfig(better_copy_margin=0.1, max_better_copies=2), c, "better")
    assert not b.copy("r", 5.0, duplicate=False)
    assert not b.copy("r", 4.8, duplicate=True)  # 4 % better: not enough
    assert b.copy("r", 4.0, duplicate=True)
    assert b.copy("r", 3.0, duplicate=True)
    assert not b.copy("r", 1.0, duplicate=True)  # two already
    assert c["better"] == 2


def test_learnt_costs_are_forgotten_after_the_memory():
    q = lq(metric=MetricConfig(kind="etx", memory_s=5.0, unknown_cost=1.0))
    a, b = IPv4Address("10.42.0.7"), IPv4Address("10.42.0.8")
    q.metric.learn(0.0, a, b, 3.5)
    assert q.metric.link_cost(1.0, b, a) == 3.5  # either direction
    assert q.metric.path_cost(1.0, (ME, a, b)) == 1.0 + 3.5
    assert q.metric.link_cost(6.0, a, b) == 1.0


# -- settings ----------------------------------------------------------------------


def test_settings_refuse_bad_values_by_name():
    with pytest.raises(ValidationError, match="release_dbm"):
        AdmissionConfig(admit_dbm=-90, release_dbm=-80)
    with pytest.raises(ValidationError, match="hellos_heard"):
        AdmissionConfig(hellos_heard=5, hellos_window=4)
    with pytest.raises(ValidationError, match="kind"):
        MetricConfig(kind="ett")
    assert LinkQualityConfig().veto.enabled  # the one mechanism on by default
    assert not LinkQualityConfig(veto=VetoConfig(enabled=False)).enabled
    with pytest.raises(UserError, match="link_quality"):
        parse_config(
            {
                "address": "10.42.0.1",
                "protocol": "static",
                "link_quality": {"veto": {"enabled": True}},
            }
        )
    with pytest.raises(UserError, match="backend 'hello' reports no received powers"):
        parse_config(
            {
                "address": "10.42.0.1",
                "protocol": "dsr",
                "link_quality": {"admission": {"signal": True}},
            }
        )


def test_the_daemon_wide_section_reaches_the_engine():
    cfg = parse_config(
        {
            "address": "10.42.0.1",
            "protocol": "dsr",
            "link_sensing": {"backend": "nl80211"},
            "link_quality": {"admission": {"signal": True}, "metric": {"kind": "etx"}},
        }
    )
    eng = cfg.engine_config()
    assert eng.link_quality.admission.signal and eng.link_quality.metric.kind == "etx"
    own = parse_config(
        {
            "address": "10.42.0.1",
            "protocol": "aodv",
            "link_quality": {"veto": {"enabled": False}},
            "aodv": {"link_quality": {"metric": {"kind": "etx"}}},
        }
    )
    assert own.engine_config().link_quality.veto.enabled  # the section's own (default) wins


# -- link sensing's transmit reports -------------------------------------------------


def test_station_counters_become_attempts_and_deliveries_between_polls():
    import json
    from pathlib import Path

    from manetkit.daemon.linksense.base import StationInfo, StationTxStats, tx_stats
    from manetkit.daemon.linksense.lab import LabBackend

    mac = bytes.fromhex("026d6b000002")
    a = StationInfo(mac, tx_packets=10, tx_retries=4, tx_failed=1)
    b = StationInfo(mac, tx_packets=20, tx_retries=19, tx_failed=2)
    # 10 frames, 15 retries: 25 attempts; 1 of the frames failed: 9 delivered
    assert tx_stats(a, b) == StationTxStats(mac, 25, 9)
    assert tx_stats(None, b) is None  # no previous poll
    assert tx_stats(b, a) is None  # counters went back: a restart
    assert tx_stats(b, b) is None  # nothing sent

    got: list = []
    lab = LabBackend("radio0", lambda now, ev: got.append(ev), Path("/nonexistent"), lambda: 1.0)
    row = {"mac": "02:6d:6b:00:00:02", "rx_packets": 1, "tx_packets": 10, "tx_retries": 4}
    lab.on_table(json.dumps({"stations": [row]}).encode())
    row.update(tx_packets=20, tx_retries=19, tx_failed=2)
    lab.on_table(json.dumps({"stations": [row]}).encode())
    assert [e for e in got if isinstance(e, StationTxStats)] == [StationTxStats(mac, 25, 8)]
