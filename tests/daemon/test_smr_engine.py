"""SMR engine on simulated topologies with a fake clock (tests/daemon/enginesim.py).

Rules from Lim, Xu & Gerla (ICC'03) sections III-A, IV and V-B; see docs/smr.md.
"""

from __future__ import annotations

from ipaddress import IPv4Address

import pytest
from pydantic import ValidationError

from manetkit import events
from manetkit.daemon.engines.dsr import DsrEngine
from manetkit.daemon.engines.smr import SmrConfig, SmrEngine
from manetkit.daemon.engines.smr.pathselect import Mode, PathSet
from manetkit.daemon.engines.smr.strategy import REMEMBERED
from manetkit.daemon.wire import dsr, ipv4
from tests.daemon.dsrutil import A, first, udp_packet
from tests.daemon.enginesim import Sim
from tests.helpers.smrnet import LADDER, net


def requests_from(sim: Sim, node: int, ttl_min: int = 2) -> list:
    return [
        f
        for f in sim.frames_from(A(node))
        if first(f.packet, dsr.RouteRequest) and ipv4.parse(f.packet).ttl >= ttl_min
    ]


def own_requests(sim: Sim, node: int) -> int:
    return sim.engines[A(node)].counters["requests-sent"]


def ints(path) -> tuple[int, ...]:
    return tuple(int(str(a).rsplit(".", 1)[1]) for a in path)


def route_set(sim: Sim, node: int, dst: int) -> list[tuple[int, ...]]:
    ps = sim.engines[A(node)].strategy.sets.get(A(dst))
    return [ints(p) for p in ps.paths()] if ps is not None else []


def test_intermediate_forwards_duplicates_from_other_links_not_longer_ones() -> None:
    # 4 hears the request from 2 and from 3 (1 recorded hop each) and from 7 via 6
    # (2 recorded hops). SMR forwards the first two; DSR only the first.
    links = [(1, 2), (1, 3), (1, 6), (6, 7), (2, 4), (3, 4), (7, 4), (4, 5)]
    got = {}
    for proto in ("dsr", "smr"):
        sim = net(range(1, 8), links, protocol=proto)
        sim.send(A(1), udp_packet(A(1), A(9)))  # nobody is 9: the flood is all we see
        sim.run(duration=0.2)
        fwd = requests_from(sim, 4)
        ident = first(fwd[0].packet, dsr.RouteRequest).ident
        got[proto] = sorted(
            ints(first(f.packet, dsr.RouteRequest).addresses)
            for f in fwd
            if first(f.packet, dsr.RouteRequest).ident == ident
        )
    assert got["dsr"] == [(2, 4)]
    assert got["smr"] == [(2, 4), (3, 4)]


def test_intermediate_never_forwards_two_copies_from_one_neighbour() -> None:
    sim = net(range(1, 6), [(1, 2), (1, 3), (2, 3), (3, 4)])
    sim.send(A(1), udp_packet(A(1), A(9)))
    sim.run(duration=0.2)
    # 3 gets (1) direct, (1,2) via 2: 2 hops > 1 -> dropped. 4 gets only 3's copy.
    ident = first(requests_from(sim, 1)[0].packet, dsr.RouteRequest).ident
    from4 = [f for f in requests_from(sim, 4) if first(f.packet, dsr.RouteRequest).ident == ident]
    assert len(from4) == 1
    assert sim.engines[A(3)].counters["smr-duplicate-forwarded"] == 0


def test_destination_replies_at_once_then_after_the_wait() -> None:
    sim = net(range(1, 9), LADDER, slow=(2,), mode="backup1", reply_wait_ms=80)
    sim.send(A(1), udp_packet(A(1), A(8), b"x"))
    sim.run(duration=1.0)
    replies = [
        (f.time, ints((A(1), *first(f.packet, dsr.RouteReply).addresses)))
        for f in sim.frames_from(A(8))
        if first(f.packet, dsr.RouteReply)
    ]
    # First copy (long rail: node 2 is slow) answered at once, the short rail 80 ms later.
    assert [p for _, p in replies] == [(1, 4, 5, 6, 8), (1, 2, 3, 8)]
    assert replies[1][0] - replies[0][0] == pytest.approx(0.080, abs=0.002)


