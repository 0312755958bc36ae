"""Bounded state (docs/security.md "Bounded state"), sans-I/O on a fake clock.

Every table a frame from the air can grow is overfilled here: the test asserts the
bound, which entry the eviction rule picks and the counter. Forged-source floods (made-up
initiators, originators, MACs, links, flows) must not grow memory.
"""

from __future__ import annotations

import asyncio
from ipaddress import IPv4Address

from manetkit.daemon.engines.aodv import AodvConfig, AodvEngine
from manetkit.daemon.engines.aodv.routetable import INVALID, VALID, RouteTable
from manetkit.daemon.engines.atra.pre import MAX_SOURCES, PreTable
from manetkit.daemon.engines.atra.srp import MAX_PINS, SrpTable
from manetkit.daemon.engines.base import SendFrame, TxFailed
from manetkit.daemon.engines.dsr import DsrConfig, DsrEngine
from manetkit.daemon.engines.dsr.cache import RouteCache
from manetkit.daemon.engines.dsr.links import MAX_HELD
from manetkit.daemon.engines.shared.bus import MAX_NOTICES, BusSettings, BusState
from manetkit.daemon.engines.smr import SmrConfig, SmrEngine
from manetkit.daemon.engines.smr.strategy import MAX_COPY_FORWARDS, REMEMBERED
from manetkit.daemon.linksense.hello import HelloBackend
from manetkit.daemon.linksense.hysteresis import Down, LinkMonitor
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.sendbuffer import SendBuffer, SendBufferSettings
from manetkit.daemon.wire import aodv, dsr, ipv4
from manetkit.daemon.wire import manet_ext as mx
from manetkit.proxy import frames as fr
from manetkit.proxy import server
from manetkit.proxy.channel import SessionKeys
from manetkit.proxy.config import ProxyConfig
from manetkit.proxy.server import Proxy
from manetkit.proxy.session import Tombstone
from tests.helpers.fakeleg import FakeLeg

ME = IPv4Address("10.42.0.1")
BCAST = IPv4Address("255.255.255.255")


def forged(i: int) -> IPv4Address:
    """A made-up address (10.99.x.y), one per i."""
    return IPv4Address(int(IPv4Address("10.99.0.0")) + i)


def mac(i: int) -> bytes:
    return b"\x02" + i.to_bytes(5, "big")


def drain(eng) -> list:
    out = []
    while (a := eng.next_event()) is not None:
        out.append(a)
    return out


def dsr_request(init: IPv4Address, ident: int, target: IPv4Address, record=()) -> bytes:
    return dsr.encapsulate(
        dsr.IPFields(init, BCAST, ttl=32),
        [dsr.RouteRequest(ident, target, tuple(record))],
        dsr.NO_NEXT_HEADER,
    )


# ---------------------------------------------------------------- the tables alone


def test_neighbour_table_evicts_least_recently_heard_never_pinned():
    t = NeighbourTable(capacity=3)
    t.pin(forged(0), mac(0))  # configured, heard at 0.0: the oldest, but never evicted
    t.learn(1.0, forged(1), mac(1))
    t.learn(2.0, forged(2), mac(2))
    t.learn(3.0, forged(1), mac(1))  # heard again: now forged(2) is the stalest
    v = t.version
    t.learn(4.0, forged(3), mac(3))
    assert len(t) == 3 and t.evicted == 1
    assert t.get(forged(2)) is None and t.address_of(mac(2)) is None
    assert t.get(forged(0)) is not None and t.get(forged(1)) is not None
    assert t.version > v  # the shell's MAC cache must notice
    for i in range(4, 1000):  # a forged-source flood
        t.learn(float(i), forged(i), mac(i))
    assert len(t) == 3 and t.evicted == 997
    assert t.get(forged(0)) is not None


def test_route_cache_evicts_least_recently_used():
    c = RouteCache(ME, timeout=300.0, capacity=4)
    for i in range(4):
        assert c.add(float(i), (ME, forged(i)))
    assert c.lookup(10.0, forged(0)) is not None  # used: now the freshest
    c.add(11.0, (ME, forged(9)))
    assert len(c) == 4 and c.evicted == 1
    assert c.lookup(12.0, forged(1)) is None  # the least recently used went
    assert c.lookup(12.0, forged(0)) is not None


