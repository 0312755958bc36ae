"""The one JSON-lines socket server: replies, errors, bounded subscribers, peer check."""

from __future__ import annotations

import asyncio
import json
import os

from manetkit.jsonlines import Access, LineServer, Peer, peer_of, request


async def _line(reader: asyncio.StreamReader) -> dict:
    return json.loads(await asyncio.wait_for(reader.readline(), 2))


def test_handler_errors_become_replies_and_the_connection_stays(tmp_path):
    def handle(req):
        if req["cmd"] == "need":
            return {"ok": True, "x": req["x"]}
        raise ValueError(f"unknown cmd {req['cmd']!r}")

    async def main():
        srv = LineServer(tmp_path / "s.sock", handle)
        await srv.start()
        try:
            r, w = await asyncio.open_unix_connection(str(tmp_path / "s.sock"))
            w.write(
                b'[1]\n{"cmd":"need"}\n{"cmd":"need","x":3}\n{"cmd":"what"}\n{"cmd":"subscribe"}\n'
            )
            assert "cmd" in (await _line(r))["error"]
            assert (await _line(r)) == {"ok": False, "error": "need: missing field 'x'"}
            assert (await _line(r)) == {"ok": True, "x": 3}
            assert (await _line(r))["error"] == "unknown cmd 'what'"
            # subscribe is only the server's when it streams; else the handler's.
            assert (await _line(r))["error"] == "unknown cmd 'subscribe'"
            assert srv.counters()["bad_requests"] == 4
            w.close()
        finally:
            await srv.close()

    asyncio.run(main())


def test_subscribers_are_bounded_and_refusals_counted(tmp_path):
    async def main():
        srv = LineServer(tmp_path / "s.sock", dict, subscribe=True, max_subscribers=2)
        await srv.start()
        try:
            conns = [await asyncio.open_unix_connection(str(tmp_path / "s.sock")) for _ in range(3)]
            replies = []
            for r, w in conns:
                w.write(b'{"cmd":"subscribe"}\n')
                replies.append(await _line(r))
            assert [x["ok"] for x in replies] == [True, True, False]
            assert "2 subscribers" in replies[2]["error"]
            assert srv.subscribers == 2 and srv.counters()["refused"] == 1
            srv.publish({"event": "e", "n": 1})
            for r, _ in conns[:2]:
                assert (await _line(r)) == {"event": "e", "n": 1}
            # A subscriber that leaves frees its place.
            conns[0][1].close()
            await asyncio.sleep(0.05)
            r, w = conns[2]
            w.write(b'{"cmd":"subscribe"}\n')
            for _ in range(50):
                if srv.subscribers < 2:
                    break
                await asyncio.sleep(0.02)
            assert (await _line(r))["ok"] is True
            for _, w in conns[1:]:
                w.close()
        finally:
            await srv.close()

    asyncio.run(main())


def test_peer_credentials_and_access_rule(tmp_path):
    async def main():
        srv = LineServer(tmp_path / "s.sock", lambda req: {"ok": True})
        await srv.start()
        try:
            import socket

            s = socket.socket(socket.AF_UNIX)
            s.connect(str(tmp_path / "s.sock"))
            me = peer_of(s)  # the server's side is this process too
            s.close()
            assert me is not None and me.pid == os.getpid() and me.uid == os.getuid()
            reply = await asyncio.to_thread(request, tmp_path / "s.sock", {"cmd": "x"})
            assert reply == {"ok": True}
        finally:
            await srv.close()

    asyncio.run(main())
    assert Access().allows(Peer(1, 0, 0))
    assert not Access().allows(Peer(1, 1000, 1000))
    assert not Access().allows(None)
    assert Access("65534").allows(Peer(1, 1000, 1000, frozenset({65534})))
    assert Access("65534").allows(Peer(1, 1000, 65534))
    assert not Access("65534").allows(Peer(1, 1000, 1000, frozenset({27})))


def test_close_with_connected_clients_logs_no_error(tmp_path, caplog):
    """Closing the server cancels its client tasks; Python 3.11's stream callback then
    called ``task.exception()`` on a cancelled task and logged a CancelledError
    traceback per connected client at every shutdown (seen in the lab radio's log)."""

    async def main():
        srv = LineServer(tmp_path / "s.sock", dict, subscribe=True)
        await srv.start()
        conns = [await asyncio.open_unix_connection(str(tmp_path / "s.sock")) for _ in range(2)]
        conns[0][1].write(b'{"cmd":"subscribe"}\n')
        assert (await _line(conns[0][0]))["ok"] is True
        await srv.close()
        for _ in range(3):
            await asyncio.sleep(0)
        for _, w in conns:
            w.close()
        await asyncio.sleep(0.01)

    with caplog.at_level("ERROR", logger="asyncio"):
        asyncio.run(main())
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text


def test_subscribe_in_asyncio_yields_events_skips_replies_and_can_send(tmp_path):
    from manetkit.jsonlines import subscribe

    asked: list[dict] = []

    def handle(req):
        asked.append(req)
        return {"ok": True}

    async def main():
        srv = LineServer(tmp_path / "s.sock", handle, subscribe=True)
        await srv.start()
        sub = subscribe(tmp_path / "s.sock")
        got = []
        try:

            async def read():
                async for ev in sub:
                    got.append(ev)
                    if len(got) == 2:
                        return

            reader = asyncio.create_task(read())
            for _ in range(100):
                if srv.subscribers:
                    break
                await asyncio.sleep(0.01)
            assert sub.send({"cmd": "discover", "dst": "x"})  # its reply line is skipped
            srv.publish({"event": "a", "n": 1})
            srv.publish({"event": "b"})
            await asyncio.wait_for(reader, 2)
        finally:
            await srv.close()
        assert got == [{"event": "a", "n": 1}, {"event": "b"}]
        assert asked == [{"cmd": "discover", "dst": "x"}]
        assert not sub.subscribed  # the stream ended with the loop
        assert not sub.send({"cmd": "x"})

    asyncio.run(main())


def test_subscribe_in_a_thread_connects_before_returning_and_closes(tmp_path):
    import threading

    from manetkit.jsonlines import subscribe

    async def main():
        srv = LineServer(tmp_path / "s.sock", dict, subscribe=True)
        await srv.start()
        got: list[dict] = []
        try:
            sub = await asyncio.to_thread(subscribe(tmp_path / "s.sock").connect)
            assert sub.subscribed and srv.subscribers == 1
            t = threading.Thread(target=lambda: got.extend(sub))
            t.start()
            srv.publish({"event": "a"})  # published after connect(): never missed
            for _ in range(100):
                if got:
                    break
                await asyncio.sleep(0.01)
            sub.close()
            await asyncio.to_thread(t.join, 2)
            assert not t.is_alive()
        finally:
            await srv.close()
        assert got == [{"event": "a"}]
        # No server: the caller hears it.
        try:
            subscribe(tmp_path / "none.sock").connect(timeout=1)
        except OSError:
            pass
        else:
            raise AssertionError("connect to a missing socket must raise")

    asyncio.run(main())