def test_scheme1_swaps_to_a_shorter_second_reply() -> None:
    sim = net(range(1, 9), LADDER, slow=(2,), mode="backup1")
    sim.send(A(1), udp_packet(A(1), A(8), b"x"))
    sim.run(duration=1.0)
    assert route_set(sim, 1, 8) == [(1, 2, 3, 8), (1, 4, 5, 6, 8)]
    (sw,) = sim.events(A(1), "path-switch")
    assert sw["reason"] == "shorter-reply"
    assert ints(sw["from_path"]) == (1, 4, 5, 6, 8) and ints(sw["to_path"]) == (1, 2, 3, 8)
    # One route-up per path, the primary flagged.
    ups = [e for e in sim.events(A(1), "route-up") if "primary" in e]
    assert [(ints(e["path"]), e["primary"]) for e in ups] == [
        ((1, 4, 5, 6, 8), True),
        ((1, 2, 3, 8), True),
    ]
    events.from_wire({"event": "path-switch", **sw})  # the schema accepts it
    # The next packet takes the new primary.
    sim.send(A(1), udp_packet(A(1), A(8), b"y"))
    sim.run(duration=0.1)
    data = [f for f in sim.frames_from(A(1)) if f.packet.endswith(b"y")]
    assert data[-1].next_hop == A(2)


def test_scheme2_never_swaps() -> None:
    sim = net(range(1, 9), LADDER, slow=(2,), mode="backup2")
    sim.send(A(1), udp_packet(A(1), A(8), b"x"))
    sim.run(duration=1.0)
    assert route_set(sim, 1, 8) == [(1, 4, 5, 6, 8), (1, 2, 3, 8)]
    assert sim.events(A(1), "path-switch") == []


def test_scheme2_backup_is_the_maximally_disjoint_copy() -> None:
    # Three routes 1->9: A 1-2-3-9 first (fast); B 1-2-4-9 shares node 2; C 1-5-6-7-9
    # is disjoint but longer. Scheme 2 takes C, scheme 1 the shorter B.
    links = [(1, 2), (2, 3), (3, 9), (2, 4), (4, 9), (1, 5), (5, 6), (6, 7), (7, 9)]
    for mode, backup in (("backup2", (1, 5, 6, 7, 9)), ("backup1", (1, 2, 4, 9))):
        sim = net([1, 2, 3, 4, 5, 6, 7, 9], links, slow=(4,), mode=mode)
        sim.send(A(1), udp_packet(A(1), A(9)))
        sim.run(duration=1.0)
        assert route_set(sim, 1, 9) == [(1, 2, 3, 9), backup], mode


def test_backup_takes_over_without_a_new_request() -> None:
    sim = net(range(1, 9), LADDER, slow=(2,), mode="backup1")
    sim.send(A(1), udp_packet(A(1), A(8), b"x"))
    sim.run(duration=1.0)
    asked = own_requests(sim, 1)
    sim.unlink(A(2), A(3))  # mid-path: 2's transmission fails, a Route Error comes back
    sim.send(A(1), udp_packet(A(1), A(8), b"y"))  # lost at 2 (it knows no other route)
    sim.run(duration=0.1)
    sim.send(A(1), udp_packet(A(1), A(8), b"z"))
    sim.run(duration=1.0)
    assert own_requests(sim, 1) == asked
    assert sim.delivered[A(8)][-1].endswith(b"z")
    (sw,) = [e for e in sim.events(A(1), "path-switch") if e["reason"] == "rerr"]
    assert ints(sw["to_path"]) == (1, 4, 5, 6, 8)
    assert sim.engines[A(1)].counters["smr-discoveries-avoided"] == 1
    assert route_set(sim, 1, 8) == [(1, 4, 5, 6, 8)]
    # No route-down for the destination: it never lost its route.
    assert [e for e in sim.events(A(1), "route-down") if e["dst"] == str(A(8))] == []