def test_send_buffer_bounds_per_destination_and_total():
    s = SendBufferSettings(send_buffer_packets=10, send_buffer_per_destination=4)
    b = SendBuffer.from_settings(s)
    a, z = forged(1), forged(2)
    added = [b.add(0.0, a, bytes([i])) for i in range(6)]
    assert added == [True] * 4 + [False] * 2  # drop-tail: the oldest four stay
    assert b.release(a) == [bytes([i]) for i in range(4)]
    for _ in range(4):
        b.add(1.0, a, b"a")
    for i in range(3):
        b.add(1.0, forged(10 + i), b"x")
    for _ in range(4):
        b.add(1.0, z, b"z")
    assert len(b) == 10
    assert b.drops == {"full-destination": 2, "full": 1}
    assert [r for r, _, _ in b.take_dropped()] == ["full-destination"] * 2 + ["full"]


def test_aodv_route_table_evicts_invalid_first_then_soonest_expiring():
    t = RouteTable(capacity=3)
    r1, _ = t.update(0.0, forged(1), forged(1), 1, 5, 10.0)  # expires 10
    r2, _ = t.update(0.0, forged(2), forged(2), 1, 5, 3.0)  # expires 3
    r3, _ = t.update(0.0, forged(3), forged(3), 1, 5, 6.0)  # expires 6
    t.invalidate(r1, 20.0)
    t.update(1.0, forged(4), forged(4), 1, 5, 5.0)
    assert t.get(r1.dst_b) is None and t.evicted == 1  # the invalid one, though latest
    t.update(1.0, forged(5), forged(5), 1, 5, 5.0)
    assert t.get(r2.dst_b) is None and t.evicted == 2  # then the valid one ending first
    assert t.get(r3.dst_b) is not None and len(t) == 3
    # A neighbour heard again (confirmed) outlives one-off entries, even expiring first.
    t.touch_neighbour(2.0, forged(3), 0.5)  # r3: confirmed, now expires at 6 still
    t2 = RouteTable(capacity=2)
    nb, _ = t2.touch_neighbour(0.0, forged(10), 1.0)
    t2.touch_neighbour(0.5, forged(10), 1.0)  # heard again: expires 1.5, confirmed
    for i in range(20):  # a forged-source flood of one-off reverse routes
        t2.update(1.0 + i * 0.01, forged(100 + i), forged(100 + i), 1, 5, 3.0)
    assert t2.get(nb.dst_b) is nb and t2.evicted == 19


def test_bus_state_bounds_holds_notices_and_seen():
    b = BusState(BusSettings(bus_max_flows=4, bus_hold_packets=2))
    for i in range(10):
        key = (forged(i).packed, ME.packed, 1000 + i, 80)
        b.start(float(i), key)
        b.hold(key, b"p1")
    assert len(b.holds) == 4 and b.counters["holds-evicted"] == 6
    assert b.counters["held-dropped"] == 6
    assert {k[2] for k in b.holds} == {1006, 1007, 1008, 1009}  # the newest stay
    for i in range(MAX_NOTICES + 50):
        key = (mx.KIND_ERDN, i & 0xFFFF, forged(i))
        assert b.first_time(float(i), key)
        b.sent(float(i), key, ME, b"erdn", None)
        b.ersn((forged(i).packed, ME.packed, 1, 2), forged(i), 1)
    assert len(b.seen) == MAX_NOTICES and b.counters["seen-evicted"] == 50
    assert len(b.pending) == MAX_NOTICES and b.counters["notices-evicted"] == 50
    assert len(b.ersn_ident) == MAX_NOTICES and b.counters["ersn-evicted"] == 50
    assert (mx.KIND_ERDN, 0, forged(0)) not in b.seen  # the oldest went
    bounds = b.bounds()
    assert bounds["bus_holds"] == {"size": 4, "limit": 4, "evicted": 6}


