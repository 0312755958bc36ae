"""labrun's measurement window anchored to the medium's clock, with a fake medium."""

from __future__ import annotations

import argparse

import pytest

from manetkit.bench import labrun
from manetkit.errors import UserError


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


def _args(start: float = 80.0, warmup: float = 10.0, duration: float = 20.0):
    return argparse.Namespace(window_start=start, warmup=warmup, duration=duration)


def test_window_in_time_opens_at_window_start() -> None:
    m = FakeMedium(55.0)
    w = labrun.MediumWindow("lab1", "t", _args(), m.control, m.sleep)
    w.traffic()
    assert m.t == pytest.approx(70.0)
    w.open()
    assert m.t == pytest.approx(80.0)
    w.close()
    assert m.t == pytest.approx(100.0)
    rec = w.record()
    assert rec["lab_up_s"] == 55.0
    assert rec["window_medium"] == [80.0, 100.0]
    assert rec["window_late_s"] == 0.0 and rec["warmup_late_s"] == 0.0


def test_a_late_lab_is_recorded_and_warned_not_shifted_silently(capsys) -> None:
    m = FakeMedium(83.0)
    w = labrun.MediumWindow("lab1", "1tcp-s1-dsr", _args(), m.control, m.sleep)
    w.traffic()
    w.open()
    w.close()
    rec = w.record()
    assert rec["warmup_late_s"] == pytest.approx(13.0)
    assert rec["window_late_s"] == pytest.approx(3.0)
    assert rec["window_medium"] == [83.0, 103.0]  # the full duration, from when it opened
    assert m.t == pytest.approx(103.0)
    assert "1tcp-s1-dsr" in capsys.readouterr().err


def test_window_start_before_the_warmup_is_refused() -> None:
    with pytest.raises(UserError):
        labrun.check_window(_args(start=5.0, warmup=10.0))
    labrun.check_window(_args(start=10.0, warmup=10.0))


def test_bench_options() -> None:
    from manetkit.bench import atra, smr

    for mod in (smr, atra):
        p = argparse.ArgumentParser()
        mod.register(p)
        a = p.parse_args([])
        assert a.window_start - a.warmup >= 30.0  # room for the lab to come up
        assert p.parse_args(["--window-start", "90"]).window_start == 90.0


def test_sigterm_unwinds_a_run_through_its_finally():
    """bench smr/atra killed with SIGTERM bring the run's lab down (its finally runs)."""
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
