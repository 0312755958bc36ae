"""AODV's route table under a forged-source flood (docs/security.md "Bounded state"):
precursor lists are bounded, and the eviction victim is found without scanning the
table, yet it is exactly the entry the documented rule (and a scan) picks."""

from __future__ import annotations

import random
import time
from ipaddress import IPv4Address

from manetkit.daemon.engines.aodv import AodvConfig, AodvEngine
from manetkit.daemon.engines.aodv.routetable import (
    MAX_PRECURSORS,
    REPAIRING,
    VALID,
    Route,
    RouteTable,
)
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.wire import aodv

ME, DEST, NEXT = (IPv4Address(a) for a in ("10.42.0.1", "10.42.0.50", "10.42.0.2"))


def addr(i: int) -> IPv4Address:
    return IPv4Address(0x0A630000 + i)  # 10.99.x.y: made-up nodes


def scan_victim(t: RouteTable) -> Route | None:
    """The rule as the scan it replaces: not repairing; INVALID, then unconfirmed VALID,
    then any VALID; the soonest lifetime end; the oldest (dict order)."""
    victims = [r for r in t._routes.values() if r.state is not REPAIRING]
    return min(victims, key=lambda r: (r.state is VALID, r.confirmed, r.expires), default=None)


def test_eviction_picks_what_a_scan_picks_under_random_churn():
    rng = random.Random(5)
    t = RouteTable(capacity=40)
    now, evicted = 0.0, 0
    for _step in range(6000):
        now += rng.choice((0.0, 0.01, 0.2))
        live = list(t._routes.values())
        op = rng.random()
        if op < 0.55 or not live:
            dst = addr(rng.randrange(400))
            full = len(t) >= t.capacity and dst.packed not in t._routes
            expect = scan_victim(t) if full else None
            before = set(t._routes)
            if op < 0.45:
                t.update(
                    now, dst, NEXT, rng.randrange(1, 6), rng.randrange(1, 50), rng.random() * 5
                )
            else:
                t.touch_neighbour(now, dst, rng.random() * 3)
            gone = before - set(t._routes)
            if expect is not None:
                assert gone == {expect.dst_b}, (gone, expect)
                evicted += 1
            else:
                assert not gone
        elif op < 0.62:
            r = rng.choice(live)  # heard again: confirmed, maybe fresher (6.2)
            t.update(now, r.dst, NEXT, r.hops, r.seq + rng.randrange(2), rng.random() * 5)
        elif op < 0.72:
            t.invalidate(rng.choice(live), now + rng.random() * 3)
        elif op < 0.76:
            rng.choice(live).state = REPAIRING  # maintenance's local repair (6.12)
        elif op < 0.97:
            r = rng.choice(live)
            if r.state is VALID:  # the data path refreshes lifetimes (6.2)
                r.expires = max(r.expires, now + rng.random() * 4)
        else:
            t.expire(now, 3.0)
    assert evicted > 500  # the comparison ran many times
    assert len(t._heap) <= 2 * len(t) + 64 + 1  # stale snapshots do not pile up


def test_eviction_does_not_scan_the_table():
    """20,000 entries, 5,000 new destinations: each one evicts. A scan per eviction
    (what the table did) takes tens of seconds here; the heap takes milliseconds."""
    t = RouteTable(capacity=20_000)
    for i in range(20_000):
        t.update(float(i) * 1e-4, addr(i), NEXT, 2, 1, 6.0)
    start = time.process_time()
    for i in range(20_000, 25_000):
        t.update(2.0 + i * 1e-4, addr(i), NEXT, 2, 1, 6.0)
    spent = time.process_time() - start
    assert t.evicted == 5_000 and len(t) == 20_000
    assert t.get(addr(0).packed) is None and t.get(addr(24_999).packed) is not None
    assert spent < 1.0, f"5,000 evictions took {spent:.2f} s"


def test_precursor_lists_are_bounded():
    """6,000 forged RREQs, each from a made-up neighbour, for a destination the victim
    has a fresh route to: each intermediate RREP (6.6.2) named its asker a precursor."""
    eng = AodvEngine(ME, AodvConfig(hellos=False), NeighbourTable())
    eng.routes.table.update(0.0, DEST, NEXT, 2, 7, 1000.0)
    for i in range(6000):
        sender = addr(i)
        rreq = aodv.RREQ(0, 1, DEST, 0, sender, 1, unknown_seq=True)
        eng.receive_frame(1.0 + i * 1e-3, aodv.control_packet(rreq, sender, aodv.BROADCAST, 1),
                          bytes([2, 0x63]) + i.to_bytes(4, "big"))  # fmt: skip
    fwd = eng.route(DEST)
    assert fwd is not None and eng.counters["rrep-sent-intermediate"] == 6000
    assert len(fwd.precursors) == MAX_PRECURSORS
    assert eng.counters["precursors-evicted"] == 6000 - MAX_PRECURSORS
    assert len(eng.route_table) <= eng.route_table.capacity


def test_the_rreq_duplicate_table_evicts_without_rebuilding():
    """Full of live pairs (a flood within PATH_DISCOVERY_TIME), each new RREQ evicts the
    oldest pair; the table rebuilt itself on every request before."""
    from collections import Counter

    from manetkit.daemon.engines.aodv.discovery import RreqSeen

    counters: Counter[str] = Counter()
    seen = RreqSeen(20_000, 5.6, counters)
    for i in range(20_000):
        assert seen.first(i * 1e-5, (addr(i), 1))
    start = time.process_time()
    for i in range(20_000, 25_000):
        assert seen.first(0.2 + i * 1e-5, (addr(i), 1))
    assert time.process_time() - start < 1.0
    assert counters["rreq-seen-evicted"] == 5_000 and len(seen) == 20_000
    assert (addr(0), 1) not in seen.entries and (addr(24_999), 1) in seen.entries
    assert not seen.first(0.5, (addr(24_999), 1))  # still a duplicate
    seen.purge(100.0)
    assert len(seen) == 0
