"""The medium's scheduling-lag record and a window's fidelity verdict (no lab needed)."""

from __future__ import annotations

import math

import pytest

from manetkit.lab.fidelity import (
    Fidelity,
    Reading,
    Thresholds,
    cpu_jiffies,
    process_class,
    window,
)
from manetkit.lab.medium.lag import EDGES_US, LagRecorder, bucket_of, percentile_us


def test_buckets_are_upper_edges_never_below_the_lag():
    for lag in (0.0, 3.0, 10.0, 10.1, 99.0, 1000.0, 4999.0, 5000.0, 5001.0, 2e6):
        k = bucket_of(lag)
        assert lag <= EDGES_US[k]
        assert k == 0 or lag > EDGES_US[k - 1]
    assert bucket_of(1e9) == len(EDGES_US)  # the open last bucket


def test_percentiles_of_a_histogram():
    counts = [0] * (len(EDGES_US) + 1)
    assert percentile_us(counts, 0.99) is None
    counts[bucket_of(100.0)] = 98
    counts[bucket_of(8000.0)] = 2
    assert percentile_us(counts, 0.5) == EDGES_US[bucket_of(100.0)]
    assert percentile_us(counts, 0.99) == EDGES_US[bucket_of(8000.0)]
    counts[-1] = 10
    assert percentile_us(counts, 0.99) == math.inf


def _reading(rec: LagRecorder, t: float, unmodelled: int = 0, queue_drops: int = 0) -> Reading:
    reply = {
        "t": t,
        "lag": rec.to_wire(),
        "drops": {
            "modelled": {"queue_drops": queue_drops},
            "unmodelled": {"medium_send_drops": unmodelled},
        },
    }
    return Reading.from_medium(reply, cpu_s={"medium": t / 2}, load_avg=(1.0, 0.5, 0.2))


def test_a_punctual_window_is_valid_and_a_late_one_is_not():
    rec = LagRecorder()
    for k in range(1000):  # 10 s on time: 200 us late at most
        rec.record(k * 0.01 + 0.0002, k * 0.01)
    a = _reading(rec, 10.0)
    for k in range(1000):  # 10 s where every tenth output is 20 ms late
        due = 10.0 + k * 0.01
        rec.record(due + (0.02 if k % 10 == 0 else 0.0001), due)
    b = _reading(rec, 20.0, queue_drops=7)
    first = window(_reading(LagRecorder(), 0.0), a)
    assert first.valid and first.outputs == 1000
    assert first.lag_p99_ms <= 0.3 and first.lag_max_ms == pytest.approx(0.2, rel=0.01)
    late = window(a, b)
    assert late.outputs == 1000
    assert not late.valid and "p99" in late.reasons[0]
    assert late.lag_p99_ms >= 20.0 and late.lag_max_ms == pytest.approx(20.0, rel=0.01)
    assert late.modelled_drops == {"queue_drops": 7}  # the model's own drops never invalidate
    assert late.cpu_s == {"medium": 5.0}
    assert all(10 <= row[0] <= 20 for row in late.per_second)
    # A looser threshold accepts it; JSON round trip keeps everything
    assert window(a, b, Thresholds(lag_p99_ms=50)).valid
    assert Fidelity.from_json(late.to_json()) == late


def test_drops_outside_the_model_invalidate_and_empty_windows_too():
    rec = LagRecorder()
    rec.record(1.0, 1.0)
    a = _reading(rec, 1.0)
    rec.record(2.0, 2.0)
    b = _reading(rec, 2.0, unmodelled=3)
    f = window(a, b)
    assert not f.valid and f.unmodelled_drops == {"medium_send_drops": 3}
    assert "3 frames dropped outside the model" in f.reasons[0]
    empty = window(b, _reading(rec, 3.0, unmodelled=3))
    assert not empty.valid and "nothing" in empty.reasons[0]
    with pytest.raises(ValueError):
        window(b, a)


def test_process_classes_by_argv():
    assert process_class(["python3", "-m", "manetkit.cli", "lab", "medium", "x.yaml"]) == "medium"
    assert process_class(["python3", "-m", "manetkit.lab.radio", "--lab", "l"]) == "radios"
    assert process_class(["python3", "-m", "manetkit.daemon", "--config", "c"]) == "daemons"
    assert process_class(["python3", "-m", "manetkit.proxy", "-v"]) == "proxies"
    assert process_class(["/usr/sbin/babeld", "-I", "x"]) == "peers"
    assert process_class(["iperf3", "-s"]) == "traffic"