def test_atra_pre_and_srp_bounded():
    pre = PreTable(window_s=1.0)
    for i in range(MAX_SOURCES + 20):
        pre.used(0.5 + i * 1e-3, forged(0), forged(100 + i))  # all within the window
    assert len(pre) == MAX_SOURCES and pre.evicted == 20
    assert forged(100) not in pre.sources(0.6, forged(0))  # least recently seen went
    srp = SrpTable(timeout_s=10.0)
    for i in range(MAX_PINS + 5):
        seg = bytes(4) + i.to_bytes(4, "big") + bytes(4) + b"\x50\x18" + bytes(6) + b"data"
        pkt = ipv4.build(
            forged(i % 250), ME, ipv4.PROTO_TCP, (1000 + i).to_bytes(2, "big") + seg[2:]
        )
        srp.data_arrived(float(i) / 1000, pkt, (forged(i % 250), ME))
    assert srp.pinned_flows(2.0) == MAX_PINS and srp.evicted == 5


# ---------------------------------------------------------------- engines under floods


def test_dsr_forged_request_flood_does_not_grow_memory():
    cfg = DsrConfig(seed=1, route_cache_size=8, request_table_size=4, request_table_ids=2)
    eng = DsrEngine(ME, cfg, NeighbourTable(capacity=16))
    target = IPv4Address("10.42.0.200")
    for i in range(2000):
        now = i * 0.001
        # a made-up initiator, relayed by a made-up neighbour with a made-up MAC
        eng.receive_frame(now, dsr_request(forged(i), i, target, (forged(5000 + i),)), mac(i))
        eng.handle_timer(now + 0.02)
        drain(eng)
    b = eng.bounds()
    assert b["neighbours"] == {"size": 16, "limit": 16, "evicted": 2000 - 16}
    assert b["request_table"]["size"] == 4 and b["request_table"]["evicted"] == 2000 - 4
    assert list(eng.table.table) == [forged(i) for i in range(1996, 2000)]  # newest
    assert b["route_cache"]["size"] == 8 and b["route_cache"]["evicted"] > 0
    assert len(eng.timers) <= cfg.request_forward_ratelimit
    assert eng.status()["bounds"] == b


def test_dsr_forged_route_error_flood_bounds_held_links():
    """Forged Route Errors name made-up links: each one was held for
    ``broken_link_hold_s`` with no bound (memory grew with the flood)."""
    eng = DsrEngine(ME, DsrConfig(seed=1), NeighbourTable())
    n = MAX_HELD + 500
    for i in range(n):
        err = dsr.RouteError.node_unreachable(forged(i), ME, forged(100_000 + i))
        pkt = dsr.encapsulate(dsr.IPFields(forged(i), ME), [err], dsr.NO_NEXT_HEADER)
        eng.receive_frame(i * 1e-4, pkt, mac(1))
        drain(eng)
    assert len(eng.links.held) == MAX_HELD
    assert eng.counters["held-links-evicted"] == 500
    assert frozenset((forged(0), forged(100_000))) not in eng.links.held  # ended first: went
    assert frozenset((forged(n - 1), forged(100_000 + n - 1))) in eng.links.held


def test_dsr_request_forwarding_rate_limit():
    """At most ``request_forward_ratelimit`` rebroadcasts in any second (RFC 3561 10's
    RREQ_RATELIMIT, which RFC 4728 lacks), counted; the window slides."""
    eng = DsrEngine(ME, DsrConfig(seed=1, broadcast_jitter_ms=0), NeighbourTable())
    target = IPv4Address("10.42.0.200")
    sent = []
    for i in range(50):  # 50 distinct requests in 0.49 s
        now = i * 0.01
        eng.receive_frame(now, dsr_request(forged(i), i, target), mac(i))
        eng.handle_timer(now)
        sent += [a for a in drain(eng) if isinstance(a, SendFrame) and a.next_hop is None]
    assert len(sent) == 10
    assert eng.counters["request-ratelimited"] == 40
    assert eng.counters["requests-forwarded"] == 10
    # One second after the first, the window has room again.
    eng.receive_frame(1.0, dsr_request(forged(99), 99, target), mac(99))
    eng.handle_timer(1.0)
    assert any(isinstance(a, SendFrame) and a.next_hop is None for a in drain(eng))


