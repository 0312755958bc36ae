"""bench chain: a transfer that never ends is a stalled chain (0, said so), not a crash."""

from __future__ import annotations

import subprocess

import pytest

from manetkit.bench import chain


def test_an_iperf3_past_its_duration_is_reported_as_a_stall(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stopped = []

    def timed_out(ns: str, argv: list[str], **kw: object) -> None:
        raise subprocess.TimeoutExpired(argv, kw["timeout"])  # type: ignore[arg-type]

    monkeypatch.setattr(chain.netns, "popen", lambda *a, **kw: "server")
    monkeypatch.setattr(chain.netns, "run", timed_out)
    monkeypatch.setattr(chain.procs, "stop", stopped.append)
    with pytest.raises(chain.Stalled, match="no end after 65 s"):
        chain.iperf_tcp("lab", 1, 3, 5.0)  # not retried: a stalled path stays stalled
    assert stopped == ["server"]  # the server is stopped all the same


def test_the_senders_rtt_and_resent_segments_are_read_from_iperf3s_report() -> None:
    """iperf3 -J's sender summary (microseconds) becomes the chain's RTT column in ms;
    a report without it (another platform) gives None, not a crash."""
    report = {"end": {"streams": [{"sender": {"mean_rtt": 412345, "max_rtt": 1_801_000,
                                              "retransmits": 17}}]}}  # fmt: skip
    assert chain._sender(report) == {"mean_rtt_ms": 412.3, "max_rtt_ms": 1801.0, "retransmits": 17}
    assert chain._sender({"end": {}}) == {
        "mean_rtt_ms": None, "max_rtt_ms": None, "retransmits": None,
    }  # fmt: skip
