"""The warm-up's convergence wait against a fake medium: its clock advances only when the
wait sleeps, and routes appear at set medium times."""

from __future__ import annotations

import pytest

from manetkit.experiment import convergence as C


class FakeMedium:
    """A medium clock and a routing state: ``routes[(src, dst)]`` is the medium time
    from which the source has a route (reactive ones only once asked, ``after_ask``)."""

    def __init__(self, t: float, routes: dict, after_ask: float | None = None) -> None:
        self.t = t
        self.routes = routes
        self.after_ask = after_ask
        self.asked: list[tuple[float, str, str]] = []
        self.polls = 0

    def time(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        assert s > 0
        self.t += s

    def has_route(self, src: str, dst: str) -> bool:
        self.polls += 1
        at = self.routes.get((src, dst))
        if self.after_ask is not None:
            asks = [t for t, a, b in self.asked if (a, b) == (src, dst)]
            at = asks[0] + self.after_ask if asks else None
        return at is not None and self.t >= at

    def ask(self, src: str, dst: str) -> None:
        self.asked.append((self.t, src, dst))


def test_a_proactive_stack_converges_when_its_last_pair_has_a_route():
    m = FakeMedium(4.0, {("n1", "n3"): 9.2, ("n5", "n2"): 17.6})
    got = C.wait_converged([("n1", "n3"), ("n5", "n2")], m.has_route, m.time, 60.0, sleep=m.sleep)
    assert got.converged and not got.cap_hit
    assert got.pairs == {"n1-n3": 9.5, "n5-n2": 18.0}  # seen at the first poll after
    assert got.t_s == 18.0 and got.started_s == 4.0 and got.asked == 0
    assert m.t == 18.0  # it stopped waiting at once


def test_the_cap_ends_the_wait_and_says_which_pair_had_no_route():
    m = FakeMedium(4.0, {("n1", "n3"): 9.2})  # n5 -> n2: partitioned all along
    got = C.wait_converged([("n1", "n3"), ("n5", "n2")], m.has_route, m.time, 30.0, sleep=m.sleep)
    assert not got.converged and got.cap_hit and got.t_s is None
    assert got.pairs == {"n1-n3": 9.5, "n5-n2": None}
    assert m.t == pytest.approx(30.0)  # not a poll beyond the cap
    assert got.to_json()["cap_hit"] is True


def test_a_reactive_stack_is_asked_once_then_again_while_it_has_no_route():
    m = FakeMedium(10.0, {}, after_ask=12.0)  # a discovery takes 12 s here
    got = C.wait_converged([("n1", "n4")], m.has_route, m.time, 60.0, sleep=m.sleep, ask=m.ask,
                           ask_every_s=5.0)  # fmt: skip
    assert got.converged and got.pairs == {"n1-n4": 22.0}
    # asked at the start, then every 5 s until the route came (the daemon rate-limits)
    assert [t for t, _, _ in m.asked] == [10.0, 15.0, 20.0]
    assert got.asked == 3


def test_pairs_are_waited_for_once_each_and_an_already_converged_lab_does_not_sleep():
    m = FakeMedium(5.0, {("n1", "n2"): 0.0})
    got = C.wait_converged([("n1", "n2"), ("n1", "n2")], m.has_route, m.time, 60.0, sleep=m.sleep)
    assert got.pairs == {"n1-n2": 5.0} and m.t == 5.0 and m.polls == 1


def test_a_lab_already_past_the_cap_is_looked_at_once():
    m = FakeMedium(70.0, {})
    got = C.wait_converged([("n1", "n2")], m.has_route, m.time, 60.0, sleep=m.sleep)
    assert got.cap_hit and m.t == 70.0 and m.polls == 1
