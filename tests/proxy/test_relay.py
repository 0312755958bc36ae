"""The relay's leg dialling (manetkit/proxy/relay.py), with the connect step stubbed."""

from __future__ import annotations

import asyncio
import socket
from ipaddress import IPv4Address, ip_address

import pytest

from manetkit import events
from manetkit.proxy import frames as fr
from manetkit.proxy import policy as pol
from manetkit.proxy.config import ProxyConfig
from manetkit.proxy.relay import RECONNECT_MAX, RECONNECT_MIN, Relay
from manetkit.proxy.session import Session, State
from tests.proxy.sim import tokens

PEER = IPv4Address("10.42.0.4")
DST = str(PEER)


class Host:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.cfg = ProxyConfig(daemon_socket=None)
        self.loop = loop
        self.counters: dict[str, int] = {}
        self.over_budget = False
        self.mesh_write_cap = 1 << 30

    def account(self, relay: Relay, replay_bytes: int) -> None: ...
    def ask_discover(self, dst: IPv4Address) -> None: ...
    def remember_done(self, session: Session, peer: IPv4Address) -> None: ...
    def forget(self, relay: Relay) -> None: ...


def _stub_connects(
    monkeypatch: pytest.MonkeyPatch, loop: asyncio.AbstractEventLoop
) -> tuple[list[asyncio.Future[None]], list[object]]:
    """Every connect waits on a gate the test opens; an accepted socket is only recorded."""
    gates: list[asyncio.Future[None]] = []
    accepted: list[object] = []

    async def gated_connect(sock: object, addr: object) -> None:
        fut: asyncio.Future[None] = loop.create_future()
        gates.append(fut)
        await fut

    async def record_accept(factory: object, sock: object) -> None:
        accepted.append(sock)

    monkeypatch.setattr(loop, "sock_connect", gated_connect)
    monkeypatch.setattr(loop, "connect_accepted_socket", record_accept)
    return gates, accepted


def _relay(loop: asyncio.AbstractEventLoop) -> Relay:
    s = Session.initiate(loop.time(), (ip_address(str(PEER)), 80), "elfn", token_bytes=tokens())
    relay = Relay(Host(loop), s, PEER)  # type: ignore[arg-type]
    assert s.state is State.RESUMING
    return relay


async def _two_dials(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Relay, list[asyncio.Future[None]], list[object]]:
    """A dial waiting on its SYN, then a route-up's redial beside it."""
    loop = asyncio.get_running_loop()
    gates, accepted = _stub_connects(monkeypatch, loop)
    relay = _relay(loop)
    relay.dial()
    await _settle()
    relay.redial()
    await _settle()
    return relay, gates, accepted


