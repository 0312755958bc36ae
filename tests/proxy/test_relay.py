"""The relay's leg dialling (manetkit/proxy/relay.py), with the connect step stubbed."""

from __future__ import annotations

import asyncio
from ipaddress import IPv4Address, ip_address

import pytest

from manetkit.proxy.config import ProxyConfig
from manetkit.proxy.relay import Relay
from manetkit.proxy.session import Session, State
from tests.proxy.sim import tokens

PEER = IPv4Address("10.42.0.4")


class Host:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.cfg = ProxyConfig(daemon_socket=None)
        self.loop = loop
        self.counters: dict[str, int] = {}

    def ask_discover(self, dst: IPv4Address) -> None: ...
    def remember_done(self, session: Session, peer: IPv4Address) -> None: ...
    def forget(self, relay: Relay) -> None: ...


def test_redial_supersedes_a_dial_stuck_on_a_syn_sent_into_no_route(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        gates: list[asyncio.Future[None]] = []

        async def stuck_connect(sock: object, addr: object) -> None:
            fut: asyncio.Future[None] = loop.create_future()
            gates.append(fut)
            await fut

        monkeypatch.setattr(loop, "sock_connect", stuck_connect)
        s = Session.initiate(loop.time(), (ip_address(str(PEER)), 80), "elfn",
                             token_bytes=tokens())  # fmt: skip
        relay = Relay(Host(loop), s, PEER)  # type: ignore[arg-type]
        assert s.state is State.RESUMING
        relay.dial()
        await asyncio.sleep(0)
        first = relay.dial_task
        relay.dial()  # one dial at a time
        await asyncio.sleep(0)
        assert len(gates) == 1 and relay.dial_task is first and relay.connecting
        relay.redial()  # route-up: a fresh SYN now
        assert first is not None
        await asyncio.wait([first], timeout=2)
        assert first.done()
        assert len(gates) == 2 and relay.dial_task is not first
        assert relay.connecting  # owned by the new dial, not cleared by the old one's end
        relay.closed = True
        assert relay.dial_task is not None
        relay.dial_task.cancel()
        await asyncio.gather(relay.dial_task, return_exceptions=True)

    asyncio.run(main())
