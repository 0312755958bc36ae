"""What a peer may ask of an acceptor (manetkit/proxy/guard.py), without sockets."""

from __future__ import annotations

import logging
from ipaddress import IPv4Address, IPv4Network

import pytest

from manetkit.proxy import frames as fr
from manetkit.proxy.guard import Refusals, destination_refusal
from manetkit.proxy.session import Role, Session
from tests.proxy.sim import Pair, tokens

MESH = IPv4Network("10.42.0.0/16")
LOCAL = {IPv4Address("192.168.1.5"), IPv4Address("10.42.0.4")}


def why(addr: str, allow_local: bool = False, mesh: IPv4Network = MESH) -> str | None:
    return destination_refusal(IPv4Address(addr), mesh, allow_local, LOCAL.__contains__)


def test_mesh_destinations_pass_the_rest_is_refused_with_the_reason() -> None:
    assert why("10.42.0.4") is None  # the acceptor's own mesh address: the usual case
    assert why("10.42.0.9") is None
    assert "outside the mesh prefix" in (why("8.8.8.8") or "")
    assert "local address" in (why("192.168.1.5") or "")
    assert "loopback" in (why("127.0.0.1") or "") or "local" in (why("127.0.0.1") or "")
    for bad in ("0.0.0.0", "224.0.0.1", "255.255.255.255", "10.42.255.255"):
        assert why(bad) is not None, bad


def test_allow_local_opens_loopback_and_local_addresses_only() -> None:
    assert why("127.0.0.1", allow_local=True) is None
    assert why("192.168.1.5", allow_local=True) is None
    assert why("8.8.8.8", allow_local=True) is not None  # still no open relay
    # a mesh prefix that contains loopback does not let it in by itself
    assert why("127.0.0.1", mesh=IPv4Network("127.0.0.0/8")) is not None


def test_refusals_are_counted_every_time_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    counters: dict[str, int] = {}
    r = Refusals(counters)
    with caplog.at_level(logging.WARNING, logger="manetkit.proxy"):
        for _ in range(100):
            r.refuse("refused_destination", "10.42.0.9", "destination 127.0.0.1 ...")
        r.refuse("refused_destination", "10.42.0.7", "destination 127.0.0.1 ...")
    assert counters["refused_destination"] == 101
    assert len([m for m in caplog.messages if "refused" in m]) == 2  # once per peer


def test_a_resume_claiming_bytes_never_sent_is_refused_before_it_is_attached() -> None:
    p = Pair()
    p.write(p.i, 5000)
    p.settle()
    sa = p.sa
    assert sa is not None and sa.sent_high == 0  # the acceptor sent nothing yet
    p.write(p.a, 300)
    p.settle()
    assert sa.acked == sa.sent_high == 300
    sid = p.si.sid
    assert sa.resume_refusal(fr.Resume(sid, 9, 300, False)) is None
    assert "outside [300, 300]" in (sa.resume_refusal(fr.Resume(sid, 9, 10**9, False)) or "")
    assert sa.resume_refusal(fr.Resume(sid, 9, 100, False)) is not None  # already settled
    fresh = Session(Role.ACCEPTOR, sid, 0.0, token_bytes=tokens())
    assert fresh.resume_refusal(fr.Resume(sid, 1, 1, False)) is not None
