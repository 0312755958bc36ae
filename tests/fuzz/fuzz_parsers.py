"""atheris (libFuzzer) harnesses for every parser: any input gives a parsed object or
the project's own parse error; anything else is a crash libFuzzer reports.

Not collected by pytest (not ``test_*.py``); atheris is not a CI dependency::

    pip install atheris
    python3 tests/fuzz/fuzz_parsers.py TARGET -max_total_time=600 -rss_limit_mb=1024

TARGET: ipv4 aodv dsr manet_ext hello auth proxy medium eventsock engines (one at a
time: each burns a core; results in docs/security.md). ``engines`` feeds the bytes as
received, overheard and locally sent frames to long-lived DSR, SMR and AODV engines on a
fake clock (state builds up across inputs): the engines must never raise.
"""

from __future__ import annotations

import contextlib
import sys

import atheris

with atheris.instrument_imports():
    from manetkit import events
    from manetkit.daemon import auth
    from manetkit.daemon.engines.aodv import AodvConfig, AodvEngine
    from manetkit.daemon.engines.dsr import DsrEngine
    from manetkit.daemon.engines.smr import SmrEngine
    from manetkit.daemon.linksense.hello import parse_hello
    from manetkit.daemon.wire import aodv, dsr, ipv4, manet_ext
    from manetkit.jsonlines import LineServer
    from manetkit.lab.medium import protocol as medium
    from manetkit.proxy import frames

from ipaddress import IPv4Address  # noqa: E402

from manetkit.daemon.neighbours import NeighbourTable  # noqa: E402

_AUTH = auth.Authenticator([auth.Key(1, "hmac-sha256", bytes(32))], required=True)
_SRV = LineServer("/nonexistent", lambda req: {"ok": True, "cmd": req["cmd"]})


def _ipv4(data: bytes) -> None:
    with contextlib.suppress(ipv4.MalformedPacket):
        h = ipv4.parse(data)
        ipv4.parse_udp(data[h.ihl : h.total_length])


def _aodv(data: bytes) -> None:
    with contextlib.suppress(aodv.MalformedAodv):
        aodv.parse(data)
    with contextlib.suppress(aodv.MalformedAodv, manet_ext.MalformedNotice):
        _, msg = aodv.parse_control(data)
        for t, body in msg.extensions:
            manet_ext.from_aodv(t, body)


def _dsr(data: bytes) -> None:
    with contextlib.suppress(ipv4.MalformedPacket, manet_ext.MalformedNotice):
        _, dh = dsr.parse(data)
        for po in dh.options:
            if isinstance(po.option, dsr.UnknownOption):
                manet_ext.from_dsr(po.option.type, po.option.data)
        dsr.strip(data)


def _manet_ext(data: bytes) -> None:
    if data:
        for fn in (manet_ext.from_dsr, manet_ext.from_aodv):
            with contextlib.suppress(manet_ext.MalformedNotice):
                fn(data[0], data[1:])


def _auth(data: bytes) -> None:
    out = _AUTH.verify(0.0, data, b"\x02\0\0\0\0\1")
    assert isinstance(out, bytes | auth.Rejected | auth.Handled)
    _AUTH.sign(0.0, data, b"\x02\0\0\0\0\1")


def _proxy(data: bytes) -> None:
    r = frames.FrameReader()
    r.feed(data)
    with contextlib.suppress(frames.MalformedFrame):
        while r.next_frame() is not None:
            pass


def _medium(data: bytes) -> None:
    with contextlib.suppress(medium.ProtocolError):
        medium.parse(data)


def _eventsock(data: bytes) -> None:
    assert "ok" in _SRV.reply(data, None)
    with contextlib.suppress(events.EventError, ValueError):
        import json

        obj = json.loads(data)
        if isinstance(obj, dict):
            events.from_wire(obj)


_ME = IPv4Address("10.42.0.1")
_ENGINES = [
    DsrEngine(_ME, None, NeighbourTable()),
    SmrEngine(_ME, None, NeighbourTable()),
    AodvEngine(_ME, AodvConfig(), NeighbourTable()),
]
_CLOCK = [0.0]


def _engines(data: bytes) -> None:
    """First byte: which input (receive, overhear, send_local) and the MAC; the rest is
    the packet. Every engine handles it, then its timer; actions are drained."""
    if not data:
        return
    _CLOCK[0] += 0.003 * (1 + (data[0] & 7))
    now = _CLOCK[0]
    mac = bytes((2, 0, 0, 0, 0, data[0]))
    for eng in _ENGINES:
        kind = data[0] % 3
        if kind == 0:
            eng.receive_frame(now, data[1:], mac)
        elif kind == 1:
            eng.overhear_frame(now, data[1:], mac)
        else:
            eng.send_local(now, data[1:])
        t = eng.get_timer()
        if t is not None and t <= now:
            eng.handle_timer(now)
        while eng.next_event() is not None:
            pass


TARGETS = {
    "ipv4": _ipv4,
    "aodv": _aodv,
    "dsr": _dsr,
    "manet_ext": _manet_ext,
    "hello": lambda d: parse_hello(d),
    "auth": _auth,
    "proxy": _proxy,
    "medium": _medium,
    "eventsock": _eventsock,
    "engines": _engines,
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        raise SystemExit(f"usage: fuzz_parsers.py {{{','.join(TARGETS)}}} [libFuzzer flags]")
    target = TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