def test_dsr_route_error_rate_limit():
    """RERR_RATELIMIT (RFC 3561 10) in DSR too: a forged source-routed flood whose next
    hop fails triggers at most ``rerr_ratelimit`` Route Errors a second."""
    nb = IPv4Address("10.42.0.2")
    eng = DsrEngine(ME, DsrConfig(seed=1, salvage=False), NeighbourTable())
    for i in range(30):
        src = forged(i)
        inner = ipv4.udp(1, 2, b"x", src, IPv4Address("10.42.0.9"))
        pkt = dsr.encapsulate(
            dsr.IPFields(src, IPv4Address("10.42.0.9")),
            [dsr.SourceRoute((ME, nb), 1)],
            ipv4.PROTO_UDP,
            inner,
        )
        eng.receive_frame(i * 0.01, pkt, mac(i))
        drain(eng)
        eng.link_event(i * 0.01 + 0.001, TxFailed(nb, pkt))
        drain(eng)
    c = eng.counters
    assert c["errors-sent"] + c["errors-unroutable"] == 10
    assert c["errors-ratelimited"] == 20


def test_aodv_forged_rreq_and_hello_flood_bounded():
    cfg = AodvConfig(route_table_size=32, rreq_seen_size=64)
    eng = AodvEngine(ME, cfg, NeighbourTable(capacity=16))
    for i in range(3000):
        now = i * 0.001
        rreq = aodv.RREQ(0, i, IPv4Address("10.42.0.200"), 0, forged(i), 1, unknown_seq=True)
        sender = forged(10_000 + i)
        eng.receive_frame(now, aodv.control_packet(rreq, sender, aodv.BROADCAST, 5), mac(i))
        hello = aodv.RREP(0, sender, 1, sender, 2000)
        eng.receive_frame(now, aodv.control_packet(hello, sender, aodv.BROADCAST, 1), mac(i))
        drain(eng)
    b = eng.bounds()
    assert b["route_table"]["size"] == 32 and b["route_table"]["evicted"] > 0
    assert b["rreq_seen"]["size"] <= 64 and b["rreq_seen"]["evicted"] > 0
    assert b["neighbours"]["size"] == 16
    assert b["hello_from"]["size"] <= 16 and b["hello_from"]["evicted"] > 0
    # The newest reverse route survived; routes kept are the ones expiring last.
    r = eng.route(forged(2999))
    assert r is not None and r.state in (VALID, INVALID)


def test_smr_target_copies_bounded():
    eng = SmrEngine(ME, SmrConfig(seed=1, reply_wait_ms=1000), NeighbourTable())
    init = IPv4Address("10.42.0.7")
    for i in range(REMEMBERED + 40):  # copies of one request over made-up paths
        eng.receive_frame(0.001 * i, dsr_request(init, 1, ME, (forged(i),)), mac(i))
        drain(eng)
    (c,) = eng.strategy.copies.values()
    assert len(c.later) == REMEMBERED
    assert eng.counters["smr-copies-dropped"] == 40 - 1
    for i in range(REMEMBERED + 10):  # requests with made-up initiators, one copy each
        eng.receive_frame(0.5, dsr_request(forged(9000 + i), i, ME), mac(i))
        drain(eng)
    assert len(eng.strategy.copies) == REMEMBERED


def test_link_monitor_and_hello_stations_bounded():
    mon = LinkMonitor(silence_s=3.0, capacity=3)
    for i in range(3):
        mon.heard(float(i), mac(i))
    mon.tx_failed(3.0, mac(1))
    mon.tx_failed(3.1, mac(1))  # mac(1) is down now
    while mon.next_event() is not None:
        pass
    mon.heard(4.0, mac(3))
    out = list(iter(mon.next_event, None))
    assert mon.evicted == 1 and not mon.is_up(mac(1)) and mon.signal(mac(1)) is None
    assert not any(isinstance(d, Down) for d in out)  # a down link went silently
    mon.heard(5.0, mac(4))  # all up: the one heard least recently goes Down
    out = list(iter(mon.next_event, None))
    assert Down(mac(0), "evicted") in out and mon.evicted == 2
    for i in range(5, 2000):
        mon.heard(float(i), mac(i))
    assert len(mon._links) == 3 and mon.evicted == 1999 - 2
    hb = HelloBackend("radio0", lambda now, ev: None, ME, 1.0, lambda b: None, lambda: 0.0)
    hb.capacity = 8
    for i in range(100):
        hb.received(float(i), mac(i))
    assert len(hb.stations()) == 8 and hb.evicted == 92
    assert {s.mac for s in hb.stations()} == {mac(i) for i in range(92, 100)}


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def time(self) -> float:
        return self.t


