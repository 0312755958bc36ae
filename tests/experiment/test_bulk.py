"""Bulk senders on a fake clock: a sender whose connect failed (no route yet) is started
again for what is left of the window (babeld/batmand before their first route)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from manetkit.experiment import bulk

# What iperf3 3.12 -J writes (and exits 0 with) when connect() fails: ENETUNREACH.
FAILED = {"start": {}, "intervals": [], "end": {},
          "error": "unable to connect to server: Network is unreachable"}  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += max(0.0, s)


class FakeClient:
    """Fails to connect until ``route_at`` (fake time), then runs until it is stopped."""

    def __init__(self, clock: Clock, out: Path, route_at: float) -> None:
        self.started = clock.t
        self.fails = clock.t < route_at
        out.write_text(json.dumps(FAILED) if self.fails else "")
        self.returncode: int | None = 0 if self.fails else None

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        return self.returncode


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    clock = Clock()
    made: list[tuple[list[str], FakeClient]] = []
    monkeypatch.setattr(bulk, "time", clock)
    monkeypatch.setattr(bulk, "_listening", lambda lab, flow: True)

    def popen(lab: str, node: str, argv: list[str], out: Path) -> FakeClient:
        c = FakeClient(clock, out, route_at=1003.5)
        made.append((argv, c))
        return c

    monkeypatch.setattr(bulk, "_popen", popen)
    return clock, made


def test_a_sender_that_could_not_connect_is_started_again_for_the_rest_of_the_window(
    clients, tmp_path: Path
):
    clock, made = clients
    flow = bulk.Flow("n1", "n3", 5201, server=None, server_out=tmp_path / "s.json")  # type: ignore[arg-type]
    w0, w1 = bulk.run("lab", [flow], 10.0, tmp_path)
    assert (w0, w1) == (1000.0, 1010.0)
    # tries at 0, 1, 2, 3 s fail (no route); the one at 4 s connects and is kept
    assert [round(c.started - w0) for _, c in made] == [0, 1, 2, 3, 4]
    assert flow.attempts == 5 and not made[-1][1].fails
    # each try asks for what is left of the window
    assert [argv[argv.index("-t") + 1] for argv, _ in made] == ["10.0", "9.0", "8.0", "7.0", "6.0"]
    assert flow.client_out == tmp_path / "iperf-0-client-4.json"


def test_connect_failed_reads_iperf3s_error(tmp_path: Path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps(FAILED))
    assert bulk.connect_failed(p)
    p.write_text(json.dumps({"error": "interrupt - the server has terminated"}))
    assert not bulk.connect_failed(p)  # connected, then cut: the server is gone
    p.write_text("{")
    assert not bulk.connect_failed(p) and not bulk.connect_failed(tmp_path / "none.json")
