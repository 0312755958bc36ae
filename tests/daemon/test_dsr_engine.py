"""DSR engine behaviour on a simulated network with a fake clock (RFC 4728 section 8)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from manetkit.daemon.engines.base import TxFailed
from manetkit.daemon.engines.dsr import DsrConfig, DsrEngine, max_overhead
from manetkit.daemon.engines.smr import SmrConfig
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.wire import dsr, ipv4
from tests.daemon.dsrutil import (
    A,
    after_hops,
    chain_links,
    dsr_net,
    first,
    paths,
    tcp_packet,
    udp_packet,
    uses_link,
)


def requests_from(sim, node):
    return [f for f in sim.frames_from(A(node)) if first(f.packet, dsr.RouteRequest)]


def test_discovery_over_5_node_chain_ring0_then_propagating():
    sim = dsr_net(5, chain_links(5))
    pkt = udp_packet(A(1), A(5))
    sim.send(A(1), pkt)
    sim.run()
    reqs = requests_from(sim, 1)
    # 8.2.1: a non-propagating request (TTL 1) first, the propagating one after
    # NonpropRequestTimeout (30 ms), and no more once the reply came.
    assert [(f.time, ipv4.parse(f.packet).ttl) for f in reqs] == [(0.0, 1), (0.03, 255)]
    assert sim.delivered[A(5)] == [after_hops(pkt, 4)]
    assert paths(sim, 1) == [(1, 2, 3, 4, 5)]
    (up,) = sim.events(A(1), "route-up")
    assert up["dst"] == "10.42.0.5" and up["hops"] == 4 and up["next_hop"] == "10.42.0.2"
    assert up["path"] == [str(A(i)) for i in range(1, 6)]
    # The data frame from the source carries the discovered route (8.1.3).
    data = [
        f
        for f in sim.frames_from(A(1))
        if ipv4.parse(f.packet).ttl == 64 and first(f.packet, dsr.SourceRoute)
    ]
    sr = first(data[0].packet, dsr.SourceRoute)
    assert sr.addresses == (A(2), A(3), A(4)) and sr.segments_left == 3 and sr.salvage == 0
    # Every node learnt the previous hop's MAC from the packets it received.
    assert sim.engines[A(3)].neighbours.mac_of(A(2)) == b"\x02\x00" + A(2).packed
    assert sim.engines[A(5)].neighbours.mac_of(A(4)) == b"\x02\x00" + A(4).packed
    # The target and intermediates learnt routes back to the initiator.
    assert (5, 4, 3, 2, 1) in paths(sim, 5)


def test_ring0_request_answers_a_neighbour_target_without_propagating():
    sim = dsr_net(3, chain_links(3))
    sim.send(A(1), udp_packet(A(1), A(2)))
    sim.run()
    assert len(requests_from(sim, 1)) == 1
    assert sim.engines[A(2)].counters["requests-forwarded"] == 0
    assert len(sim.delivered[A(2)]) == 1


def test_send_buffer_released_in_order():
    sim = dsr_net(5, chain_links(5))
    sent = [udp_packet(A(1), A(5), f"pkt{i}".encode(), ident=i) for i in range(8)]
    for p in sent:
        sim.send(A(1), p)
    assert len(sim.engines[A(1)].send_buffer) == 8
    sim.run()
    assert sim.delivered[A(5)] == [after_hops(p, 4) for p in sent]
    assert len(sim.engines[A(1)].send_buffer) == 0


@pytest.mark.parametrize("cache_replies", [False, True])
def test_cache_replies_off_vs_on_with_stale_entry(cache_replies):
    # Node 2 holds a stale path 2-6-5 (node 6 left long ago).
    sim = dsr_net([1, 2, 3, 4, 5, 6], chain_links(5), cache_replies=cache_replies)
    sim.engines[A(2)].cache.add(0.0, (A(2), A(6), A(5)))
    pkt = udp_packet(A(1), A(5))
    sim.send(A(1), pkt)
    sim.run()
    replies = [f for f in sim.frames if first(f.packet, dsr.RouteReply)]
    first_reply = replies[0]
    if not cache_replies:
        # Off (Holland & Vaidya 5): only the target answers, with a fresh route.
        assert {ipv4.parse(f.packet).src for f in replies} == {A(5)}
        assert paths(sim, 1) == [(1, 2, 3, 4, 5)]
        assert sim.delivered[A(5)] == [after_hops(pkt, 4)]
    else:
        # On: node 2 answers the ring-0 request from its stale cache ...
        assert ipv4.parse(first_reply.packet).src == A(2)
        assert first(first_reply.packet, dsr.RouteReply).addresses == (A(2), A(6), A(5))
        assert sim.engines[A(2)].counters["cache-replies"] == 1
        # ... so the data goes into the stale route and is lost at node 2, which
        # reports the break back to the source.
        assert sim.delivered[A(5)] == []
        assert sim.engines[A(2)].counters["errors-sent"] == 1
        assert not any(uses_link(p, 2, 6) for p in paths(sim, 1))


def test_cached_replies_are_delayed_by_route_length():
    # 8.2.5: nodes 2 and 3 both answer from their caches; the shorter route goes first.
    sim = dsr_net([1, 2, 3, 6, 7, 8, 9], [(1, 2), (1, 3)], cache_replies=True)
    sim.engines[A(2)].cache.add(0.0, (A(2), A(9), A(8)))
    sim.engines[A(3)].cache.add(0.0, (A(3), A(7), A(6), A(8)))
    sim.send(A(1), udp_packet(A(1), A(8)))
    sim.run(duration=0.2)
    replies = {f.sender: f.time for f in sim.frames if first(f.packet, dsr.RouteReply)}
    assert 0.02 <= replies[A(2)] - 0.001 < 0.03  # H * (h - 1 + r), h = 3 hops, H = 10 ms
    assert 0.03 <= replies[A(3)] - 0.001 < 0.04  # h = 4 hops
    assert sim.events(A(1), "route-up")[0]["path"] == [str(A(i)) for i in (1, 2, 9, 8)]


def test_salvage_after_break_with_alternative_route():
    # 1-2-3-4 and a longer alternative 2-5-6-4.
    links = [(1, 2), (2, 3), (3, 4), (2, 5), (5, 6), (6, 4)]
    sim = dsr_net(6, links)
    sim.send(A(1), udp_packet(A(1), A(4), b"first"))
    sim.run()
    assert (1, 2, 3, 4) in paths(sim, 1)
    assert (2, 5, 6, 4) in paths(sim, 2)  # learnt from the target's second reply
    sim.unlink(A(2), A(3))
    second = udp_packet(A(1), A(4), b"second")
    sim.send(A(1), second)
    sim.run()
    assert sim.engines[A(2)].counters["salvaged"] == 1
    (got,) = [p for p in sim.delivered[A(4)] if p.endswith(b"second")]
    assert got == after_hops(second, 4)  # salvaged: 1-2-5-6-4
    salvaged = [
        f
        for f in sim.frames_from(A(2))
        if (sr := first(f.packet, dsr.SourceRoute)) and sr.salvage == 1
    ]
    assert first(salvaged[0].packet, dsr.SourceRoute).addresses == (A(2), A(5), A(6))
    # The source heard the Route Error and cut the broken link (8.3.4, 8.3.5).
    assert not any(uses_link(p, 2, 3) for p in paths(sim, 1))


def test_salvage_off_drops_and_reports():
    links = [(1, 2), (2, 3), (3, 4), (2, 5), (5, 6), (6, 4)]
    sim = dsr_net(6, links, salvage=False)
    sim.send(A(1), udp_packet(A(1), A(4), b"first"))
    sim.run()
    sim.unlink(A(2), A(3))
    sim.send(A(1), udp_packet(A(1), A(4), b"second"))
    sim.run()
    assert sim.engines[A(2)].counters["salvaged"] == 0
    assert [d.reason for d in sim.dropped[A(2)]] == ["link-broken"]
    assert not any(p.endswith(b"second") for p in sim.delivered[A(4)])


def test_route_shortening_by_gratuitous_reply():
    sim = dsr_net(4, chain_links(4), promiscuous=True)
    sim.send(A(1), udp_packet(A(1), A(4), b"a"))
    sim.run()
    assert paths(sim, 1) == [(1, 2, 3, 4)]
    sim.link(A(1), A(3))  # node 3 moved into node 1's range
    for i in range(5):
        sim.send(A(1), udp_packet(A(1), A(4), b"b%d" % i))
        sim.run(duration=0.1)
    # Node 3 overheard 1 -> 2 and, being later in the route, replied gratuitously
    # (8.4.4), once per GratReplyHoldoff although it overheard more.
    assert sim.engines[A(3)].counters["grat-replies"] == 1
    assert (1, 3, 4) in paths(sim, 1)
    last = sim.frames_from(A(1))[-1]
    assert last.next_hop == A(3)
    assert first(last.packet, dsr.SourceRoute).addresses == (A(3),)
    assert len(sim.delivered[A(4)]) == 6


def test_gratuitous_replies_can_be_turned_off():
    sim = dsr_net(4, chain_links(4), promiscuous=True, gratuitous_replies=False)
    sim.send(A(1), udp_packet(A(1), A(4)))
    sim.run()
    sim.link(A(1), A(3))
    sim.send(A(1), udp_packet(A(1), A(4)))
    sim.run()
    assert sim.engines[A(3)].counters["grat-replies"] == 0
    assert paths(sim, 1) == [(1, 2, 3, 4)]


def test_route_error_purges_caches_along_the_path_and_reports_elfn_fields():
    sim = dsr_net(5, chain_links(5))
    sim.send(A(1), udp_packet(A(1), A(5)))
    sim.run()
    for node in (1, 2, 3):
        assert any(uses_link(p, 3, 4) for p in paths(sim, node))
    sim.unlink(A(3), A(4))
    sim.send(A(1), tcp_packet(A(1), A(5), 40000, 80, 123456789))
    sim.run()
    for node in (1, 2, 3):
        assert not any(uses_link(p, 3, 4) for p in paths(sim, node)), node
    # The detecting node reports the failed TCP packet for ELFN.
    down3 = [e for e in sim.events(A(3), "route-down") if e["dst"] == "10.42.0.5"]
    assert down3 and down3[0]["sport"] == 40000 and down3[0]["dport"] == 80
    assert down3[0]["seq"] == 123456789 and down3[0]["src"] == "10.42.0.1"
    assert down3[0]["broken_link"] == ["10.42.0.3", "10.42.0.4"]
    assert down3[0]["reason"] == "tx-failed" and down3[0]["proto"] == ipv4.PROTO_TCP
    # The source learns of it from the Route Error.
    down1 = sim.events(A(1), "route-down")
    assert {e["dst"] for e in down1} == {"10.42.0.4", "10.42.0.5"}
    assert all(e["reason"] == "rerr" and e["broken_by"] == "10.42.0.3" for e in down1)
    assert all(e["next_hop"] == "10.42.0.2" for e in down1)
    rerr = [f for f in sim.frames_from(A(3)) if first(f.packet, dsr.RouteError)]
    err = first(rerr[0].packet, dsr.RouteError)
    assert (err.error_src, err.error_dst, err.unreachable) == (A(3), A(1), A(4))


def test_link_down_purges_and_source_rediscovers():
    sim = dsr_net(4, [(1, 2), (2, 3)])
    sim.send(A(1), udp_packet(A(1), A(3), b"x"))
    sim.run()
    assert paths(sim, 1) == [(1, 2, 3)]
    sim.unlink(A(1), A(2), notify=True)
    assert paths(sim, 1) == []
    assert {e["dst"] for e in sim.events(A(1), "route-down")} == {"10.42.0.2", "10.42.0.3"}
    sim.link(A(1), A(4))
    sim.link(A(4), A(3))
    sent_before = sim.engines[A(1)].counters["requests-sent"]
    sim.send(A(1), udp_packet(A(1), A(3), b"y"))
    sim.run()
    assert sim.engines[A(1)].counters["requests-sent"] > sent_before
    assert sim.delivered[A(3)][-1].endswith(b"y")
    assert paths(sim, 1) == [(1, 4, 3)]
    ups = [e for e in sim.events(A(1), "route-up") if e["dst"] == "10.42.0.3"]
    assert ups[-1]["path"] == ["10.42.0.1", "10.42.0.4", "10.42.0.3"]


def test_link_down_uses_another_cached_route_without_discovery():
    links = [(1, 2), (2, 3), (1, 4), (4, 5), (5, 3)]
    sim = dsr_net(5, links)
    sim.send(A(1), udp_packet(A(1), A(3), b"x"))
    sim.run()
    assert paths(sim, 1) == [(1, 2, 3), (1, 4, 5, 3)]  # the target answered both copies
    sim.unlink(A(1), A(2), notify=True)
    sent_before = sim.engines[A(1)].counters["requests-sent"]
    sim.send(A(1), udp_packet(A(1), A(3), b"y"))
    sim.run()
    assert sim.engines[A(1)].counters["requests-sent"] == sent_before
    assert sim.delivered[A(3)][-1].endswith(b"y")
    assert sim.events(A(1), "route-down") == [
        {
            "dst": "10.42.0.2",
            "next_hop": "10.42.0.2",
            "reason": "lost",
            "broken_link": ["10.42.0.1", "10.42.0.2"],
        }
    ]


def test_source_reroutes_own_packet_when_first_hop_fails():
    links = [(1, 2), (2, 3), (1, 4), (4, 5), (5, 3)]
    sim = dsr_net(5, links)
    sim.send(A(1), udp_packet(A(1), A(3), b"x"))
    sim.run()
    sim.unlink(A(1), A(2))  # no link-sensing notice: the MAC's tx failure tells us
    sim.send(A(1), udp_packet(A(1), A(3), b"y"))
    sim.run()
    assert sim.delivered[A(3)][-1].endswith(b"y")
    assert sim.engines[A(1)].counters["rerouted"] == 1


def test_request_backoff_is_exponential_and_capped():
    sim = dsr_net(2, [(1, 2)], send_buffer_timeout_s=1000.0, max_request_rexmt=8)
    pkt = udp_packet(A(1), A(9))
    sim.send(A(1), pkt)
    sim.run(until=500)
    times = [f.time for f in requests_from(sim, 1)]
    gaps = [round(b - a, 6) for a, b in zip(times, times[1:], strict=False)]
    # Ring-0, then RequestPeriod * 2^k capped at MaxRequestPeriod (8.2.1).
    assert gaps == [0.03, 0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    assert [(d.reason, d.packet) for d in sim.dropped[A(1)]] == [("no-route", pkt)]
    assert sim.events(A(1), "route-down") == [{"dst": "10.42.0.9", "reason": "no-route"}]
    assert sim.engines[A(1)].status()["discoveries"] == []
    # Node 2 forwarded each propagating request once (ids differ), never the ring-0 one.
    assert sim.engines[A(2)].counters["requests-forwarded"] == 9


def test_duplicate_requests_suppressed():
    # A ring: node 4 hears the request from 2 and from 3; it forwards it once.
    links = [(1, 2), (1, 3), (2, 4), (3, 4), (4, 5)]
    sim = dsr_net(5, links)
    sim.send(A(1), udp_packet(A(1), A(9)))
    sim.run(until=0.2)
    eng4 = sim.engines[A(4)]
    assert eng4.counters["requests-forwarded"] == 1
    assert eng4.counters["request-duplicate"] >= 1
    assert eng4.counters["request-loop"] + sim.engines[A(2)].counters["request-loop"] >= 1


def test_send_buffer_timeout_drops_counted():
    sim = dsr_net(2, [(1, 2)])
    pkts = [udp_packet(A(1), A(9), bytes([i])) for i in range(3)]
    for p in pkts:
        sim.send(A(1), p)
    sim.run(until=29.9)
    assert sim.dropped[A(1)] == []
    sim.run(until=31)
    assert [(d.reason, d.packet) for d in sim.dropped[A(1)]] == [("timeout", p) for p in pkts]
    st = sim.engines[A(1)].status()
    assert st["counters"]["drop-timeout"] == 3 and st["send_buffer_drops"] == {"timeout": 3}
    assert st["discoveries"] == [] and st["send_buffer"] == {}


def test_send_buffer_full_drops():
    sim = dsr_net(2, [(1, 2)], send_buffer_packets=2)
    for i in range(3):
        sim.send(A(1), udp_packet(A(1), A(9), bytes([i])))
    assert [d.reason for d in sim.dropped[A(1)]] == ["full"]


def _raw(options_bytes: bytes, dst=None, plen=None) -> bytes:
    body = bytes((ipv4.PROTO_UDP, 0)) + (len(options_bytes) if plen is None else plen).to_bytes(
        2, "big"
    )
    return ipv4.build(A(7), dst or A(1), ipv4.PROTO_DSR, body + options_bytes)


MALFORMED = {
    "empty": b"",
    "short": b"\x45" * 10,
    "ipv6": b"\x60" + bytes(39),
    "no-dsr-header": ipv4.build(A(7), A(1), ipv4.PROTO_DSR, b"\x11"),
    "payload-length-past-end": _raw(b"\x60\x02\x00\x00", plen=40),
    "segments-left-too-big": _raw(b"\x60\x06\x00\x05" + A(1).packed),
    "srcrt-odd-length": _raw(b"\x60\x05\x00\x00" + A(1).packed[:3]),
    "option-past-end": _raw(b"\x01\x20\x00\x01"),
    "rreq-too-short": _raw(b"\x01\x03\x00\x01\x0a"),
    "rerr-no-unreachable": _raw(b"\x03\x0a\x01\x00" + A(7).packed + A(1).packed),
}


def test_malformed_input_counted_and_dropped():
    sim = dsr_net(2, [(1, 2)])
    for bad in MALFORMED.values():
        sim.inject(A(1), bad, b"\x02\x00\x0a\x2a\x00\x07")
    eng = sim.engines[A(1)]
    assert eng.counters["malformed"] == len(MALFORMED)
    assert [d.reason for d in sim.dropped[A(1)]] == ["malformed"] * len(MALFORMED)
    # Still works afterwards.
    sim.send(A(1), udp_packet(A(1), A(2)))
    sim.run()
    assert len(sim.delivered[A(2)]) == 1


def test_malformed_local_packet_refused():
    sim = dsr_net(1, [])
    sim.send(A(1), b"\x45\x00")
    assert [d.reason for d in sim.dropped[A(1)]] == ["malformed"]


def test_unknown_options_follow_their_type_bits():
    sim = dsr_net(3, chain_links(3))
    sim.send(A(1), udp_packet(A(1), A(3), b"warmup"))
    sim.run()
    inner = udp_packet(A(1), A(3), b"ext")
    for otype, arrives in ((0x05, True), (0x45, True), (0xC5, False)):
        pkt = dsr.add_header(
            inner,
            [dsr.UnknownOption(otype, b"\x01\x02"), dsr.SourceRoute((A(2),), 1)],
        )
        sim.inject(A(2), pkt, b"\x02\x00" + A(1).packed)
        sim.run()
        fwd = sim.frames_from(A(2))[-1]
        if arrives:
            kept = [o for o in [*(_opts(fwd.packet))] if isinstance(o, dsr.UnknownOption)]
            assert (kept != []) == (otype >> 6 == 0), hex(otype)  # 00 skip, 01 remove
            assert sim.delivered[A(3)][-1] == after_hops(inner, 2)
        else:
            assert sim.dropped[A(2)][-1].reason == "unknown-option"


def _opts(packet):
    _, hdr = dsr.parse(packet)
    return [p.option for p in hdr.options]


def test_ttl_expiry_on_forwarding_dropped():
    sim = dsr_net(3, chain_links(3))
    pkt = dsr.add_header(
        ipv4.build(A(1), A(3), ipv4.PROTO_UDP, b"12345678", ttl=1), [dsr.SourceRoute((A(2),), 1)]
    )
    sim.inject(A(2), pkt, b"\x02\x00" + A(1).packed)
    assert [d.reason for d in sim.dropped[A(2)]] == ["ttl-expired"]


def test_forwarding_decrements_ttl_and_keeps_checksum():
    sim = dsr_net(3, chain_links(3))
    pkt = dsr.add_header(udp_packet(A(1), A(3)), [dsr.SourceRoute((A(2),), 1)])
    sim.inject(A(2), pkt, b"\x02\x00" + A(1).packed)
    (f,) = sim.frames_from(A(2))
    assert f.next_hop == A(3)
    assert ipv4.parse(f.packet).ttl == 63 and ipv4.checksum(f.packet[:20]) == 0
    assert first(f.packet, dsr.SourceRoute).segments_left == 0


def test_status_shape():
    sim = dsr_net(3, chain_links(3))
    sim.send(A(1), udp_packet(A(1), A(3)))
    sim.run()
    st = sim.engines[A(1)].status()
    assert st["protocol"] == "dsr" and st["address"] == "10.42.0.1"
    assert st["paths"][0]["path"] == ["10.42.0.1", "10.42.0.2", "10.42.0.3"]
    assert st["paths"][0]["hops"] == 2 and st["paths"][0]["age_s"] >= 0
    assert st["paths"][0]["dst"] == "10.42.0.3" and st["paths"][0]["next_hop"] == "10.42.0.2"
    assert sim.engines[A(2)].status()["counters"]["data-forwarded"] == 1
    assert sim.engines[A(3)].status()["counters"]["data-delivered"] == 1
    assert st["counters"]["requests-sent"] == 2 and st["counters"]["data-sent"] == 1
    assert isinstance(st["request_table"], dict)
    json.dumps(st)


def test_route_cache_timeout():
    sim = dsr_net(3, chain_links(3), route_cache_timeout_s=5.0)
    sim.send(A(1), udp_packet(A(1), A(3)))
    sim.run(duration=1.0)
    assert paths(sim, 1)
    sim.run(duration=5.0)
    assert sim.engines[A(1)].status()["paths"] == []


def test_config_refuses_bad_values_naming_the_field():
    with pytest.raises(ValidationError, match="max_salvage_count"):
        DsrConfig(max_salvage_count=16)
    with pytest.raises(ValidationError, match="request_period_ms"):
        DsrConfig(request_period_ms=20_000)
    with pytest.raises(ValidationError, match="cache_reply"):
        DsrConfig(cache_reply=True)  # typo: unknown fields are refused
    cfg = DsrConfig()
    assert (cfg.discovery_hop_limit, cfg.broadcast_jitter_ms, cfg.route_cache_timeout_s) == (
        255,
        10,
        300,
    )
    assert (cfg.send_buffer_timeout_s, cfg.max_request_period_s, cfg.request_period_ms) == (
        30,
        10,
        500,
    )
    assert (cfg.nonprop_request_timeout_ms, cfg.max_salvage_count, cfg.grat_reply_holdoff_s) == (
        30,
        15,
        1,
    )
    assert (cfg.request_table_size, cfg.request_table_ids, cfg.max_request_rexmt) == (64, 16, 16)
    assert (cfg.rexmt_buffer_size, cfg.max_maint_rexmt) == (50, 2)
    assert cfg.cache_replies is False and cfg.salvage and cfg.gratuitous_replies


def test_max_overhead_fits_the_longest_route():
    # A salvaged packet on the longest route carries max_route_length addresses.
    n = 6
    pkt = udp_packet(A(1), A(2), b"x" * 100)
    hops = tuple(A(10 + i) for i in range(n))
    out = dsr.add_header(pkt, [dsr.SourceRoute(hops, n - 1, salvage=3)])
    assert len(out) - len(pkt) == max_overhead(n)


_addr_st = st.sampled_from([A(i) for i in range(1, 6)])
_opt_st = st.one_of(
    st.builds(
        dsr.RouteRequest, st.integers(0, 3), _addr_st, st.lists(_addr_st, max_size=4).map(tuple)
    ),
    st.builds(dsr.RouteReply, st.lists(_addr_st, max_size=4).map(tuple)),
    st.builds(dsr.RouteError.node_unreachable, _addr_st, _addr_st, _addr_st, st.integers(0, 15)),
    st.lists(_addr_st, max_size=4).flatmap(
        lambda a: st.builds(
            dsr.SourceRoute, st.just(tuple(a)), st.integers(0, len(a)), st.integers(0, 15)
        )
    ),
    st.builds(dsr.UnknownOption, st.sampled_from([5, 0x45, 0x85, 0xC5]), st.binary(max_size=4)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    frames=st.lists(
        st.tuples(
            _addr_st,
            _addr_st,
            st.lists(_opt_st, max_size=3),
            st.sampled_from([6, 17, 59]),
            st.integers(1, 3),
            st.sampled_from(["rx", "txfail", "local"]),
        ),
        max_size=8,
    ),
    garbage=st.binary(max_size=60),
)
def test_engine_never_raises_on_arbitrary_input(frames, garbage):
    eng = DsrEngine(A(3), DsrConfig(seed=0), NeighbourTable())
    now = 0.0
    eng.receive_frame(now, garbage, b"\x02" * 6)
    for src, dst, opts, nh, ttl, how in frames:
        now += 0.01
        try:
            pkt = dsr.encapsulate(dsr.IPFields(src, dst, ttl=ttl), opts, nh, b"\x00" * 20)
        except ValueError:
            continue
        if how == "rx":
            eng.receive_frame(now, pkt, b"\x02\x00" + src.packed, -50.0)
        elif how == "txfail":
            eng.link_event(now, TxFailed(dst, pkt))
        else:
            eng.send_local(now, ipv4.build(A(3), dst, nh, b"\x00" * 20, ttl=ttl))
        if (t := eng.get_timer()) is not None and t <= now + 1:
            eng.handle_timer(t)
        while eng.next_event() is not None:
            pass
    json.dumps(eng.status())


@st.composite
def connected_graphs(draw):
    """A random connected graph on nodes 1..n: a random tree plus extra edges."""
    n = draw(st.integers(2, 8))
    edges = {(draw(st.integers(1, i - 1)), i) for i in range(2, n + 1)}
    extra = draw(st.lists(st.tuples(st.integers(1, n), st.integers(1, n)), max_size=n))
    edges |= {(min(a, b), max(a, b)) for a, b in extra if a != b}
    return n, sorted(edges)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    graph=connected_graphs(),
    pairs=st.lists(st.tuples(st.integers(1, 8), st.integers(1, 8)), min_size=1, max_size=4),
)
def test_every_packet_delivered_exactly_once_on_random_static_graphs(graph, pairs):
    n, edges = graph
    sim = dsr_net(n, edges)
    sent: dict[int, list[bytes]] = {}
    k = 0
    for s, d in pairs:
        s, d = (s - 1) % n + 1, (d - 1) % n + 1
        if s == d:
            continue
        for _ in range(2):
            k += 1
            sim.send(A(s), udp_packet(A(s), A(d), b"%d" % k, ident=k))
            sent.setdefault(d, []).append(b"%d" % k)
    sim.run(duration=5.0)
    for d, payloads in sent.items():
        got = sorted(p[28:] for p in sim.delivered[A(d)])
        assert got == sorted(payloads), (edges, pairs)
    for i in range(1, n + 1):
        for path in paths(sim, i):
            assert len(set(path)) == len(path)  # cached routes are loop-free
            assert all(
                (min(a, b), max(a, b)) in edges for a, b in zip(path, path[1:], strict=False)
            )


def _connected(n: int, edges: set[tuple[int, int]]) -> bool:
    seen, todo = {1}, [1]
    while todo:
        x = todo.pop()
        for a, b in edges:
            for u, v in ((a, b), (b, a)):
                if u == x and v not in seen:
                    seen.add(v)
                    todo.append(v)
    return len(seen) == n


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=connected_graphs(), data=st.data())
def test_recovery_after_a_link_break_on_random_graphs(graph, data):
    n, edges = graph
    s = data.draw(st.integers(1, n))
    d = data.draw(st.integers(1, n).filter(lambda x: x != s))
    sim = dsr_net(n, edges)
    sim.send(A(s), udp_packet(A(s), A(d), b"before"))
    sim.run(duration=2.0)
    route = sim.engines[A(s)].cache.lookup(sim.now, A(d))
    hops = [(int(str(a).rsplit(".", 1)[1])) for a in route]
    links = [(min(a, b), max(a, b)) for a, b in zip(hops, hops[1:], strict=False)]
    broken = data.draw(st.sampled_from(links))
    if not _connected(n, set(edges) - {broken}):
        return  # the break partitions the graph: nothing to recover
    sim.unlink(A(broken[0]), A(broken[1]))
    sim.send(A(s), udp_packet(A(s), A(d), b"during"))  # may be salvaged or lost
    sim.run(duration=5.0)
    sim.send(A(s), udp_packet(A(s), A(d), b"after"))
    sim.run(duration=5.0)
    got = [p[28:] for p in sim.delivered[A(d)]]
    assert got.count(b"before") == 1 and got.count(b"during") <= 1
    assert got.count(b"after") == 1
    # The source and the node that detected the break no longer cache the link.
    upstream = min(broken, key=hops.index)
    for i in {s, upstream}:
        assert not any(uses_link(p, *broken) for p in paths(sim, i)), (i, paths(sim, i))


def test_target_replies_first_answers_one_copy_per_request():
    """Two disjoint routes 1-2-5 and 1-3-5: RFC 4728 8.2.4's target answers both copies
    of the request; ``target_replies: first`` (bench smr's single-reply DSR) answers
    the first only, so the source learns one route per discovery."""
    counts = {}
    for mode in ("every", "first"):
        sim = dsr_net([1, 2, 3, 5], [(1, 2), (2, 5), (1, 3), (3, 5)], target_replies=mode)
        sim.send(A(1), udp_packet(A(1), A(5), b"x", ident=1))
        sim.run(duration=1.0)
        assert len(sim.delivered[A(5)]) == 1
        target = sim.engines[A(5)].counters
        counts[mode] = (
            target["replies-sent"],
            target["target-copies-unanswered"],
            sorted(p for p in paths(sim, 1) if p[-1] == 5),
        )
    assert counts["every"][:2] == (2, 0)
    assert counts["every"][2] == [(1, 2, 5), (1, 3, 5)]
    assert counts["first"][:2] == (1, 1)
    assert len(counts["first"][2]) == 1


def test_smr_refuses_target_replies_first():
    with pytest.raises(ValidationError, match="target_replies"):
        SmrConfig(target_replies="first")
