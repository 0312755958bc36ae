"""Routing daemons under mobility in the lab: route repair, and partition then heal."""

from __future__ import annotations

import re
import time

import pytest

from tests.helpers.lab import (
    nsexec,
    nspopen,
    status,
    wait_for,
    wait_ping,
    write_scenario,
)

pytestmark = [pytest.mark.netns, pytest.mark.slow]

PROTOCOLS = ["aodv", "dsr"]


def move(lab: str, node: str, x: float, y: float) -> None:
    from tests.helpers.lab import manetkit

    manetkit("lab", "move", "--name", lab, node, str(x), str(y))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_relay_walks_away_traffic_resumes(lab_factory, protocol, tmp_path, record_property):
    """A diamond n1 -> {n2 | n3} -> n4; the relay in use walks away, the other takes over."""
    scen = write_scenario(
        tmp_path / "diamond.yaml",
        4,
        {"n1": (0, 0), "n2": (200, 100), "n3": (200, -100), "n4": (400, 0)},
    )
    lab = lab_factory(scen, "--stack", protocol, prefix=f"r{protocol[0]}")
    wait_ping(lab, "n1", "10.42.0.4", timeout=30)
    before = {n: status(lab, n).counters.dataplane["tx_frames"] for n in ("n2", "n3")}
    nsexec(lab, "n1", "ping", "-c", "10", "-i", "0.1", "-W", "2", "10.42.0.4", check=False)
    used = max(
        ("n2", "n3"), key=lambda n: status(lab, n).counters.dataplane["tx_frames"] - before[n]
    )

    ping = nspopen(lab, "n1", "ping", "-D", "-i", "0.1", "-w", "16", "10.42.0.4")
    time.sleep(2.0)  # steady traffic before the move (a real-time experiment, not a protocol wait)
    t_move = time.time()
    move(lab, used, 200, 2000)
    out, _ = ping.communicate(timeout=30)
    stamps = [float(m) for m in re.findall(r"^\[(\d+\.\d+)\] \d+ bytes from", out, re.M)]
    assert stamps, out
    after = [t for t in stamps if t > t_move]
    assert after, f"traffic never resumed after {used} left:\n{out[-800:]}"
    # Repair time: the longest silence around the move (last reply before -> first after).
    last_before = max((t for t in stamps if t <= t_move), default=t_move)
    repair = after[0] - last_before
    record_property("repair_s", round(repair, 3))
    print(f"{protocol}: relay {used} walked away; traffic resumed after {repair:.2f} s")
    assert len(after) >= 20, "traffic did not keep flowing after the repair"
    assert repair < 12


RECEIVER = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.42.0.3", 9999))
print("ready", flush=True)
while True:
    data, _ = s.recvfrom(100)
    print(data.decode(), flush=True)
"""

SENDER = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[1])):
    s.sendto(f"pkt-{i}".encode(), ("10.42.0.3", 9999))
    time.sleep(0.2)
"""


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_partition_and_heal_delivers_buffered_packets(
    lab_factory, protocol, tmp_path, record_property
):
    """n1 -- n2 -- n3; n1 walks out of range, sends, comes back: the send buffer delivers."""
    scen = write_scenario(
        tmp_path / "chain3.yaml", 3, {"n1": (0, 0), "n2": (200, 0), "n3": (400, 0)}
    )
    lab = lab_factory(scen, "--stack", protocol, prefix=f"p{protocol[0]}")
    wait_ping(lab, "n1", "10.42.0.3", timeout=30)
    rx = nspopen(lab, "n3", "python3", "-u", "-c", RECEIVER)
    try:
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        move(lab, "n1", -2000, 0)
        # n1's link sensing declares n2 gone (its hysteresis), so n1 has no route now.
        wait_for(
            lambda: not status(lab, "n1").up_neighbours(),
            15,
            "n1 to lose its neighbour",
        )
        nsexec(lab, "n1", "python3", "-c", SENDER, "5")
        buffered = status(lab, "n1").send_buffer.packets
        t_heal = time.monotonic()
        move(lab, "n1", 0, 0)
        got = []
        while len(got) < 5 and time.monotonic() - t_heal < 25:
            line = rx.stdout.readline().strip()
            if line:
                got.append(line)
        record_property("heal_delivery_s", round(time.monotonic() - t_heal, 3))
        print(f"{protocol}: {buffered} packets buffered, delivered after heal: {got}")
        assert buffered == 5
        assert got == [f"pkt-{i}" for i in range(5)]
    finally:
        rx.kill()
        rx.wait(5)
