"""Holland & Vaidya's expected throughput (eq. 3.1) on a hand-made ground-truth log."""

from __future__ import annotations

import json

import pytest

from manetkit.experiment import metrics, peercount
from manetkit.lab.medium.groundtruth import read_log
from tests.helpers.statuses import make_status

T = {1: 1000.0, 2: 500.0, 3: 300.0}  # kbit/s over chains of 1..3 hops

# A 4-node line n1-n2-n3-n4 whose middle link comes and goes, then n4 walks up to n1.
# wall  0: n1-n2, n2-n3, n3-n4           n1..n4 is 3 hops
# wall 10: n1-n2, n3-n4                  partitioned
# wall 14: n1-n2, n2-n3, n3-n4, n1-n3    2 hops (n1-n3-n4)
# wall 20: n1-n4 direct as well          1 hop
LOG = [
    {"t": 0.0, "wall": 1000.0, "edges": [["n1", "n2"], ["n2", "n3"], ["n3", "n4"]]},
    {"t": 10.0, "wall": 1010.0, "edges": [["n1", "n2"], ["n3", "n4"]]},
    {"t": 14.0, "wall": 1014.0, "edges": [["n1", "n2"], ["n2", "n3"], ["n3", "n4"], ["n1", "n3"]]},
    {"t": 20.0, "wall": 1020.0, "edges": [["n1", "n2"], ["n2", "n3"], ["n3", "n4"], ["n1", "n3"],
                                          ["n1", "n4"]]},
]  # fmt: skip


def test_expected_throughput_is_the_time_weighted_chain_throughput_with_partitions_at_zero(
    tmp_path,
):
    path = tmp_path / "ground-truth.jsonl"
    path.write_text("".join(json.dumps(ev) + "\n" for ev in LOG))
    events = read_log(path)
    # window 1005..1025: 5 s at 3 hops, 4 s partitioned, 6 s at 2 hops, 5 s at 1 hop
    timeline = metrics.hop_timeline(events, "n1", "n4")
    assert timeline == [(1000.0, 3), (1010.0, None), (1014.0, 2), (1020.0, 1)]
    t_at = metrics.time_at_hops(timeline, 1005.0, 1025.0)
    assert t_at == {3: 5.0, None: 4.0, 2: 6.0, 1: 5.0}
    want = (5 * 300 + 4 * 0 + 6 * 500 + 5 * 1000) / 20  # = 475
    assert metrics.expected_throughput(t_at, T) == pytest.approx(want)
    got = metrics.pair_metrics(events, "n1", "n4", 1005.0, 1025.0, T)
    assert got["expected_kbps"] == pytest.approx(475.0)
    assert got["partition_s"] == 4.0
    assert got["hops_s"] == {"1": 5.0, "2": 6.0, "3": 5.0, "inf": 4.0}
    assert got["mean_hops"] == pytest.approx((5 * 3 + 6 * 2 + 5 * 1) / 16, abs=0.01)


def test_always_partitioned_expects_nothing_and_no_table_expects_none():
    events = [{"t": 0, "wall": 0.0, "edges": [["n1", "n2"]]}]
    assert metrics.pair_metrics(events, "n1", "n3", 0, 10, T)["expected_kbps"] == 0.0
    assert metrics.pair_metrics(events, "n1", "n2", 0, 10, None)["expected_kbps"] is None
    assert metrics.expected_throughput({}, T) is None


def test_hops_beyond_the_table_take_its_plateau():
    assert metrics.chain_throughput(T, 7) == 300.0
    with pytest.raises(ValueError):
        metrics.chain_throughput({2: 1.0}, 1)


def test_control_overhead_counts_routing_packets_per_delivered_data_packet():
    def status(req, rep, beacons, tun_tx):
        return make_status(
            engine={"counters": {"requests-sent": req, "replies-sent": rep, "salvaged": 9}},
            counters={"beacons_sent": beacons, "dataplane": {"tun_tx": tun_tx}},
        )

    before = metrics.control_totals([status(1, 1, 10, 100), status(0, 2, 10, 0)])
    after = metrics.control_totals([status(3, 1, 15, 300), status(0, 4, 16, 0)])
    got = metrics.control_overhead(before, after)
    assert got["control_packets"] == 2 + 2 + 11  # requests, replies, beacons; not salvaged
    assert got["delivered_packets"] == 200
    assert got["per_delivered"] == pytest.approx(15 / 200)


def test_discovery_latency_is_the_mean_over_the_discoveries_completed_in_the_window():
    def status(done, ms, req):
        return make_status(engine={"counters": {"discoveries-completed": done,
                                                "discovery-latency-ms": ms,
                                                "requests-sent": req}})  # fmt: skip

    before = metrics.control_totals([status(2, 300, 5), status(0, 0, 1)])
    after = metrics.control_totals([status(4, 700, 9), status(1, 200, 2)])
    got = metrics.discovery_latency(before, after)
    assert got["completed"] == 3
    assert got["mean_s"] == pytest.approx(0.2)  # (400 + 200) ms / 3
    # The discovery counters are not routing packets: not in the control overhead.
    assert metrics.control_overhead(before, after)["control_packets"] == 5
    assert metrics.discovery_latency(after, after) == {
        "completed": 0, "mean_s": None, "source": got["source"]}  # fmt: skip


def test_peer_control_overhead_from_nft_counters():
    def listing(ctl_p, ctl_b, data_p, data_b):
        return json.dumps({"nftables": [
            {"metainfo": {"version": "1.0.6"}},
            {"counter": {"family": "inet", "name": "ctl_out", "table": "mkx_count",
                         "packets": ctl_p, "bytes": ctl_b}},
            {"counter": {"family": "inet", "name": "data_in", "table": "mkx_count",
                         "packets": data_p, "bytes": data_b}},
        ]})  # fmt: skip

    before = peercount.parse(listing(10, 1000, 0, 0))
    after = peercount.parse(listing(30, 3000, 400, 500_000))
    got = peercount.overhead(before, after)
    assert (got["control_packets"], got["control_bytes"]) == (20, 2000)
    assert got["delivered_packets"] == 400
    assert got["per_delivered"] == pytest.approx(0.05)
    assert got["bytes_per_delivered"] == pytest.approx(5.0)
    assert peercount.overhead(before, before)["per_delivered"] is None
    # The table counts the daemons' UDP ports on radio0, control out and data in.
    assert "udp dport { 6696, 4305, 4307 }" in peercount.RULES
    assert 'oifname "radio0"' in peercount.RULES and 'iifname "radio0"' in peercount.RULES


def test_a_run_records_the_checkout_it_used():
    from manetkit.experiment.execute import code_version

    got = code_version()
    if got is None:
        pytest.skip("not a git checkout")
    assert len(got["commit"]) == 40 and int(got["commit"], 16) >= 0
    assert all(p.startswith("manetkit/") for p in got["dirty"])
