"""The event socket: JSON lines, subscribe/status, bounded queues for slow subscribers."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import stat
import tempfile
from pathlib import Path

import pytest

from manetkit import events
from manetkit.daemon.eventsocket import EventServer
from manetkit.daemonstatus import StaticStatus, fetch_status
from manetkit.jsonlines import Access, request
from tests.daemon.vethnet import VethMesh
from tests.helpers.users import as_user


async def _line(reader: asyncio.StreamReader) -> dict:
    return json.loads(await asyncio.wait_for(reader.readline(), 2))


def test_subscribe_status_and_errors(tmp_path):
    async def main():
        srv = EventServer(tmp_path / "ev.sock", lambda: {"neighbours": [], "x": 1})
        await srv.start()
        try:
            r, w = await asyncio.open_unix_connection(str(tmp_path / "ev.sock"))
            w.write(b'{"cmd":"status"}\nnot json\n{"cmd":"reboot"}\n{"cmd":"subscribe"}\n')
            assert (await _line(r)) == {"ok": True, "status": {"neighbours": [], "x": 1}}
            bad = await _line(r)
            assert bad["ok"] is False and "cmd" in bad["error"]
            unknown = await _line(r)
            assert unknown["ok"] is False and "reboot" in unknown["error"]
            assert (await _line(r)) == {"ok": True, "subscribed": True}
            srv.publish(
                events.RouteDown(
                    dst="10.42.0.5", reason="rerr", src="10.42.0.1", sport=5, dport=80, seq=9
                )
            )
            ev = await _line(r)
            assert ev["event"] == "route-down" and ev["seq"] == 9 and ev["time"] > 1e9
            assert srv.counters()["bad_requests"] == 2
            w.close()
        finally:
            await srv.close()
        assert not (tmp_path / "ev.sock").exists()

    asyncio.run(main())


def test_slow_subscriber_does_not_block_and_is_told_what_it_missed(tmp_path):
    async def main():
        srv = EventServer(tmp_path / "ev.sock", dict, queue_events=8)
        await srv.start()
        try:
            r, w = await asyncio.open_unix_connection(str(tmp_path / "ev.sock"), limit=1 << 20)
            w.write(b'{"cmd":"subscribe"}\n')
            await _line(r)
            # Publish far more than the queue and the socket buffers hold, without ever
            # yielding to the loop: publish itself must never block.
            big = "x" * 4000
            for i in range(2000):
                srv.publish(events.NeighbourUp(neighbour=str(i), mac=big))
            assert srv.dropped > 0
            dropped = srv.dropped
            # Now read what got through; a later event carries the count it missed.
            got = [await _line(r) for _ in range(8)]
            assert [int(g["neighbour"]) for g in got] == list(range(8))
            srv.publish(events.NeighbourDown(neighbour="-1"))
            nxt = await _line(r)
            assert nxt["event"] == "neighbour-down" and nxt["missed"] == dropped
            w.close()
        finally:
            await srv.close()

    asyncio.run(main())


@pytest.mark.netns
def test_neighbour_and_route_events_from_a_running_daemon(tmp_path):
    with VethMesh(f"mktev{os.getpid() % 1000}", 2, tmp_path) as mesh:
        mesh.start(1, static_routes={"10.42.0.9": "10.42.0.2"})

        import socket

        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(str(mesh.sock(1)))
        s.sendall(b'{"cmd":"subscribe"}\n')
        f = s.makefile("rb")
        assert json.loads(f.readline())["subscribed"]
        mesh.start(2)
        up = json.loads(f.readline())
        assert up["event"] == "neighbour-up" and up["neighbour"] == "10.42.0.2"
        assert up["mac"] == mesh.mac(2)
        # n2 goes silent: after 3 missed beacons (0.2 s each) it is down, and the static
        # route through it is reported down.
        mesh.stop(2)
        events = [json.loads(f.readline()) for _ in range(2)]
        kinds = {e["event"]: e for e in events}
        assert kinds["neighbour-down"]["reason"] == "silent"
        # declared down 3.5 beacon periods after it was last heard, and it says so
        assert 0.7 <= kinds["neighbour-down"]["silent_s"] < 1.5
        assert kinds["route-down"] == {
            **kinds["route-down"],
            "dst": "10.42.0.9",
            "next_hop": "10.42.0.2",
        }
        st = fetch_status(mesh.sock(1))
        assert [n.up for n in st.neighbours] == [False]
        assert isinstance(st.engine, StaticStatus) and st.engine.routes[0].up is False
        s.close()


def test_discover_command_asks_the_engine_and_checks_dst(tmp_path):
    asked = []

    def discover(dst):
        asked.append(dst)
        return len(asked) == 1  # the first restarts, the next is rate-limited

    async def main():
        srv = EventServer(tmp_path / "ev.sock", dict, discover=discover)
        await srv.start()
        try:
            r, w = await asyncio.open_unix_connection(str(tmp_path / "ev.sock"))
            w.write(b'{"cmd":"subscribe"}\n{"cmd":"discover","dst":"10.42.0.5"}\n')
            assert (await _line(r)) == {"ok": True, "subscribed": True}
            assert (await _line(r)) == {"ok": True, "restarted": True}
            w.write(b'{"cmd":"discover","dst":"10.42.0.5"}\n{"cmd":"discover","dst":"nope"}\n')
            assert (await _line(r)) == {"ok": True, "restarted": False}
            bad = await _line(r)
            assert bad["ok"] is False and "nope" in bad["error"]
            w.close()
        finally:
            await srv.close()
        assert [str(a) for a in asked] == ["10.42.0.5", "10.42.0.5"]
        assert srv.counters()["bad_requests"] == 1

    asyncio.run(main())


def test_discover_unknown_without_an_engine(tmp_path):
    async def main():
        srv = EventServer(tmp_path / "ev.sock", dict)
        await srv.start()
        try:
            cmd = {"cmd": "discover", "dst": "10.42.0.5"}
            reply = await asyncio.to_thread(request, tmp_path / "ev.sock", cmd)
        finally:
            await srv.close()
        assert reply["ok"] is False and "discover" in reply["error"]

    asyncio.run(main())


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")
def test_socket_is_0660_and_discover_needs_root_or_the_group():
    """Local control: 0660 root-owned socket, group configurable, SO_PEERCRED."""
    asked = []

    def discover(dst):
        asked.append(dst)
        return True

    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)  # the socket's mode, not the directory's, must keep users out
        path = Path(d) / "ev.sock"

        async def main():
            # Group nogroup (65534) may discover; other users cannot even connect.
            srv = EventServer(path, dict, discover=discover, access=Access("nogroup"))
            await srv.start()
            try:
                st = os.stat(path)
                assert stat.S_IMODE(st.st_mode) == 0o660
                assert (st.st_uid, st.st_gid) == (0, 65534)
                cmds = [{"cmd": "discover", "dst": "10.42.0.5"}, {"cmd": "ping"}]
                member = await asyncio.to_thread(as_user, 65534, 65534, path, cmds)
                assert member == [{"ok": True, "restarted": True}, {"ok": True, "pong": True}]
                other = await asyncio.to_thread(as_user, 4242, 4242, path, cmds)
                assert other == [{"connect_error": errno.EACCES}]
                # A peer that can reach the socket (mode opened up by hand) but is neither
                # root nor in the group reads status and is refused discover, clearly.
                srv_root_only = EventServer(Path(d) / "r.sock", dict, discover=discover)
                await srv_root_only.start()
                try:
                    os.chmod(Path(d) / "r.sock", 0o666)
                    got = await asyncio.to_thread(as_user, 4242, 4242, Path(d) / "r.sock", cmds)
                    assert got[1] == {"ok": True, "pong": True}
                    assert got[0]["ok"] is False
                    assert "'discover' changes state" in got[0]["error"]
                    assert "uid 4242" in got[0]["error"] and "root" in got[0]["error"]
                    assert srv_root_only.counters()["refused"] == 1
                    root = await asyncio.to_thread(request, Path(d) / "r.sock", cmds[0])
                    assert root == {"ok": True, "restarted": True}
                finally:
                    await srv_root_only.close()
            finally:
                await srv.close()

        asyncio.run(main())
    assert len(asked) == 2  # the member's and root's; the refused one never reached it


def test_unknown_control_group_is_a_config_error():
    from manetkit.daemon.config import parse_config
    from manetkit.errors import UserError

    with pytest.raises(UserError, match="control_group.*no-such-group-xyz"):
        parse_config({"address": "10.42.0.1", "control_group": "no-such-group-xyz"})
