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
