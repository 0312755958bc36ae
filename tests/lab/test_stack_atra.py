"""Atra RFP in the real lab: the source leaves a relay that walks away before it breaks.

walkaway (configs/scenarios/walkaway.yaml): n1 sends to n4 over n2; n3 sits in range
of both. DSR may move the flow to n3 before the walk (a cached route of the same length,
salvaging after an 802.11 retry failure): the relay that walks away is the one n1's data
uses when the walk starts (its most recently used cached path), the other one stays. Real daemons (``--stack dsr``), real TCP (iperf3), the medium's two-ray powers
reaching the engines as link sensing's SignalSamples. Motion is driven through the
medium's control socket (``lab move``) so the test knows when each step happened; the
break time is the medium's ground truth (its graph log), not a guess.

With ``atra.rfp`` on, asserted: a ``predicted-failure`` and a ``path-switch``
(predicted-failure, to n3) on n1 before the ground truth drops n1-n2 or n2-n4; n1's TCP
data leaves over n3 before the break; no gap longer than 0.5 s in the data n4 receives.
Without Atra the source hears of the break only when it happens (a route-down); the
stall of that normal break is recorded (about 0.3 s here against 0.05 s with RFP).
"""

from __future__ import annotations

import time

import pytest
from scapy.layers.inet import IP, TCP
from scapy.utils import rdpcap

from manetkit import paths
from manetkit.lab.medium.control import control
from manetkit.lab.medium.groundtruth import read_log
from tests.helpers.lab import SCENARIOS, EventLog, nsexec, nspopen, status, wait_for, wait_ping

pytestmark = [pytest.mark.netns, pytest.mark.slow]

DST = "10.42.0.4"
SPEED = 20.0  # m/s: n2's links break 150 m north of the line, 7.5 s into the walk


def _break_wall(lab: str, relay: str, after: float) -> float | None:
    """Ground truth: when n1-relay or relay-n4 left the graph (unix time), after ``after``."""
    for line in read_log(paths.ground_truth_log(lab)):
        if line["wall"] < after:
            continue
        edges = {tuple(sorted(e)) for e in line["edges"]}
        if ("n1", relay) not in edges or (relay, "n4") not in edges:
            return line["wall"]
    return None


def _relay_in_use(lab: str) -> str:
    """The relay of n1's cached 2-hop path to n4 that its packets used last."""
    paths_ = [p for p in status(lab, "n1")["engine"]["paths"] if p["dst"] == DST and p["hops"] == 2]
    assert paths_, "n1 has no 2-hop path to n4"
    used = min(paths_, key=lambda p: p["idle_s"])
    return {"10.42.0.2": "n2", "10.42.0.3": "n3"}[used["next_hop"]]


def _walk(lab_factory, tmp_path, atra: bool):
    extra = ["--set", "atra.rfp=true"] if atra else []
    lab = lab_factory(SCENARIOS / "walkaway.yaml", "--stack", "dsr", *extra, prefix="atra")
    # Take both relays off the scripted timeline: n3 far away, n2 on the line.
    control(lab, {"cmd": "move", "node": "n3", "x": 200, "y": -300})
    control(lab, {"cmd": "move", "node": "n2", "x": 200, "y": 0})
    wait_ping(lab, "n1", DST, timeout=30)
    control(lab, {"cmd": "move", "node": "n3", "x": 200, "y": -60})
    nsexec(lab, "n4", "iperf3", "-s", "-1", "-D", "-B", DST)
    wait_for(lambda: ":5201" in nsexec(lab, "n4", "ss", "-ltn").stdout, 10, "iperf3 server")
    log = EventLog(lab, "n1")
    pcap = tmp_path / f"n4-{atra}.pcap"
    cap = nspopen(lab, "n4", "tcpdump", "-i", "mesh0", "-U", "-n", "-w", str(pcap), "tcp")
    assert cap.stdout is not None
    wait_for(lambda: "listening" in cap.stdout.readline(), 10, "tcpdump on n4's mesh0")
    client = nspopen(lab, "n1", "iperf3", "-c", DST, "-t", "16", "-l", "1000")
    try:
        time.sleep(3.0)  # a running transfer (real time, not a protocol timer)
        relay = _relay_in_use(lab)
        t_walk = time.time()
        # away from the line, on the side opposite the relay that stays (n2 y=0, n3 y=-60)
        y = 600 if relay == "n2" else -660
        control(lab, {"cmd": "move", "node": relay, "x": 200, "y": y, "speed": SPEED})
        client.communicate(timeout=60)
    finally:
        for p in (client, cap):
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=10)
        log.close()
    t_break = _break_wall(lab, relay, t_walk)
    assert t_break is not None, f"the ground truth never dropped {relay}'s links"
    arrivals = [
        float(f.time)
        for f in rdpcap(str(pcap))
        if IP in f and f[IP].src == "10.42.0.1" and TCP in f and len(f[TCP].payload) > 0
    ]
    window = [t for t in arrivals if t_walk - 1 <= t <= t_break + 6]
    gaps = [b - a for a, b in zip(window, window[1:], strict=False)]
    engine = status(lab, "n1")["engine"]
    stays = "10.42.0.3" if relay == "n2" else "10.42.0.2"
    return log, t_walk, t_break, max(gaps, default=99.0), window, engine, stays


def test_rfp_switches_before_the_break_without_a_stall(
    lab_factory, tmp_path, record_property
) -> None:
    log, t_walk, t_break, stall, window, engine, stays = _walk(lab_factory, tmp_path, atra=True)
    pf = [e for e in log.named("predicted-failure") if e["time"] >= t_walk]
    assert pf, f"n1 predicted nothing; events: {log.events[-10:]}"
    sw = [e for e in log.named("path-switch") if e["time"] >= t_walk and e["dst"] == DST]
    assert sw, f"no path-switch; events: {log.events[-10:]}"
    assert sw[0]["reason"] == "predicted-failure"
    assert sw[0]["to_path"] == ["10.42.0.1", stays, DST]
    lead = t_break - sw[0]["time"]
    record_property("switch_before_break_s", round(lead, 3))
    record_property("max_stall_s", round(stall, 3))
    print(f"rfp: switched {lead:.2f} s before the break; longest gap at n4 {stall:.3f} s")
    assert lead > 0, "switched only after the break"
    assert window and window[-1] > t_break + 3, "the transfer stopped after the walk"
    assert stall < 0.5
    assert engine["atra"]["predictions"] >= 1


def test_without_rfp_the_source_learns_of_the_break_when_it_happens(
    lab_factory, tmp_path, record_property
) -> None:
    """The baseline: DSR reacts to the break (a route-down at n1 once the ground truth
    dropped the link). In this 4-node lab a normal break costs only a few hundred ms
    (802.11 retries at 2 Mbit/s, then n3's route): recorded, not asserted."""
    log, t_walk, t_break, stall, _, engine, _ = _walk(lab_factory, tmp_path, atra=False)
    assert not log.named("predicted-failure")
    assert "atra" not in engine
    down = [e for e in log.named("route-down") if e["time"] >= t_walk and e["dst"] == DST]
    assert down, f"n1 saw no route-down; events: {log.events[-10:]}"
    # the ground truth is sampled every 100 ms: the break is no later than t_break
    assert down[0]["time"] >= t_break - 0.2, "a route-down before the link broke"
    record_property("max_stall_s", round(stall, 3))
    print(
        f"no rfp: route-down {down[0]['time'] - t_break:.2f} s after the break; "
        f"longest gap at n4 {stall:.3f} s"
    )
