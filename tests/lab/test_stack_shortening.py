"""DSR automatic route shortening (RFC 4728 8.4.4) in the real lab.

Chain n1 - n2 - n3 - n4, 200 m apart: n1's route to n4 is 1-2-3-4. Then n4 jumps to
(300, 120): 156 m from n2 and n3, 323 m from n1. The old route still works, but n4 now
overhears n2's frames to n3 (its DSR daemon made radio0 promiscuous; the radio asked
the medium for overheard frames), finds itself later in their source route than n3,
and sends n1 a gratuitous Route Reply for 1-2-4. The test watches n1's cached paths
through ``manetkit status --json`` while a ping flows.
"""

from __future__ import annotations

import json
import time

import pytest

from manetkit.daemonstatus import DaemonStatus, DsrStatus
from tests.helpers.lab import manetkit, nspopen, status, wait_for, wait_ping, write_scenario

pytestmark = [pytest.mark.netns, pytest.mark.slow]


def hops_to(lab: str, node: str, dst: str) -> int | None:
    """Shortest cached path of ``node`` to ``dst``, from the status CLI."""
    out = manetkit("status", "--lab", lab, "--node", node, "--json").stdout
    engine = DaemonStatus.from_wire(json.loads(out)).engine
    assert isinstance(engine, DsrStatus)
    return min((p.hops for p in engine.paths if p.dst == dst), default=None)


def test_dsr_route_shortens_when_the_destination_comes_closer(
    lab_factory, tmp_path, record_property
):
    scen = write_scenario(
        tmp_path / "chain4.yaml",
        4,
        {"n1": (0, 0), "n2": (200, 0), "n3": (400, 0), "n4": (600, 0)},
    )
    lab = lab_factory(scen, "--stack", "dsr", prefix="sh")
    wait_ping(lab, "n1", "10.42.0.4", timeout=20)
    assert hops_to(lab, "n1", "10.42.0.4") == 3
    before = status(lab, "n4")
    # n4 already overhears n3's unicasts to n2 (the replies), but nothing to shorten.
    assert before.engine.counters.get("grat-replies", 0) == 0

    ping = nspopen(lab, "n1", "ping", "-i", "0.2", "-w", "20", "10.42.0.4")
    try:
        t_move = time.monotonic()
        manetkit("lab", "move", "--name", lab, "n4", "300", "120")

        def shortened() -> bool:
            hops = hops_to(lab, "n1", "10.42.0.4")
            assert hops is not None, "n1 lost its route to n4"
            return hops == 2

        wait_for(shortened, 15, "n1's route to n4 to shorten to 2 hops", 0.2)
        took = time.monotonic() - t_move
    finally:
        ping.terminate()
        out, _ = ping.communicate(timeout=10)
    record_property("shortening_s", round(took, 2))
    print(f"n1's route to n4 shortened from 3 to 2 hops {took:.2f} s after the move")
    n4 = status(lab, "n4")
    assert n4.engine.counters["grat-replies"] >= 1
    overheard = n4.counters.dataplane["rx_overheard"]
    assert overheard > before.counters.dataplane["rx_overheard"]
    engine = status(lab, "n1").engine
    assert isinstance(engine, DsrStatus)
    path = next(p for p in engine.paths if p.dst == "10.42.0.4" and p.hops == 2)
    assert path.path == ["10.42.0.1", "10.42.0.2", "10.42.0.4"]
    assert " 0 received" not in out, out
