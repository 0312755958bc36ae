"""labrun's wait for a medium time, with a fake medium; SIGTERM unwinding a run."""

from __future__ import annotations

import pytest

from manetkit.bench import labrun


class FakeMedium:
    """A medium clock at ``t`` that ``sleep`` advances; counts pings and sleeps."""

    def __init__(self, t: float, woken: float = 1.0) -> None:
        self.t = t
        self.woken = woken  # the part of each sleep slept (< 1: woken early)
        self.pings: list[float] = []
        self.sleeps: list[float] = []

    def control(self, lab: str, req: dict) -> dict:
        assert lab == "lab1" and req == {"cmd": "ping"}
        self.pings.append(self.t)
        return {"ok": True, "lab": lab, "t": self.t, "nodes": 50}

    def sleep(self, s: float) -> None:
        assert s > 0
        self.sleeps.append(s)
        self.t += s * self.woken


def test_waits_the_remainder_in_one_sleep() -> None:
    m = FakeMedium(52.25)
    assert labrun.wait_medium("lab1", 80.0, m.control, m.sleep) == 0.0
    assert m.sleeps == [pytest.approx(27.75)]  # not a busy loop: one sleep, two pings
    assert len(m.pings) == 2
    assert m.t >= 80.0


def test_returns_how_late_when_already_past() -> None:
    m = FakeMedium(93.5)
    assert labrun.wait_medium("lab1", 80.0, m.control, m.sleep) == pytest.approx(13.5)
    assert m.sleeps == []


def test_a_short_sleep_sleeps_again_and_is_not_late() -> None:
    m = FakeMedium(10.0, woken=0.5)  # each sleep wakes early: sleep the rest again
    assert labrun.wait_medium("lab1", 11.0, m.control, m.sleep) == 0.0
    assert m.sleeps[:2] == [pytest.approx(1.0), pytest.approx(0.5)]
    assert m.t >= 11.0 and len(m.sleeps) < 20


def test_sigterm_unwinds_a_run_through_its_finally():
    """An experiment killed with SIGTERM brings the run's lab down (its finally runs)."""
    import os
    import signal

    cleaned = []
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), labrun.term_as_interrupt():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            pytest.fail("SIGTERM did not interrupt")
        finally:
            cleaned.append(True)
    assert cleaned == [True]
    assert signal.getsignal(signal.SIGTERM) == before  # restored after the run
