"""Per-address packet/byte counts of the daemon's data plane (bounded)."""

from __future__ import annotations

from manetkit.daemon.flowcount import FlowCounter


def test_counts_packets_and_bytes_per_address():
    fc = FlowCounter()
    fc.add(bytes([10, 42, 0, 5]), 100)
    fc.add(bytes([10, 42, 0, 5]), 60)
    fc.add(bytes([10, 42, 0, 2]), 1500)
    assert fc.to_json() == {"10.42.0.5": [2, 160], "10.42.0.2": [1, 1500]}


def test_bounded_the_oldest_address_goes():
    fc = FlowCounter(capacity=2)
    for last in (1, 2, 3):
        fc.add(bytes([10, 42, 0, last]), 10)
    assert len(fc) == 2 and fc.evicted == 1
    assert set(fc.to_json()) == {"10.42.0.2", "10.42.0.3"}
