"""The ELFN / TCP-BuS policy (manetkit/proxy/policy.py) on a fake clock, every mode.

Each test feeds route events, probe deadlines and the kernel connection's back-off state
as plain values and reads back the actions; the last tests wire the policy to two real
sessions (tests/proxy/sim.py) the way the relay does, so a probe's answer really thaws.
"""

from __future__ import annotations

import pytest

from manetkit import events
from manetkit.proxy import policy as pol
from manetkit.proxy.session import Resumed, State
from tests.proxy.sim import Pair

PEER = "10.42.0.4"
ME = "10.42.0.1"
LEG = ((ME, 40000), 4242)  # our (address, port), the peer's port


def down(**kw: object) -> events.RouteDown:
    return events.RouteDown(dst=PEER, reason="link-broken", **kw)  # type: ignore[arg-type]


UP = events.RouteUp(dst=PEER, next_hop="10.42.0.2", hops=3)
ERDN = events.Erdn(dst=PEER, src=ME, sport=40000, dport=4242, seq=7, pivot="10.42.0.2")
ERSN = events.Ersn(dst=PEER, src=ME, sport=40000, dport=4242, last_ack=7, pivot="10.42.0.2")


def leg(state: State = State.FLOWING, **kw: object) -> pol.Leg:
    return pol.Leg(state=state, initiator=kw.pop("initiator", True), **kw)  # type: ignore[arg-type]


def make(mode: str, **kw: object) -> pol.Policy:
    return pol.Policy(pol.PolicyConfig(mode=mode, **kw), PEER)  # type: ignore[arg-type]


def drain(p: pol.Policy) -> list[pol.Event]:
    out = []
    while (a := p.next_event()) is not None:
        out.append(a)
    return out


# --- plain, fixed-rto: the kernel's business ----------------------------------------------


@pytest.mark.parametrize("mode", ["plain", "fixed-rto"])
def test_plain_and_fixed_rto_ignore_every_route_event(mode: str) -> None:
    p = make(mode)
    for ev in (down(), ERDN, UP, ERSN):
        for st in State:
            p.route_event(1.0, ev, leg(st, backed_off=True, has_leg=False))
    assert drain(p) == [] and p.get_timer() is None and p.frozen_by is None
    p.handle_timer(100.0, leg(State.FROZEN))
    assert drain(p) == []


# --- elfn -------------------------------------------------------------------------------------


def test_a_freeze_names_the_broken_link_when_the_daemon_does() -> None:
    """What the proxy plug-in reads to check a freeze against the medium's ground truth."""
    p = make("elfn")
    p.route_event(1.0, down(src=ME, broken_link=("10.42.0.2", "10.42.0.3")), leg())
    assert drain(p) == [pol.Freeze(f"route-down from {ME}, link 10.42.0.2-10.42.0.3")]


def test_elfn_freezes_on_route_down_and_probes_every_interval_until_route_up() -> None:
    p = make("elfn", probe_interval=2.0)
    p.route_event(10.0, down(src=ME), leg())
    assert drain(p) == [pol.Freeze(f"route-down from {ME}")]
    assert p.get_timer() == 12.0 and p.frozen_by == "route-down"
    # a second route-down (the same Route Error, another packet) must not postpone it
    p.route_event(11.5, down(), leg(State.FROZEN))
    assert drain(p) == [] and p.get_timer() == 12.0
    p.handle_timer(11.99, leg(State.FROZEN))  # early: nothing
    assert drain(p) == [] and p.get_timer() == 12.0
    p.handle_timer(12.0, leg(State.FROZEN))
    assert drain(p) == [pol.Discover(PEER), pol.SendProbe()]
    assert p.get_timer() == 14.0
    p.handle_timer(14.3, leg(State.PROBING))  # late timer: next one from now
    assert drain(p) == [pol.Discover(PEER), pol.SendProbe()]
    assert p.get_timer() == pytest.approx(16.3)
    p.route_event(15.0, UP, leg(State.PROBING))
    assert drain(p) == [pol.Thaw("route-up")] and p.get_timer() is None


def test_elfn_route_up_replaces_a_backed_off_leg_only_at_the_initiator() -> None:
    p = make("elfn")
    p.route_event(0.0, down(), leg())
    drain(p)
    p.route_event(1.0, UP, leg(State.FROZEN, backed_off=True))
    assert drain(p) == [
        pol.Thaw("route-up"),
        pol.ReplaceLeg("route-up: kernel connection backed off"),
    ]
    p.route_event(2.0, down(), leg())
    drain(p)
    p.route_event(3.0, UP, leg(State.FROZEN, backed_off=True, initiator=False))
    assert drain(p) == [pol.Thaw("route-up")]  # the acceptor never dials legs


