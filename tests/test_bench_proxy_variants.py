"""``bench proxy``'s variants and the route events it counts per window
(manetkit/bench/proxy.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from manetkit.bench import proxy as bp
from manetkit.daemonstatus import StatusError
from manetkit.errors import UserError


def test_mode_variants_restart_the_proxies_in_that_mode(tmp_path: Path) -> None:
    assert bp.variant_config("proxy-fixed-rto", tmp_path) == {"mode": "fixed-rto"}
    assert bp.variant_config("proxy-elfn", tmp_path) == {"mode": "elfn"}
    assert bp.variant_config("proxy", tmp_path) == {}
    assert bp.variant_config("proxy-ack200ms", tmp_path) == {"ack_delay": 0.2}


def test_an_unknown_variant_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="proxy-fixed-rto"):
        bp.variant_config("proxy-bus", tmp_path)


def test_events_sum_the_end_proxies_and_every_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each end proxy's ELFN counters and each daemon's breaks are added up; a node whose
    component does not answer counts 0 instead of failing the window."""

    def fake_proxy(lab: str, node: str) -> dict | None:
        if node == "n3":
            return None  # nobody answers
        return {"counters": {"route_events": 2, "freezes": 1, "thaws": 1, "legs_replaced": 0}}

    def fake_daemon(sock: Path, timeout: float) -> object:
        if sock.parent.name == "n3":
            raise StatusError(f"no daemon answers on {sock}")
        counters = {"link-breaks": 1, "errors-sent": 2, "veto-resent": 5}
        return SimpleNamespace(engine=SimpleNamespace(counters=counters))

    monkeypatch.setattr(bp, "proxy_status", fake_proxy)
    monkeypatch.setattr(bp, "fetch_status", fake_daemon)
    got = bp._events("lab", ("n1", "n4"), ["n1", "n2", "n3", "n4"])
    assert got == {
        "route_events": 4, "freezes": 2, "thaws": 2, "legs_replaced": 0,
        "link-breaks": 3, "errors-sent": 6, "veto-resent": 15,
    }  # fmt: skip


def test_the_sender_connection_is_the_one_that_carried_most(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``ss -ti``'s info lines: the busier connection is read, its bytes per data segment
    and the share sent again computed (a leg that carries more small segments shows it)."""
    out = (
        "ESTAB 0 0 10.42.0.1:40000 10.42.0.4:4242\n"
        "\t cubic wscale:7,7 rto:300 rtt:120.5/10 mss:1400 cwnd:8 bytes_sent:2000000 "
        "bytes_retrans:20000 bytes_acked:1980000 segs_out:2100 data_segs_out:2000 retrans:0/14\n"
        "ESTAB 0 0 10.42.0.1:40002 10.42.0.4:4242\n"
        "\t cubic rtt:3/1 mss:1400 cwnd:10 bytes_sent:100 bytes_acked:100 segs_out:2 data_segs_out:1\n"
    )
    seen: list[tuple] = []

    def fake_ss(netns: str, peer: str, port: int, *, established: bool = False) -> str:
        seen.append((peer, port, established))
        return out

    monkeypatch.setattr(bp.tcpstat, "connection_ss", fake_ss)
    got = bp._sender_tcp("lab", "10.42.0.4", 4242)
    assert got == {
        "bytes_acked": 1980000, "bytes_per_data_segment": 1000, "retrans_pct": 1.0,
        "cwnd": 8, "rtt_ms": 120.5, "mss": 1400,
    }  # fmt: skip
    assert seen == [("10.42.0.4", 4242, True)]


def test_the_verdict_is_the_intervals_not_the_means() -> None:
    """Met only when the interval's lower end clears 0.98; missed only when its upper end
    is below; rounds that spread too widely to tell are undecided."""
    plain = [400.0, 402.0, 398.0, 401.0, 399.0, 400.0]
    assert bp.verdict([400.0, 401.0, 399.0, 400.0, 402.0, 398.0], plain)["verdict"] == "meets"
    assert bp.verdict([300.0, 302.0, 298.0, 301.0, 299.0, 300.0], plain)["verdict"] == "misses"
    wide = bp.verdict([419.0, 278.0, 386.0, 354.0, 417.0, 328.0],
                      [385.0, 308.0, 425.0, 422.0, 363.0, 423.0])  # fmt: skip
    assert wide["verdict"] == "undecided"
    ci = wide["ratio_to_plain"]
    assert ci["low"] < 0.98 <= ci["high"]
    assert bp.verdict([], plain) == {"ratio_to_plain": None, "verdict": None}


def test_a_stalled_plain_side_is_judged_and_written_without_a_crash() -> None:
    """Plain's median 0 (a chain that stalled in most rounds): the ratio is infinite, the
    proxy meets the goal, and the table's text says ``inf`` instead of raising."""
    v = bp.verdict([300.0, 310.0, 305.0], [0.0, 0.0, 10.0])
    assert v["verdict"] == "meets" and v["ratio_to_plain"]["estimate"] == "inf"
    assert bp.ratio_text(v["ratio_to_plain"]).startswith("inf [")
    assert bp.ratio_text({"estimate": 0.957, "low": 0.7912, "high": 1.0617}) == (
        "0.957 [0.791, 1.062]"
    )


def test_only_rounds_that_kept_real_time_are_judged() -> None:
    """A round whose fidelity record says invalid (the medium fell behind) stays in the
    JSON but does not enter the verdict: a slow round there is the emulator's, not TCP's."""
    runs = [
        {"kbps": 400.0, "fidelity": {"valid": True}},
        {"kbps": 20.0, "fidelity": {"valid": False}},
        {"kbps": 395.0, "fidelity": {"valid": True}},
    ]
    assert bp.valid_kbps(runs) == [400.0, 395.0]
    assert bp.verdict(bp.valid_kbps(runs), [398.0, 399.0, 401.0])["verdict"] != "misses"
    assert bp.verdict([], [398.0])["verdict"] is None
