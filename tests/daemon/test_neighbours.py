"""The neighbour table (manetkit/daemon/neighbours.py): configured entries are never
remapped, evicted or forgotten; learnt ones follow what was heard last."""

from __future__ import annotations

from ipaddress import IPv4Address

from manetkit.daemon.neighbours import NeighbourTable

A1, A2, A3 = (IPv4Address(f"10.42.0.{i}") for i in (1, 2, 3))
M1, M2, ROGUE = (bytes([2, 0, 0, 0, 0, i]) for i in (1, 2, 0x99))


def test_a_configured_address_is_not_remapped_to_another_mac():
    nb = NeighbourTable()
    nb.pin(A1, M1)
    v = nb.version
    assert nb.learn(5.0, A1, ROGUE).mac == M1  # a frame claiming A1 from the rogue's MAC
    assert nb.mac_of(A1) == M1 and nb.address_of(ROGUE) is None
    assert nb.refused == 1 and nb.version == v
    assert nb.learn(6.0, A1, M1).last_heard == 6.0  # the configured binding is heard


def test_a_configured_mac_is_not_given_to_another_address():
    nb = NeighbourTable()
    nb.pin(A1, M1)
    nb.learn(1.0, A3, M1)  # the rogue claims A3 at A1's (spoofed) MAC
    assert nb.address_of(M1) == A1 and nb.mac_of(A3) is None and nb.refused == 1


def test_configured_entries_are_neither_forgotten_nor_evicted():
    nb = NeighbourTable(capacity=2)
    nb.pin(A1, M1)
    nb.forget(A1)
    assert nb.mac_of(A1) == M1
    nb.learn(1.0, A2, M2)
    nb.learn(2.0, A3, ROGUE)  # full: the learnt A2 goes, never A1
    assert nb.mac_of(A1) == M1 and nb.mac_of(A2) is None and nb.evicted == 1


def test_learnt_entries_follow_the_last_mac_heard():
    nb = NeighbourTable()
    nb.learn(0.0, A2, M2)
    nb.learn(1.0, A2, ROGUE)
    assert nb.mac_of(A2) == ROGUE and nb.refused == 0


def test_a_full_table_evicts_the_least_recently_heard_without_a_scan():
    nb = NeighbourTable(capacity=3)
    nb.pin(A1, M1)
    nb.learn(1.0, A2, M2)
    nb.learn(2.0, A3, ROGUE)
    nb.learn(3.0, A2, M2)  # heard again: A3 is now the least recently heard
    nb.learn(4.0, IPv4Address("10.42.0.9"), bytes(6))
    assert nb.mac_of(A3) is None and nb.mac_of(A2) == M2 and nb.mac_of(A1) == M1


def test_evicting_from_a_large_table_is_cheap():
    import time

    nb = NeighbourTable(capacity=20_000)
    for i in range(20_000):
        nb.learn(float(i), IPv4Address(0x0A630000 + i), i.to_bytes(6, "big"))
    start = time.process_time()
    for i in range(20_000, 25_000):  # a forged-source flood: every frame a new node
        nb.learn(float(i), IPv4Address(0x0A630000 + i), i.to_bytes(6, "big"))
    assert nb.evicted == 5_000 and len(nb) == 20_000
    assert time.process_time() - start < 1.0  # a scan per frame: ~20 s