def test_first_hop_failure_switches_the_same_packet() -> None:
    sim = net(range(1, 9), LADDER, slow=(2,), mode="backup2")
    sim.send(A(1), udp_packet(A(1), A(8), b"x"))
    sim.run(duration=1.0)
    sim.unlink(A(1), A(4))  # the primary (long rail) fails at its first hop
    sim.send(A(1), udp_packet(A(1), A(8), b"y"))
    sim.run(duration=0.5)
    assert sim.delivered[A(8)][-1].endswith(b"y")
    (sw,) = sim.events(A(1), "path-switch")
    assert sw["reason"] == "tx-failed" and ints(sw["to_path"]) == (1, 2, 3, 8)


@pytest.mark.parametrize("rediscover", ["all-broken", "any-broken"])
def test_rediscovery_only_when_all_paths_broken(rediscover: str) -> None:
    sim = net(range(1, 9), LADDER, slow=(2,), mode="backup1", rediscover=rediscover)
    sim.send(A(1), udp_packet(A(1), A(8), b"x"))
    sim.run(duration=1.0)
    asked = own_requests(sim, 1)
    sim.unlink(A(1), A(2), notify=True)  # the primary breaks: the backup remains
    sim.run(duration=0.01)
    if rediscover == "any-broken":
        assert own_requests(sim, 1) == asked + 1  # III-A's first scheme asks at once
        return
    assert own_requests(sim, 1) == asked
    sim.unlink(A(1), A(4), notify=True)  # now both are broken
    sim.link(A(1), A(7))
    sim.link(A(7), A(8))
    sim.send(A(1), udp_packet(A(1), A(8), b"y"))
    sim.run(duration=1.0)
    assert own_requests(sim, 1) > asked
    assert sim.engines[A(1)].counters["smr-all-broken"] == 1
    assert sim.delivered[A(8)][-1].endswith(b"y")
    assert route_set(sim, 1, 8)[0] == (1, 7, 8)


def test_concurrent_round_robin_over_both_paths() -> None:
    sim = net(range(1, 9), LADDER, slow=(2,), mode="concurrent")
    sim.send(A(1), udp_packet(A(1), A(8), b"0"))
    sim.run(duration=1.0)
    for i in range(1, 5):
        sim.send(A(1), udp_packet(A(1), A(8), str(i).encode()))
    sim.run(duration=0.2)
    hops = [f.next_hop for f in sim.frames_from(A(1)) if f.packet[-1:] in b"1234"]
    assert hops[:4] in ([A(2), A(4)] * 2, [A(4), A(2)] * 2)


def test_predicted_failure_moves_primary_to_backup() -> None:
    sim = net(range(1, 9), LADDER, slow=(2,), mode="backup1")
    sim.send(A(1), udp_packet(A(1), A(8), b"x"))
    sim.run(duration=1.0)
    eng = sim.engines[A(1)]
    assert eng.link_predicted_to_fail(sim.now, A(4)) is False  # 4 carries the backup only
    assert eng.link_predicted_to_fail(sim.now, A(2)) is True
    sim._drain(A(1))
    assert route_set(sim, 1, 8) == [(1, 4, 5, 6, 8), (1, 2, 3, 8)]
    assert sim.events(A(1), "path-switch")[-1]["reason"] == "predicted-failure"
    assert DsrEngine(A(1)).link_predicted_to_fail(0.0, A(2)) is False


