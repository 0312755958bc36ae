"""The proxy's listeners and bounds (manetkit/proxy/server.py, relay.py) on loopback
sockets in this process: no namespace, no nft (the interception is not started)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from ipaddress import IPv4Address
from typing import Any

import pytest

from manetkit.proxy import frames as fr
from manetkit.proxy import guard, server
from manetkit.proxy.config import parse_config
from manetkit.proxy.relay import Relay
from manetkit.proxy.server import Proxy
from manetkit.proxy.session import Session
from tests.helpers.fakeleg import FakeLeg
from tests.proxy.sim import DST, tokens


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loopback_proxy(**over: Any) -> Proxy:
    cfg = {"daemon_socket": None, "mesh_prefix": "127.0.0.0/8", "peer_port": free_port()}
    return Proxy(parse_config(cfg | over))


async def start_mesh_listener(p: Proxy, monkeypatch: pytest.MonkeyPatch) -> asyncio.Task[None]:
    # our peers are this host here; in a mesh, guard.peer_refusal refuses that
    monkeypatch.setattr(guard, "peer_refusal", lambda *a: None)
    task = asyncio.get_running_loop().create_task(p._mesh_listener())
    for _ in range(100):
        if p.mesh_address is not None:
            break
        await asyncio.sleep(0.01)
    return task


async def stop(p: Proxy, task: asyncio.Task[None]) -> None:
    task.cancel()
    for t in [task, *p.leg_tasks]:
        t.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t
    for s in p.listeners:
        s.close()


async def reply_to(port: int, hello: bytes, timeout: float) -> fr.Frame | None:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(hello)
    reader = fr.FrameReader()
    try:
        while (f := reader.next_frame()) is None:
            chunk = await asyncio.wait_for(r.read(4096), timeout)
            if not chunk:
                return None
            reader.feed(chunk)
        return f
    finally:
        w.close()


def test_the_mesh_listener_binds_the_mesh_address(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        p = loopback_proxy()
        task = await start_mesh_listener(p, monkeypatch)
        try:
            assert p.mesh_address == IPv4Address("127.0.0.1")
            (lsock,) = p.listeners
            assert lsock.getsockname() == ("127.0.0.1", p.cfg.peer_port)  # not 0.0.0.0
        finally:
            await stop(p, task)

    asyncio.run(main())


def test_silent_connections_do_not_delay_another_peers_hello(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each leg reads its hello in a task of its own: three connections that never speak
    do not hold up a fourth (before, the listener read hellos one after the other, and
    each silent one cost the hello timeout: 3 x 10 s here)."""

    async def main() -> None:
        p = loopback_proxy()
        task = await start_mesh_listener(p, monkeypatch)
        port = p.cfg.peer_port
        try:
            idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
            await asyncio.sleep(0.05)
            t0 = asyncio.get_running_loop().time()
            got = await reply_to(port, fr.pack_resume(bytes(16), 1, 0, False), timeout=2.0)
            assert isinstance(got, fr.Reset) and got.reason == "unknown session"
            assert asyncio.get_running_loop().time() - t0 < 1.0
            assert p.counters["unknown_session"] == 1
            assert p.status()["pending_hellos"] == 3
            for _, w in idle:
                w.close()
        finally:
            await stop(p, task)

    asyncio.run(main())


def test_legs_waiting_for_their_hello_are_capped_per_peer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> None:
        p = loopback_proxy()
        task = await start_mesh_listener(p, monkeypatch)
        port = p.cfg.peer_port
        try:
            n = server.MAX_PENDING_HELLOS_PER_PEER
            idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(n)]
            await asyncio.sleep(0.05)
            r, w = await asyncio.open_connection("127.0.0.1", port)
            # answered BUSY (dial again later) and closed at once
            assert await asyncio.wait_for(r.read(100), 2) == fr.pack_busy(server.BUSY_RETRY_MS)
            assert await asyncio.wait_for(r.read(100), 2) == b""
            assert p.counters["hello_overflow"] == 1
            for _, iw in [*idle, (r, w)]:
                iw.close()
        finally:
            await stop(p, task)

    asyncio.run(main())


