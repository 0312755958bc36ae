"""An ELFN probe asks the routing daemon for a route request (``{"cmd":"discover"}``).

Holland & Vaidya section 6: the probe exists to test and re-find the route, so the
proxy must not leave it queued behind the daemon's discovery back-off. A real daemon
event socket (``EventServer``) on a unix path stands in for the daemon.
"""

from __future__ import annotations

import asyncio
from ipaddress import IPv4Address

from manetkit.daemon.eventsocket import EventServer
from manetkit.events import RouteDown, RouteUp
from manetkit.procs import wait_for_async
from manetkit.proxy.config import ProxyConfig
from manetkit.proxy.relay import Relay
from manetkit.proxy.server import Proxy
from manetkit.proxy.session import State
from tests.proxy.sim import Pair

PEER = IPv4Address("10.42.0.5")


def test_probe_while_frozen_sends_discover_to_the_daemon(tmp_path):
    asked: list[IPv4Address] = []

    async def main():
        got = asyncio.Event()

        def discover(dst: IPv4Address) -> bool:
            asked.append(dst)
            got.set()
            return True

        srv = EventServer(tmp_path / "ev.sock", dict, discover=discover)
        await srv.start()
        cfg = ProxyConfig(daemon_socket=tmp_path / "ev.sock", status_socket=tmp_path / "p.sock")
        proxy = Proxy(cfg)
        assert proxy.daemon is not None
        events = asyncio.create_task(proxy.daemon.run())
        relay = None
        try:
            await wait_for_async(
                lambda: proxy.daemon_connected and srv.subscribers, 5, "the proxy subscribed"
            )
            p = Pair()
            p.write(p.i, 10)
            p.settle()
            relay = Relay(proxy, p.si, PEER)
            # FLOWING: no probe is due, a timer that fires does nothing.
            assert relay.policy.get_timer() is None
            relay.on_timer()
            # nothing sent: the client counts a request as it writes it
            assert proxy.daemon.counters["discover_requests"] == 0 and not asked
            relay.on_route_event(RouteDown(dst=str(PEER), reason="link-broken"))
            assert p.si.state is State.FROZEN and relay.policy.frozen_by == "route-down"
            due = relay.policy.get_timer()
            assert due is not None and relay.timer is not None  # one timer, armed for it
            # the probe deadline passes (fed to the policy, no sleeping for it)
            relay.policy.handle_timer(due, relay.leg_view())
            relay.apply_policy()
            async with asyncio.timeout(2):
                await got.wait()
            assert asked == [PEER] and proxy.daemon.counters["discover_requests"] == 1
            nxt = relay.policy.get_timer()
            assert nxt is not None and nxt > due  # still frozen: the next probe is due
            # The daemon's reply is not an event: the subscription keeps working.
            srv.publish(RouteUp(dst="10.42.0.77", next_hop="10.42.0.2", hops=2))
            await wait_for_async(
                lambda: proxy.daemon.counters["route_events"], 2, "the route event read"
            )
        finally:
            if relay is not None and relay.timer is not None:
                relay.timer.cancel()
            events.cancel()
            await asyncio.gather(events, return_exceptions=True)
            await srv.close()

    asyncio.run(main())