def test_status_shows_primary_and_backup_with_ages() -> None:
    sim = net(range(1, 9), LADDER, slow=(2,), mode="backup2")
    sim.send(A(1), udp_packet(A(1), A(8), b"x"))
    sim.run(duration=1.0)
    sim.engines[A(1)].handle_timer(sim.now)  # status ages are as of the last input
    st = sim.engines[A(1)].status()
    rows = st["multipath"]
    assert st["protocol"] == "smr" and st["smr"]["mode"] == "backup2"
    assert [(r["dst"], r["role"], r["hops"]) for r in rows] == [
        (str(A(8)), "primary", 4),
        (str(A(8)), "backup", 3),
    ]
    assert all(r["age_s"] > 0.8 for r in rows)
    assert rows[0]["age_s"] > rows[1]["age_s"]


def test_cached_replies_are_refused_in_the_config() -> None:
    with pytest.raises(ValidationError, match="cache_replies"):
        SmrConfig(cache_replies=True)
    with pytest.raises(ValidationError, match="mode"):
        SmrConfig(mode="both")


def test_a_stale_backup_expires_and_a_break_then_rediscovers() -> None:
    """``max_path_age_s`` (fake clock): the backup learnt at discovery is dropped once it
    is that old, by the engine's own timer; a primary break after that finds no stale
    path to switch to and asks again, instead of trying the stale alternate."""
    sim = net(range(1, 9), LADDER, slow=(2,), mode="backup1", max_path_age_s=5.0)
    sim.send(A(1), udp_packet(A(1), A(8), b"x"))
    sim.run(duration=1.0)
    eng = sim.engines[A(1)]
    assert route_set(sim, 1, 8) == [(1, 2, 3, 8), (1, 4, 5, 6, 8)]
    (age,) = [r["age_s"] for r in eng.status()["multipath"] if r["role"] == "backup"]
    due = eng.get_timer()
    assert due is not None and due <= sim.now - age + 5.0 + 1e-3  # the engine's own timer
    sim.run(duration=3.0)  # 4 s after discovery: still there
    assert len(route_set(sim, 1, 8)) == 2
    sim.run(duration=1.5)  # past 5 s: gone without any packet or break
    assert route_set(sim, 1, 8) == [(1, 2, 3, 8)]
    assert eng.counters["smr-paths-expired"] == 1
    # ... and from DSR's route cache, which the all-broken fallback reads
    assert (1, 4, 5, 6, 8) not in {ints(e.path) for e in eng.cache.entries()}
    asked = own_requests(sim, 1)
    sim.unlink(A(1), A(2), notify=True)  # the primary breaks: no backup left
    sim.send(A(1), udp_packet(A(1), A(8), b"y"))
    sim.run(duration=1.0)
    assert own_requests(sim, 1) > asked
    assert eng.counters["smr-all-broken"] == 1
    assert [e for e in sim.events(A(1), "path-switch") if e["reason"] == "link-down"] == []
    assert sim.delivered[A(8)][-1].endswith(b"y")


def test_without_a_max_age_the_backup_stays() -> None:
    sim = net(range(1, 9), LADDER, slow=(2,), mode="backup1")
    sim.send(A(1), udp_packet(A(1), A(8), b"x"))
    sim.run(duration=600.0)
    assert len(route_set(sim, 1, 8)) == 2
    assert sim.engines[A(1)].counters["smr-paths-expired"] == 0


def test_max_path_age_is_checked() -> None:
    with pytest.raises(ValidationError, match="max_path_age_s"):
        SmrConfig(max_path_age_s=0)
    assert SmrConfig().max_path_age_s is None