def test_elfn_probe_on_a_backed_off_leg_replaces_it_and_keeps_asking_for_the_route() -> None:
    p = make("elfn")
    p.route_event(0.0, down(), leg())
    drain(p)
    p.handle_timer(2.0, leg(State.FROZEN, backed_off=True))
    assert drain(p) == [pol.Discover(PEER), pol.ReplaceLeg("probe: kernel connection backed off")]
    # the new leg's SYN waits for a route (RESUMING): discovery requests go on
    assert p.get_timer() == 4.0
    for t in (4.0, 6.0, 8.0):
        p.handle_timer(t, leg(State.RESUMING, has_leg=False))
        assert drain(p) == [pol.Discover(PEER)]
    p.resumed(9.0)  # the new leg's RESUME answered: the outage is over
    assert p.get_timer() is None
    p.handle_timer(10.0, leg(State.RESUMING, has_leg=False))  # a leg lost later: not ours
    assert drain(p) == []


def test_elfn_probe_without_a_leg_only_asks_for_discovery_and_keeps_probing() -> None:
    p = make("elfn")
    p.route_event(0.0, down(), leg())
    drain(p)
    p.handle_timer(2.0, leg(State.FROZEN, has_leg=False))
    assert drain(p) == [pol.Discover(PEER)] and p.get_timer() == 4.0


def test_elfn_timer_after_the_session_resumed_otherwise_does_nothing() -> None:
    p = make("elfn")
    p.route_event(0.0, down(), leg())
    drain(p)
    p.resumed(1.0)  # the probe's answer thawed the session
    # the leg dies later: RESUMING without an outage of ours, the relay redials
    p.handle_timer(2.0, leg(State.RESUMING, has_leg=False))
    assert drain(p) == [] and p.get_timer() is None
    p.route_event(3.0, down(), leg())
    drain(p)
    p.resumed(3.5)  # the probe's answer thawed the session
    assert p.get_timer() is None


def test_elfn_route_up_while_the_leg_is_gone_dials_now() -> None:
    p = make("elfn")
    p.route_event(0.0, UP, leg(State.RESUMING, has_leg=False))
    assert drain(p) == [pol.Reconnect()]
    p.route_event(0.0, UP, leg(State.RESUMING, has_leg=True))
    p.route_event(0.0, UP, leg(State.RESUMING, has_leg=False, initiator=False))
    p.route_event(0.0, UP, leg(State.FLOWING))
    assert drain(p) == []


def test_elfn_ignores_erdn_events_in_resuming_and_closed() -> None:
    p = make("elfn")
    p.route_event(0.0, ERDN, leg())
    assert drain(p) == [] and p.get_timer() is None  # erdn is BuS only
    p.route_event(0.0, down(), leg(State.RESUMING))
    p.route_event(0.0, down(), leg(State.CLOSED))
    assert drain(p) == [] and p.get_timer() is None


def test_elfn_rtt_probe_interval_is_four_rtts_but_at_least_0_2_s() -> None:
    p = make("elfn", probe="rtt", probe_interval=2.0)
    p.route_event(0.0, down(), leg(rtt_ms=300.0))
    drain(p)
    assert p.get_timer() == pytest.approx(1.2)
    p.handle_timer(1.2, leg(State.FROZEN, rtt_ms=20.0))
    drain(p)
    assert p.get_timer() == pytest.approx(1.4)  # 4 x 20 ms < 0.2 s floor
    p.handle_timer(1.4, leg(State.PROBING, rtt_ms=None))
    drain(p)
    assert p.get_timer() == pytest.approx(3.4)  # no RTT known: the fixed interval


# --- bus --------------------------------------------------------------------------------------


def test_bus_erdn_freezes_and_waits_bus_wait_for_the_ersn() -> None:
    p = make("bus", bus_wait=10.0, probe_interval=2.0)
    p.route_event(5.0, ERDN, leg())
    assert drain(p) == [pol.Freeze("erdn from 10.42.0.2")] and p.frozen_by == "erdn"
    assert p.get_timer() == 15.0  # no probe before the pivot had its chance
    p.handle_timer(7.0, leg(State.FROZEN))
    assert drain(p) == []
    p.route_event(8.0, ERSN, leg(State.FROZEN, backed_off=True))
    assert drain(p) == [pol.Thaw("ersn"), pol.ReplaceLeg("ersn: kernel connection backed off")]
    assert p.get_timer() is None


def test_bus_without_ersn_probes_like_elfn_after_bus_wait() -> None:
    p = make("bus", bus_wait=10.0, probe_interval=2.0)
    p.route_event(0.0, ERDN, leg())
    drain(p)
    p.handle_timer(10.0, leg(State.FROZEN))
    assert drain(p) == [pol.Discover(PEER), pol.SendProbe()] and p.get_timer() == 12.0
    p.route_event(11.0, UP, leg(State.PROBING))
    assert drain(p) == [pol.Thaw("route-up")]


