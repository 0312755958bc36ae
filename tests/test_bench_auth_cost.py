"""``manetkit bench dataplane``'s in-process parts: the cost of authenticating a control
frame (every signed frame verified, after RFC 8967's challenge) and the DSR data it
blasts (a Source Route through B: the frame the auth layer never signs)."""

from __future__ import annotations

from manetkit.bench.dataplane import _dsr_data, auth_cost
from manetkit.daemon import auth
from manetkit.daemon.wire import dsr


def test_auth_cost_verifies_every_signed_frame():
    res = auth_cost(rounds=200)
    assert res["hmac-sha256"]["trailer_bytes"] == 43 and res["blake2s128"]["trailer_bytes"] == 27
    for r in res.values():
        assert r["verified"] == 200 and r["sign_us"] > 0 and r["verify_us"] > 0


def test_the_blasted_dsr_data_is_never_signed():
    packet = _dsr_data()
    _, hdr = dsr.parse(packet)
    assert [type(p.option) for p in hdr.options] == [dsr.SourceRoute]
    a = auth.Authenticator([auth.Key(1, "hmac-sha256", bytes(32))])
    assert a.kind(packet) is None and a.verify(0.0, packet, bytes(6)) == packet


def test_forwarding_cost_runs_the_shell_and_engine_with_and_without_auth():
    from manetkit.bench.dataplane import forwarding_cost

    res = forwarding_cost(packets=300, rounds=1, batch=64)  # asserts every packet went out
    assert set(res) == {"static", "dsr"}
    for r in res.values():
        assert r["off_us"] > 0 and r["on_us"] > 0