class _Done:
    def __init__(self, i: int) -> None:
        self.sid = i.to_bytes(16, "big")
        self.delivered = i

    def tombstone(self) -> Tombstone:
        return Tombstone(self.sid, self.delivered, SessionKeys(bytes(32), bytes(32)))


def test_proxy_session_table_and_tombstones_bounded(monkeypatch):
    """At ``max_remote_sessions`` (or ``max_peer_sessions`` for one peer) an OPEN is
    refused with RESET (counted ``refused_limit``); finished sessions' tombstones are
    bounded in number and age, oldest first."""

    async def run() -> None:
        cfg = ProxyConfig(daemon_socket=None, max_sessions=2, max_peer_sessions=1)
        p = Proxy(cfg)
        clock = _Clock()
        p.loop = clock  # type: ignore[assignment]  # remember_done reads only .time()
        monkeypatch.setattr(server, "MAX_TOMBSTONES", 5)
        for i in range(12):
            clock.t = float(i)
            p.remember_done(_Done(i), forged(1))  # type: ignore[arg-type]
        assert list(p.tombstones) == [_Done(i).sid for i in range(7, 12)]
        assert p.counters["tombstones_evicted"] == 7
        clock.t = 11 + server.TOMBSTONE_S + 1  # all too old: gone without counting
        p.remember_done(_Done(99), forged(1))  # type: ignore[arg-type]
        assert list(p.tombstones) == [_Done(99).sid] and p.counters["tombstones_evicted"] == 7

        def open_from(peer: IPv4Address, i: int) -> FakeLeg:
            leg = FakeLeg("10.42.0.9")
            frame = fr.pack_open(bytes([i]) * 16, 0, IPv4Address("10.42.0.9"), 80, "elfn",
                                 0, bytes(range(32)))  # fmt: skip
            reader = fr.FrameReader()
            reader.feed(frame)
            assert p._relay_for(leg, reader.next_record(), peer) is None  # type: ignore[arg-type]
            return leg

        p.remote_by_peer[forged(2)] = 1  # one peer is at its own limit ...
        leg = open_from(forged(2), 1)
        # BUSY, not RESET: the peer's app waits and its proxy dials again
        assert p.counters["refused_limit"] == 1 and leg.reply() == fr.Busy(server.BUSY_RETRY_MS)
        p.remote_by_peer[forged(3)] = 1  # ... and now every remote slot is taken
        leg = open_from(forged(4), 2)
        assert p.counters["refused_limit"] == 2 and leg.reply() == fr.Busy(server.BUSY_RETRY_MS)

    asyncio.run(run())


def test_smr_copies_of_one_request_forwarded_at_most_eight_times():
    """SMR forwards later copies of a request from other neighbours (III-A); those do
    not count against DSR's forwarding limit, so forged previous hops could make it
    rebroadcast one request without end: at most ``MAX_COPY_FORWARDS``."""

    eng = SmrEngine(ME, SmrConfig(seed=1, broadcast_jitter_ms=0), NeighbourTable())
    init, target = IPv4Address("10.42.0.7"), IPv4Address("10.42.0.200")
    sent = 0
    for i in range(20):
        eng.receive_frame(0.01 * i, dsr_request(init, 1, target, (forged(i),)), mac(i))
        eng.handle_timer(0.01 * i)
        sent += sum(isinstance(a, SendFrame) and a.next_hop is None for a in drain(eng))
    assert sent == MAX_COPY_FORWARDS
    assert eng.counters["smr-copies-capped"] == 20 - MAX_COPY_FORWARDS
    assert eng.counters["request-ratelimited"] == 0  # copies are not rate-limited