def test_bus_route_down_then_erdn_of_one_route_error_waits_for_the_ersn() -> None:
    p = make("bus", bus_wait=10.0, probe_interval=2.0)
    p.route_event(0.0, down(src=ME, sport=40000, dport=4242), leg())
    assert drain(p) == [pol.Freeze(f"route-down from {ME}")] and p.get_timer() == 2.0
    p.route_event(0.01, ERDN, leg(State.FROZEN))
    assert drain(p) == [] and p.frozen_by == "erdn"
    assert p.get_timer() == pytest.approx(10.01)  # the ERSN wait replaced the ELFN probe
    p.route_event(3.0, ERDN, leg(State.FROZEN))  # a second ERDN does not postpone it
    assert p.get_timer() == pytest.approx(10.01)
    p.handle_timer(2.0, leg(State.FROZEN))
    assert drain(p) == []


def test_bus_route_down_alone_probes_like_elfn() -> None:
    p = make("bus", bus_wait=10.0, probe_interval=2.0)
    p.route_event(0.0, down(), leg())
    drain(p)
    p.handle_timer(2.0, leg(State.FROZEN))
    assert drain(p) == [pol.Discover(PEER), pol.SendProbe()]


# --- which events concern a session -----------------------------------------------------------


def test_concerns_matches_the_peer_and_the_legs_ports_either_way() -> None:
    assert pol.concerns(down(), PEER, LEG)  # no ports: every flow to the peer
    assert pol.concerns(UP, PEER, None)
    assert not pol.concerns(UP, "10.42.0.9", LEG)
    assert pol.concerns(down(src=ME, sport=40000, dport=4242), PEER, LEG)
    ack = events.RouteDown(dst=ME, src=PEER, sport=4242, dport=40000, reason="x")
    assert pol.concerns(ack, PEER, LEG)  # the peer's ACK to us failed
    assert not pol.concerns(down(src=ME, sport=40001, dport=4242), PEER, LEG)
    assert pol.concerns(down(src=ME, sport=40001, dport=4242), PEER, None)  # no leg now
    assert not pol.concerns(events.NeighbourUp(neighbour=PEER), PEER, LEG)


# --- wired to real sessions (what the relay does) ----------------------------------------------


def apply(pair: Pair, p: pol.Policy) -> list[pol.Event]:
    acts = drain(p)
    s = pair.si
    for a in acts:
        if isinstance(a, pol.Freeze):
            s.freeze(pair.now, a.why)
        elif isinstance(a, pol.Thaw):
            s.thaw(pair.now, a.how)
        elif isinstance(a, pol.SendProbe):
            s.probe(pair.now)
    pair._collect()
    return acts


@pytest.mark.parametrize("mode", ["elfn", "bus"])
def test_frozen_session_holds_data_until_the_probe_answer_thaws_it(mode: str) -> None:
    pair = Pair()
    p = make(mode, probe_interval=2.0, bus_wait=5.0)
    ev = ERDN if mode == "bus" else down()
    p.route_event(pair.now, ev, leg())
    apply(pair, p)
    assert pair.si.state is State.FROZEN
    pair.write(pair.i, 5000)
    pair.deliver_i2a(1 << 20)
    assert len(pair.a.received) == 0  # frozen: nothing sent
    due = p.get_timer()
    assert due == (5.0 if mode == "bus" else 2.0)
    pair.now = due
    p.handle_timer(pair.now, leg(pair.si.state))
    assert [type(a) for a in apply(pair, p)] == [pol.Discover, pol.SendProbe]
    assert pair.si.state is State.PROBING
    pair.deliver_i2a(1 << 20)  # the probe reaches the acceptor, which answers
    pair.deliver_a2i(1 << 20)
    assert pair.si.state is State.FLOWING  # the answer thawed the session
    pair.deliver_i2a(1 << 20)
    assert len(pair.a.received) == 5000


def test_a_stale_probe_answer_does_not_thaw() -> None:
    pair = Pair()
    p = make("elfn")
    p.route_event(0.0, down(), leg())
    apply(pair, p)
    pair.now = 2.0
    p.handle_timer(2.0, leg(State.FROZEN))
    apply(pair, p)
    pair.deliver_i2a(1 << 20)  # first probe reaches the acceptor ...
    pair.now = 4.0
    p.handle_timer(4.0, leg(State.PROBING))
    apply(pair, p)  # ... a second probe (new nonce) goes out before the answer
    pair.i2a.clear()  # and is lost
    pair.deliver_a2i(1 << 20)  # the first probe's answer arrives: wrong nonce
    assert pair.si.state is State.PROBING
    assert not any(isinstance(e, Resumed) for e in [pair.si.next_event()])