async def _settle() -> None:
    """Let every ready task run (a cancelled wait_for takes a few loop turns)."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_redial_dials_beside_the_dial_under_way_and_the_first_to_connect_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Route-up while a dial waits: its SYN is usually in the daemon's send buffer and goes
    out first, so it is kept; a fresh dial beside it covers a SYN that is gone."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        gates, accepted = _stub_connects(monkeypatch, loop)
        relay = _relay(loop)
        relay.dial()
        relay.dial()  # one dial at a time
        await _settle()
        assert len(gates) == 1 and relay.connecting
        relay.redial()  # route-up: a fresh SYN beside the waiting one
        relay.redial()  # at most two
        await _settle()
        assert len(gates) == 2 and len(relay.dials) == 2
        gates[0].set_result(None)  # the buffered SYN's dial connects first
        await _settle()
        assert len(accepted) == 1
        assert gates[1].cancelled()  # the fresh dial was given up
        assert not relay.dials
        relay.closed = True

    asyncio.run(main())


def test_the_fresh_dial_wins_when_the_old_syn_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        relay, gates, accepted = await _two_dials(monkeypatch)
        gates[1].set_result(None)
        await _settle()
        assert len(accepted) == 1 and gates[0].cancelled() and not relay.dials
        relay.closed = True

    asyncio.run(main())


def test_a_failed_dial_beside_another_does_not_schedule_a_third(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> None:
        relay, gates, accepted = await _two_dials(monkeypatch)
        gates[0].set_exception(ConnectionRefusedError())
        await _settle()
        assert len(relay.dials) == 1 and relay.connecting  # the other one still waits
        gates[1].set_exception(ConnectionRefusedError())
        await _settle()
        assert not relay.dials  # now a reconnect is scheduled (RECONNECT_MIN later)
        relay.closed = True

    asyncio.run(main())


def test_a_dial_during_a_reported_outage_waits_for_the_route_without_timeout() -> None:
    """A dial given up on a timeout would leave its SYN in the daemon's send buffer, to be
    released at route-up ahead of the next dial's (seen in `bench flap --capture`)."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        relay = _relay(loop)
        assert relay._dial_timeout() == pytest.approx(relay.policy.cfg.probe_interval)
        flowing = pol.Leg(state=State.FLOWING, initiator=True, has_leg=True)
        relay.policy.route_event(loop.time(), events.RouteDown(dst=DST, reason="rerr"), flowing)
        assert relay.policy.outage
        assert relay._dial_timeout() is None
        up = events.RouteUp(dst=DST, next_hop=DST, hops=1)
        frozen = pol.Leg(state=State.FROZEN, initiator=True, has_leg=True)
        relay.policy.route_event(loop.time(), up, frozen)
        assert not relay.policy.outage and relay._dial_timeout() is not None

    asyncio.run(main())


@pytest.mark.parametrize("how", ["fin", "busy"])
def test_a_leg_that_ends_as_soon_as_it_is_made_is_dialled_again(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The acceptor may close a leg at once (too many legs waiting for their hello, or a
    BUSY at its session limit): the end can reach the relay before the dial task that
    made the leg has finished. The relay must dial again all the same; it used to see
    that dial still under way, schedule nothing, and sit in RESUMING until the partition
    timeout reset the app (seen with 200 parallel curls through the proxies)."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        lsock = socket.create_server(("127.0.0.1", 0))
        lsock.setblocking(False)
        real_connect = loop.sock_connect
        dials: list[float] = []
        second = asyncio.Event()

        async def connect_then_peer_closes(sock: socket.socket, addr: object) -> None:
            await real_connect(sock, lsock.getsockname())
            dials.append(loop.time())
            conn, _ = await loop.sock_accept(lsock)
            if len(dials) == 1:
                if how == "busy":
                    conn.send(fr.pack_busy(10))
                conn.close()  # the end is on its way before the relay attaches the leg
            else:
                second.set()
                conn.close()

        monkeypatch.setattr(loop, "sock_connect", connect_then_peer_closes)
        relay = _relay(loop)
        relay.proxy.counters["peer_busy"] = 0
        try:
            relay.dial()
            await asyncio.wait_for(second.wait(), 5)
            assert len(dials) == 2
            assert relay.proxy.counters["peer_busy"] == (how == "busy")
        finally:
            relay.closed = True
            lsock.close()

    asyncio.run(main())


def test_a_busy_asking_for_an_hour_is_dialled_again_within_the_backoff_ceiling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """BUSY is untagged (the acceptor has no key for us yet): whoever sends one may name
    any delay, so the relay waits at most its reconnect ceiling."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        relay = _relay(loop)
        relay.proxy.counters["peer_busy"] = 0
        delays: list[float] = []
        monkeypatch.setattr(relay, "schedule_reconnect", lambda d=None: delays.append(d))
        relay.peer_busy(3600.0)
        relay.peer_busy(0.0)
        assert delays[0] <= RECONNECT_MAX  # the ceiling holds after the spread too
        assert RECONNECT_MIN * 0.5 <= delays[1] <= RECONNECT_MIN * 1.5
        assert relay.proxy.counters["peer_busy"] == 2
        relay.closed = True

    asyncio.run(main())
