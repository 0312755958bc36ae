"""A lab whose medium owns every node's radio0 (``lab up --radios shared``, the default):
the run's fidelity verdict holds for a quiet lab and falls for a starved medium, and a
deleted radio0 is made again. Real namespaces, a real medium, ping as the traffic."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from manetkit import paths
from manetkit.lab import fidelity, netns, nodes
from manetkit.lab.medium import protocol
from manetkit.macaddr import format_mac
from tests.helpers.lab import SCENARIOS, wait_for

pytestmark = pytest.mark.netns


def _addr(k: int) -> str:
    return f"10.45.0.{k}"


def _setup_ip(lab: str) -> None:
    for k, other in ((1, 2), (2, 1)):
        ns = paths.netns_name(lab, f"n{k}")
        mac = format_mac(protocol.node_mac(other))
        batch = [
            f"addr add {_addr(k)}/24 dev radio0",
            f"neigh replace {_addr(other)} lladdr {mac} dev radio0 nud permanent",
        ]
        netns.run(ns, ["ip", "-batch", "-"], input="\n".join(batch) + "\n")


def _ping(lab: str, count: int = 150, interval: float = 0.02) -> None:
    netns.run(
        paths.netns_name(lab, "n1"),
        ["ping", "-n", "-q", "-c", str(count), "-i", str(interval), "-W", "1", _addr(2)],
        check=False,
        timeout=60,
    )


@contextlib.contextmanager
def starved(pid: int, run_s: float = 0.01, stop_s: float = 0.04) -> Iterator[None]:
    """The process gets ``run_s`` of every ``run_s + stop_s`` seconds of wall clock (what
    a cgroup's ``cpu.max`` of 10000/50000 does to a busy process; SIGSTOP/SIGCONT works
    whatever its scheduling class and cgroup version)."""
    done = threading.Event()

    def cycle() -> None:
        while not done.is_set():
            # the sleeps are the starvation under test (a duty cycle), not a wait
            os.kill(pid, signal.SIGSTOP)
            time.sleep(stop_s)
            os.kill(pid, signal.SIGCONT)
            time.sleep(run_s)

    t = threading.Thread(target=cycle, daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()
        os.kill(pid, signal.SIGCONT)


def _medium_pid(lab: str) -> int:
    state = nodes.read_state(lab)
    return next(p.pid for p in state.processes if p.name == "medium")


def test_a_starved_medium_makes_the_window_invalid(lab_factory):
    lab = lab_factory(SCENARIOS / "chain-2.yaml")
    state = nodes.read_state(lab)
    assert state.radios == "shared" and [p.name for p in state.processes] == ["medium"]
    _setup_ip(lab)

    # A quiet lab keeps time. A shared CI host can stall the whole VM for a few tens of
    # ms (steal), and 3 late outputs of 300 are its p99, so a quiet window gets three
    # tries; the medium must keep time in one of them and read no loss in any.
    tries = []
    b = fidelity.collect(lab)
    for _ in range(3):
        a = b
        _ping(lab)
        b = fidelity.collect(lab)
        quiet = fidelity.window(a, b)
        # The radios' losses are part of the reading (none here).
        assert {"radio_tap_write_drops", "radio_tap_kernel_drops", "radio_event_drops"} <= set(
            b.unmodelled
        )
        assert quiet.outputs >= 2 * 150, quiet  # each echo and each reply delivered
        assert not any("drop" in r for r in quiet.reasons), quiet.reasons
        tries.append(quiet)
        if quiet.valid:
            break
    assert tries[-1].valid, [(t.reasons, t.steal_pct) for t in tries]

    with starved(_medium_pid(lab)):
        _ping(lab)
        c = fidelity.collect(lab, timeout=10)
    late = fidelity.window(b, c)
    assert not late.valid
    assert any("p99" in r for r in late.reasons), late.reasons
    assert late.lag_p99_ms > 5.0 and late.lag_max_ms >= 20.0


def test_a_deleted_radio0_is_made_again(lab_factory):
    lab = lab_factory(SCENARIOS / "chain-2.yaml")
    _setup_ip(lab)
    ns = paths.netns_name(lab, "n2")
    netns.run(ns, ["ip", "link", "del", "radio0"])
    log = paths.logs_dir(lab) / "medium.log"
    wait_for(lambda: "n2's radio0 is back" in log.read_text(), 10, "radio0 made again")
    assert log.read_text().count("n2's radio0 was removed") == 1
    link = netns.run(ns, ["ip", "-o", "link", "show", "radio0"]).stdout
    assert format_mac(protocol.node_mac(2)) in link and "UP" in link
    netns.run(ns, ["ip", "addr", "add", f"{_addr(2)}/24", "dev", "radio0"])
    p = netns.run(
        paths.netns_name(lab, "n1"),
        ["ping", "-n", "-q", "-c", "3", "-i", "0.2", "-W", "2", _addr(2)],
        check=False,
    )
    assert p.returncode == 0, p.stdout
    # Detached while it had no radio0: nothing was lost outside the model.
    assert sum(fidelity.collect(lab).unmodelled.values()) == 0