def test_a_connection_straight_to_the_intercept_port_is_refused() -> None:
    """Only connections nft redirected are apps to carry: one made straight to the
    intercept port (a loop through the proxy, a host on the LAN) gets RST, no session."""

    async def main() -> None:
        p = loopback_proxy()
        lsock = socket.create_server(("127.0.0.1", 0))
        client = socket.create_connection(lsock.getsockname())
        conn, addr = lsock.accept()
        try:
            await p._on_app(conn, addr)
            assert p.counters["not_redirected"] == 1 and not p.relays
            client.settimeout(2)
            with pytest.raises(ConnectionResetError):
                client.recv(10)
        finally:
            client.close()
            lsock.close()

    asyncio.run(main())


def open_record(sid: bytes, addr: str = "10.42.0.4", port: int = 80) -> fr.Record:
    s = Session.initiate(0.0, (IPv4Address(addr), port), "elfn", token_bytes=tokens(sid[0]))
    raw = fr.pack_open(sid, 0, IPv4Address(addr), port, "elfn", 0, s.channel.pub_i)
    reader = fr.FrameReader()
    reader.feed(raw)
    rec = reader.next_record()
    assert rec is not None
    return rec


PEER = IPv4Address("10.42.0.1")


def test_an_open_for_another_host_or_the_proxys_own_port_is_refused() -> None:
    async def main() -> None:
        p = Proxy(parse_config({"daemon_socket": None}))
        for addr, port, why in (
            ("10.42.0.9", 80, "is not this node"),
            ("127.0.0.1", 80, "is not this node"),
            ("10.42.0.4", 4242, "the proxy's own"),
            ("10.42.0.4", 4241, "the proxy's own"),
        ):
            leg = FakeLeg()
            assert p._relay_for(leg, open_record(bytes([1]) * 16, addr, port), PEER) is None  # type: ignore[arg-type]
            got = leg.reply()
            assert isinstance(got, fr.Reset) and why in got.reason, (addr, port, got)
        assert p.counters["refused_destination"] == 4 and not p.relays

    asyncio.run(main())


def test_a_replayed_open_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """An OPEN whose session id was seen (a captured first flight sent again after the
    session ended) opens nothing."""

    async def main() -> None:
        p = Proxy(parse_config({"daemon_socket": None}))

        async def no_server(relay: Relay, client: IPv4Address) -> None:
            return None

        monkeypatch.setattr(p, "_connect_server", no_server)
        rec = open_record(bytes([2]) * 16)
        relay = p._relay_for(FakeLeg(), rec, PEER)  # type: ignore[arg-type]
        assert relay is not None and p.remote_by_peer[PEER] == 1
        p.forget(relay)  # the session ended (reset: no tombstone)
        leg = FakeLeg()
        assert p._relay_for(leg, rec, PEER) is None  # type: ignore[arg-type]
        assert p.counters["replayed_open"] == 1 and isinstance(leg.reply(), fr.Reset)
        assert p.remote_by_peer[PEER] == 0

    asyncio.run(main())