def test_lag_summary_since_start_and_over_the_last_seconds():
    from manetkit.lab.medium.lag import RECENT_S

    rec = LagRecorder()
    for k in range(100):  # seconds 0..9: 8 ms late
        rec.record(k * 0.1 + 0.008, k * 0.1)
    for k in range(200):  # seconds 20..39: punctual
        rec.record(20 + k * 0.1 + 0.0001, 20 + k * 0.1)
    s = rec.summary(now=40.0)
    assert s["since_start"]["outputs"] == 300
    assert s["since_start"]["max"] == pytest.approx(8.0, rel=0.01)
    assert s["since_start"]["p99"] >= 8.0
    recent = s[f"last_{RECENT_S}s"]
    assert recent["outputs"] == 100 and recent["p99"] <= 0.2 and recent["max"] < 0.2
    assert LagRecorder().summary(now=5.0)["since_start"] == {
        "outputs": 0,
        "p50": None,
        "p99": None,
        "max": None,
    }


def test_radio_losses_outside_the_model_invalidate_the_window():
    from manetkit.lab.radioport import netdev_tx_dropped, sum_unmodelled

    text = (
        "Inter-|   Receive                                                |  Transmit\n"
        " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets"
        " errs drop fifo colls carrier compressed\n"
        "    lo:       0       0    0    0    0     0          0         0        0       0"
        "    0    0    0     0       0          0\n"
        "radio0:   1000      10    0    0    0     0          0         0     2000      20"
        "    0    4    0     0       0          0\n"
    )
    assert netdev_tx_dropped(text, "radio0") == 4
    assert netdev_tx_dropped(text, "mesh0") is None
    radios = sum_unmodelled(
        [{"radio_tap_kernel_drops": 4, "radio_event_drops": 0}, {"radio_tap_kernel_drops": 1}]
    )
    assert radios == {"radio_tap_kernel_drops": 5, "radio_event_drops": 0}
    rec = LagRecorder()
    rec.record(1.0, 1.0)
    a = Reading.from_medium({"t": 1.0, "lag": rec.to_wire()}, extra_unmodelled={})
    rec.record(2.0, 2.0)
    b = Reading.from_medium({"t": 2.0, "lag": rec.to_wire()}, extra_unmodelled=radios)
    f = window(a, b)
    assert not f.valid and f.unmodelled_drops == {"radio_tap_kernel_drops": 5}


def test_fidelity_table_shows_lag_and_drops():
    from manetkit.console import fidelity_table, make_console

    rec = LagRecorder()
    rec.record(1.0005, 1.0)
    table = fidelity_table(
        {
            "lag_ms": rec.summary(now=1.0),
            "drops": {"unmodelled": {"radio_tap_write_drops": 2}, "modelled": {"queue_drops": 0}},
        }
    )
    con = make_console()
    with con.capture() as cap:
        con.print(table)
    text = cap.get()
    assert "since start" in text and "last 10s" in text
    assert "radio_tap_write_drops 2" in text and "none" in text


def test_host_steal_is_read_from_proc_stat_and_shared_over_the_window(tmp_path):
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text("cpu  100 0 50 800 10 0 5 35 20 0\ncpu0 1 2 3\n")
    assert cpu_jiffies(stat) == (35, 1000)  # guest (inside user) not counted twice
    stat.write_text("cpu  400 0 100 1300 10 0 5 185 90 0\n")
    later = cpu_jiffies(stat)
    rec = LagRecorder()
    rec.record(1.0, 1.0)
    a = Reading.from_medium({"t": 1.0, "lag": rec.to_wire()}, cpu_jiffies=(35, 1000))
    rec.record(2.0, 2.0)
    b = Reading.from_medium({"t": 2.0, "lag": rec.to_wire()}, cpu_jiffies=later)
    f = window(a, b)
    assert f.steal_pct == 15.0  # 150 of 1000 ticks went to other guests
    assert f.valid  # steal explains a late window; it never decides one
    assert Fidelity.from_json(f.to_json()) == f
    unread = Reading.from_medium({"t": 1.0, "lag": rec.to_wire()})
    assert window(unread, b).steal_pct is None  # a reading made without /proc/stat