@pytest.mark.parametrize("after", ["discover", "cache"])
def test_once_every_path_broke_the_next_packet_asks_again(after: str) -> None:
    """III-A: SMR rediscovers when all routes to the destination are invalid. A route
    the cache learnt elsewhere (here 1-7-8, as from forwarded or overheard packets)
    carries the next packet at once; with ``after_all_broken: discover`` that packet
    also sends a propagating request, whose replies give the source a path set
    again. With ``cache`` the source stays on DSR's cache: no request, no set."""
    sim = net(range(1, 9), LADDER, slow=(2,), mode="backup1", after_all_broken=after)
    sim.send(A(1), udp_packet(A(1), A(8), b"x"))
    sim.run(duration=1.0)
    eng = sim.engines[A(1)]
    assert route_set(sim, 1, 8) == [(1, 2, 3, 8), (1, 4, 5, 6, 8)]
    sim.unlink(A(1), A(2), notify=True)  # primary: switch to the backup, no request
    sim.unlink(A(1), A(4), notify=True)  # backup: every path broke
    assert route_set(sim, 1, 8) == [] and eng.counters["smr-all-broken"] == 1
    sim.link(A(1), A(7))
    sim.link(A(7), A(8))
    eng.cache.add(sim.now, (A(1), A(7), A(8)))  # learnt from someone else's packets
    asked = own_requests(sim, 1)
    sim.send(A(1), udp_packet(A(1), A(8), b"y"))
    sim.run(duration=0.01)
    assert sim.delivered[A(8)][-1].endswith(b"y")  # no wait for the discovery
    sim.run(duration=1.0)
    sim.send(A(1), udp_packet(A(1), A(8), b"z"))
    sim.run(duration=0.5)
    assert sim.delivered[A(8)][-1].endswith(b"z")
    if after == "cache":
        assert own_requests(sim, 1) == asked
        assert route_set(sim, 1, 8) == []
        assert eng.counters["smr-cache-routes"] >= 1
        return
    assert own_requests(sim, 1) == asked + 1  # one request, from the first packet
    assert eng.counters["smr-all-broken-rediscoveries"] == 1
    assert route_set(sim, 1, 8)[0] == (1, 7, 8)  # a path set again
    # Nothing else broke: the next packets ask no more.
    sim.send(A(1), udp_packet(A(1), A(8), b"w"))
    sim.run(duration=5.0)
    assert own_requests(sim, 1) == asked + 1


def test_a_rediscovery_with_nothing_to_carry_the_packets_retries() -> None:
    """Every path broke and the cache has no other route: the first packet waits in
    the send buffer while the request asks, and asks again with DSR's back-off if the
    replies are lost, rather than waiting for good (the request of ``_ask`` has a
    retry timer)."""
    sim = net(range(1, 9), LADDER, slow=(2,), mode="backup1")
    sim.send(A(1), udp_packet(A(1), A(8), b"x"))
    sim.run(duration=1.0)
    sim.unlink(A(1), A(2), notify=True)
    sim.unlink(A(1), A(4), notify=True)
    asked = own_requests(sim, 1)
    sim.send(A(1), udp_packet(A(1), A(8), b"y"))  # nobody can reach 8 now
    sim.run(duration=0.2)
    assert own_requests(sim, 1) == asked + 1
    sim.run(duration=3.0)
    assert own_requests(sim, 1) > asked + 1  # it keeps asking (back-off)
    sim.link(A(1), A(2))  # a way appears
    sim.run(duration=12.0)
    assert sim.delivered[A(8)][-1].endswith(b"y")
    assert route_set(sim, 1, 8)[0] == (1, 2, 3, 8)


def test_destinations_to_rediscover_are_bounded() -> None:
    """Bounded state (docs/security.md): one broken link that takes every path set with
    it leaves at most 256 destinations waiting to be asked for again, oldest dropped."""
    eng = SmrEngine(A(1), SmrConfig())
    dsts = [IPv4Address(f"10.43.{i // 250}.{i % 250 + 1}") for i in range(REMEMBERED + 44)]
    for d in dsts:
        ps = eng.strategy.sets[d] = PathSet(Mode.BACKUP1, 2)
        ps.offer(0.0, (A(1), A(2), d))
    eng.strategy.links_cut(1.0, A(1), A(2), "link-down")
    assert eng.strategy.sets == {} and eng.counters["smr-all-broken"] == len(dsts)
    assert len(eng.strategy.rebuild) == REMEMBERED
    assert eng.counters["smr-rebuild-evicted"] == 44
    assert next(iter(eng.strategy.rebuild)) == dsts[44]  # the oldest went first