def test_an_open_beyond_the_peers_session_limit_is_answered_busy_and_taken_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At ``max_peer_sessions`` an OPEN is answered BUSY, not RESET: the initiator's app
    waits instead of being reset, and the same OPEN is taken once a session ends (a
    BUSY takes nothing, so the id is not remembered as a replay)."""

    async def main() -> None:
        p = Proxy(parse_config({"daemon_socket": None, "max_peer_sessions": 2}))

        async def no_server(relay: Relay, client: IPv4Address) -> None:
            return None

        monkeypatch.setattr(p, "_connect_server", no_server)
        first = [p._relay_for(FakeLeg(), open_record(bytes([i]) * 16), PEER) for i in (3, 4)]  # type: ignore[arg-type]
        assert all(r is not None for r in first)
        third = open_record(bytes([5]) * 16)
        leg = FakeLeg()
        assert p._relay_for(leg, third, PEER) is None  # type: ignore[arg-type]
        assert leg.reply() == fr.Busy(server.BUSY_RETRY_MS)
        assert p.counters["refused_limit"] == 1 and p.remote_by_peer[PEER] == 2
        p.forget(first[0])  # type: ignore[arg-type]
        assert p._relay_for(FakeLeg(), third, PEER) is not None  # type: ignore[arg-type]
        assert p.counters["replayed_open"] == 0 and p.remote_by_peer[PEER] == 2

    asyncio.run(main())


class FakeRelay:
    def __init__(self) -> None:
        self.charged = 0
        self.flow_updates = 0

    def update_flow(self) -> None:
        self.flow_updates += 1


def test_all_replay_buffers_share_one_memory_budget() -> None:
    async def main() -> None:
        mib = 1 << 20
        p = Proxy(parse_config({"daemon_socket": None, "memory_budget": 10 * mib}))
        a, b = FakeRelay(), FakeRelay()
        p.relays = {a, b}  # type: ignore[assignment]
        p.account(a, 5 * mib)  # type: ignore[arg-type]
        assert not p.over_budget and p.replay_total == 5 * mib
        p.account(b, 5 * mib)  # type: ignore[arg-type]
        assert p.over_budget and p.counters["budget_waits"] == 1
        assert a.flow_updates == b.flow_updates == 1  # every app paused at once
        p.account(a, 4 * mib + mib // 2)  # type: ignore[arg-type]  # 9.5 MiB: above 90 %
        assert p.over_budget
        p.account(a, 3 * mib)  # type: ignore[arg-type]  # 8 MiB: below 90 %, read again
        assert not p.over_budget and a.flow_updates == 2
        p.relays = set()
        assert p.status()["memory"] == {"replay_bytes": 8 * mib, "budget": 10 * mib}

    asyncio.run(main())


class FakeTransport:
    def __init__(self, queued: int) -> None:
        self.queued = queued
        self.paused = False

    def get_write_buffer_size(self) -> int:
        return self.queued

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


class FakeSide:
    def __init__(self, transport: FakeTransport) -> None:
        self.transport = transport
        self.lost = False


def test_a_leg_whose_peer_does_not_read_is_not_read_either() -> None:
    """A peer that sends PROBEs without reading our PROBE_ACKs (or anything that makes us
    answer) fills our write queue: beyond the cap the leg is not read (before, every
    PROBE queued an answer: 100,000 PROBEs queued 1.3 MB)."""

    async def main() -> None:
        p = Proxy(parse_config({"daemon_socket": None}))
        s = Session.initiate(0.0, DST, "elfn", token_bytes=tokens())
        relay = Relay(p, s, IPv4Address("10.42.0.5"))
        t = FakeTransport(p.mesh_write_cap - 1)
        relay.mesh = FakeSide(t)  # type: ignore[assignment]
        relay.mesh_write_blocked = True
        relay.update_flow()
        assert not t.paused  # below the cap: reading goes on (it may carry our ACKs)
        t.queued = p.mesh_write_cap
        relay.update_flow()
        assert t.paused and p.counters["mesh_backpressure"] == 1
        t.queued = 0
        relay.mesh_write_blocked = False  # resume_writing: the peer reads again
        relay.update_flow()
        assert not t.paused

    asyncio.run(main())


def test_an_idle_session_its_peer_gave_up_frees_its_slot_once_the_peer_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An initiator that resets a session while it has no leg (bytes owed through an
    outage) cannot tell the acceptor, whose idle stream would hold its slot for
    ``idle_timeout``. At the peer's limit, once the peer has been reaching us for the
    grace, the idle session it left silent all the while is reset and the OPEN taken;
    before the grace it is answered BUSY (a returning initiator resumes within it)."""

    async def main() -> None:
        p = Proxy(
            parse_config({"daemon_socket": None, "max_peer_sessions": 2, "partition_timeout": 30})
        )
        clock = [1000.0]
        monkeypatch.setattr(p.loop, "time", lambda: clock[0])

        async def no_server(relay: Relay, client: IPv4Address) -> None:
            return None

        monkeypatch.setattr(p, "_connect_server", no_server)
        first = [p._relay_for(FakeLeg(), open_record(bytes([i]) * 16), PEER) for i in (6, 7)]  # type: ignore[arg-type]
        assert all(r is not None for r in first)
        idle, moving = first[0].session, first[1].session  # type: ignore[union-attr]
        # the outage: both silent for 100 s; ``idle`` had carried no DATA for long before
        idle._last_data = 900.0
        clock[0] = 1100.0
        assert idle.idle_without_leg_since() == 1000.0
        assert moving.idle_without_leg_since() is None  # it was moving: partition_timeout
        third = open_record(bytes([8]) * 16)
        leg = FakeLeg()
        assert p._relay_for(leg, third, PEER) is None  # type: ignore[arg-type]
        assert leg.reply() == fr.Busy(server.BUSY_RETRY_MS)  # the peer is back only now
        clock[0] += p.orphan_grace()
        relay = p._relay_for(FakeLeg(), third, PEER)  # type: ignore[arg-type]
        assert relay is not None and p.counters["orphans_reset"] == 1
        assert idle.state.value == "closed" and moving.state.value != "closed"
        assert p.remote_by_peer[PEER] == 2

    asyncio.run(main())
