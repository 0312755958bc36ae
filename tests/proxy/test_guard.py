"""What a peer may ask of an acceptor (manetkit/proxy/guard.py), without sockets."""

from __future__ import annotations

import logging
from ipaddress import IPv4Address, IPv4Network

import pytest

from manetkit.proxy.config import parse_config
from manetkit.proxy.guard import Refusals, destination_refusal, peer_refusal
from manetkit.proxy.relay import Relay
from manetkit.proxy.server import Proxy

MESH = IPv4Network("10.42.0.0/16")
HERE = IPv4Address("10.42.0.4")
OWN = (4241, 4242)
LOCAL = {IPv4Address("192.168.1.5"), HERE}


def why(addr: str, port: int = 8080) -> str | None:
    return destination_refusal(IPv4Address(addr), port, HERE, OWN)


def test_only_this_node_is_a_destination() -> None:
    """The acceptor is the destination itself (the initiator dials the destination's
    own proxy), so any other address is someone else's: no relaying to other hosts."""
    assert why("10.42.0.4") is None
    for other in ("10.42.0.9", "8.8.8.8", "192.168.1.5", "127.0.0.1", "0.0.0.0", "224.0.0.1"):
        assert "is not this node" in (why(other) or ""), other


def test_the_proxys_own_ports_are_never_a_destination() -> None:
    """An OPEN for our own peer or intercept port would chain the proxy into itself."""
    for port in (4241, 4242, 0):
        assert "the proxy's own" in (why("10.42.0.4", port) or ""), port
    assert why("10.42.0.4", 22) is None


def test_peers_come_from_the_mesh_and_not_from_this_host() -> None:
    def peer(addr: str) -> str | None:
        return peer_refusal(IPv4Address(addr), MESH, LOCAL.__contains__)

    assert peer("10.42.0.9") is None
    for lan in ("192.168.1.7", "172.17.0.2", "8.8.8.8"):
        assert "outside the mesh prefix" in (peer(lan) or ""), lan
    assert "outside" in (peer("10.42.255.255") or "")  # the prefix's broadcast address
    assert "this host" in (peer("10.42.0.4") or "")  # a local process on our mesh address


def test_allow_local_is_refused_with_the_reason() -> None:
    with pytest.raises(Exception, match="allow_local was removed"):
        parse_config({"allow_local": True})


def test_refusals_are_counted_every_time_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    counters: dict[str, int] = {}
    r = Refusals(counters)
    with caplog.at_level(logging.WARNING, logger="manetkit.proxy"):
        for _ in range(100):
            r.refuse("refused_destination", "10.42.0.9", "destination 127.0.0.1 ...")
        r.refuse("refused_destination", "10.42.0.7", "destination 127.0.0.1 ...")
    assert counters["refused_destination"] == 101
    assert len([m for m in caplog.messages if "refused" in m]) == 2  # once per peer


def test_remote_sessions_have_their_own_limits() -> None:
    """Peers' sessions do not share the local apps' limit: max_remote_sessions in all and
    max_peer_sessions per peer (the shell's bookkeeping, no sockets)."""
    import asyncio

    async def main() -> None:
        cfg = parse_config({"daemon_socket": None, "max_sessions": 5, "max_peer_sessions": 2})
        proxy = Proxy(cfg)
        assert proxy.max_sessions == 5 and proxy.max_remote_sessions == 5
        assert proxy.cfg.max_peer_sessions == 2 and Relay is not None

    asyncio.run(main())
