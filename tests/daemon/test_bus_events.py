"""The event socket passes the engines' erdn/ersn and ELFN route-down events unchanged."""

from __future__ import annotations

import asyncio
import json

from manetkit.daemon.eventsocket import EventServer
from tests.daemon.dsrutil import A
from tests.helpers.busdsr import break_and_send, setup


def test_erdn_ersn_and_elfn_reach_subscribers_unchanged(tmp_path):
    sim = setup()
    break_and_send(sim)
    wanted = [n for n in sim.notified[A(1)] if n.name in ("erdn", "ersn", "route-down")]
    assert {n.name for n in wanted} == {"erdn", "ersn", "route-down"}

    async def main():
        srv = EventServer(tmp_path / "ev.sock", dict)
        await srv.start()
        try:
            r, w = await asyncio.open_unix_connection(str(tmp_path / "ev.sock"))
            w.write(b'{"cmd":"subscribe"}\n')
            await asyncio.wait_for(r.readline(), 2)
            for n in wanted:
                srv.publish(n.event)  # what the shell does with a Notify
            got = [json.loads(await asyncio.wait_for(r.readline(), 2)) for _ in wanted]
            w.close()
        finally:
            await srv.close()
        return got

    got = asyncio.run(main())
    for n, line in zip(wanted, got, strict=True):
        time = line.pop("time")
        assert time > 1e9 and line == {"event": n.name, **n.fields}
    erdn = next(line for line in got if line["event"] == "erdn")
    # Exactly the shape docs/proxy.md's "Events the proxy consumes" names.
    assert set(erdn) == {"event", "dst", "src", "sport", "dport", "seq", "pivot"}
    ersn = next(line for line in got if line["event"] == "ersn")
    assert set(ersn) == {"event", "dst", "src", "sport", "dport", "last_ack", "pivot"}
