"""mac80211's FQ-CoDel as the realistic MAC's transmit queue (manetkit/lab/medium/fqcodel.py),
on a fake clock: the flow hash's inputs, CoDel's drop schedule (RFC 8289), the flow
scheduler (RFC 8290) and the MAC driving it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.l2 import ARP, Ether

from manetkit.lab.medium.fqcodel import CodelParams, DropTailQueue, FqCodelQueue, flow_key
from manetkit.lab.medium.mobility import Static, World
from manetkit.lab.medium.protocol import node_mac
from manetkit.lab.medium.realistic import RealisticMedium
from manetkit.lab.scenario import Radio
from tests.lab.test_medium_realistic import CALM

A, B = node_mac(1).hex(":"), node_mac(2).hex(":")  # the lab's n1 and n2


def tcp(sport: int, size: int = 1400) -> bytes:
    pkt = Ether(src=A, dst=B) / IP(src="10.42.0.1", dst="10.42.0.2") / TCP(sport=sport, dport=80)
    return bytes(pkt / bytes(max(0, size - len(pkt))))


def test_the_flow_hash_reads_addresses_protocol_and_ports_as_the_kernel_does():
    assert flow_key(tcp(4000)) != flow_key(tcp(4001))  # two TCP connections
    assert flow_key(tcp(4000, 100)) == flow_key(tcp(4000, 1400))  # one, any size
    udp = bytes(Ether(src=A, dst=B) / IP(src="10.42.0.1", dst="10.42.0.2") / UDP(sport=4000))
    assert flow_key(udp) != flow_key(tcp(4000))
    ping = Ether(src=A, dst=B) / IP(src="10.42.0.1", dst="10.42.0.2") / ICMP()
    assert flow_key(bytes(ping)) == flow_key(bytes(ping / b"payload"))
    # not IP: as far as the flow dissector reads, the ethertype
    arp = bytes(Ether(src=A, dst=B) / ARP())
    own = bytes.fromhex(B.replace(":", "") + A.replace(":", "")) + b"\x88\xb5" + bytes(60)
    assert flow_key(arp) == b"\x08\x06" and flow_key(own) == b"\x88\xb5"


def serve(q, t: float, service_s: float, until: float, arrivals_s: float, frame: bytes):
    """One sender pushing ``frame`` every ``arrivals_s`` into ``q``, a MAC taking one every
    ``service_s``: the sojourn (s) of each frame served and the time of each CoDel drop."""
    sojourns: list[float] = []
    drops: list[float] = []
    queued: list[float] = []  # arrival times still in the queue, oldest first
    next_in, next_out = t, t + service_s
    while min(next_in, next_out) < until:
        if next_in <= next_out:
            q.push(frame, next_in)
            queued.append(next_in)
            next_in += arrivals_s
            continue
        before = q.codel_drops
        f = q.head(next_out)
        for _ in range(q.codel_drops - before):
            queued.pop(0)
            drops.append(next_out)
        if f is not None:
            sojourns.append(next_out - queued.pop(0))
            q.pop()
        next_out += service_s
    return sojourns, drops


def test_codel_leaves_a_queue_below_target_alone():
    q = FqCodelQueue()
    sojourns, drops = serve(q, 0.0, 0.010, 5.0, 0.011, tcp(4000))
    assert drops == [] and max(sojourns) < 0.020


def test_codel_drops_after_an_interval_above_target_then_faster_by_the_control_law():
    """A standing queue (arrivals 2 ms apart, one frame served every 3 ms): no drop until
    the sojourn has stayed above 20 ms for 100 ms, then drops spaced interval/sqrt(count)."""
    p = CodelParams()
    q = FqCodelQueue(p)
    sojourns, drops = serve(q, 0.0, 0.003, 3.0, 0.002, tcp(4000))
    above = next(k for k, s in enumerate(sojourns) if s >= p.target_s)
    t_above = 0.003 * (above + 1)  # when the first frame above target was served
    assert drops[0] >= t_above + p.interval_s - 0.003
    gaps = [b - a for a, b in zip(drops, drops[1:], strict=False)]
    # the schedule tightens as 1/sqrt(count) (within one service time of rounding)
    assert gaps[0] == pytest.approx(p.interval_s, abs=0.004)
    assert gaps[1] == pytest.approx(p.interval_s / math.sqrt(2), abs=0.004)
    assert gaps[2] == pytest.approx(p.interval_s / math.sqrt(3), abs=0.004)
    # the same load in a drop-tail queue of 50 keeps a standing queue of 50 frames
    dt = DropTailQueue(50)
    tail, _ = serve(dt, 0.0, 0.003, 3.0, 0.002, tcp(4000))
    assert tail[-1] > 0.140 and dt.codel_drops == 0


def test_a_sparse_flow_is_served_ahead_of_a_bulk_backlog():
    """RFC 8290 section 4.1: a flow with no backlog (a ping, a TCP ACK) is a new flow and
    goes before the old ones; in a FIFO it waits behind the whole backlog."""
    q, fifo = FqCodelQueue(), DropTailQueue(100)
    for k in range(60):
        q.push(tcp(4000), k * 1e-4)
        fifo.push(tcp(4000), k * 1e-4)
    ping = tcp(5000, 100)
    q.push(ping, 0.01)
    fifo.push(ping, 0.01)
    assert q.head(0.02) != ping  # the bulk flow's frame was chosen when it was alone...
    q.pop()
    assert q.head(0.02) == ping  # ...then the new flow, before 59 bulk frames
    order = []
    while fifo:
        order.append(fifo.head(0.02))
        fifo.pop()
    assert order.index(ping) == 60


def test_over_the_limit_the_longest_flow_loses_its_head():
    q = FqCodelQueue(CodelParams(limit=10))
    for _ in range(8):
        q.push(tcp(4000), 0.0)
    q.push(tcp(5000, 200), 0.0)
    q.push(tcp(5000, 200), 0.0)
    assert len(q) == 10 and q.overlimit_drops == 0
    assert q.push(tcp(6000, 100), 0.0)  # taken; a frame of the 8-frame flow goes
    assert len(q) == 10 and q.overlimit_drops == 1


def test_the_mac_counts_codel_drops_as_modelled_and_keeps_its_current_frame():
    """A saturated 1 Mbit/s link (fixed rate) with FQ-CoDel: CoDel drops, counted as the
    model's own (fidelity does not count them against the run); drop-tail refuses at 50."""
    slow = CALM.with_(rate_mbps=1.0)

    def run(queue: str) -> RealisticMedium:
        m = RealisticMedium(World(Static([(0, 0), (20, 0)]), 2), slow, seed=1, queue=queue)
        t = 0.0
        while t < 5.0:  # a 1400-byte frame every 10 ms, ~1.25x what the 1 Mbit/s link sends
            m.transmit(t, 1, tcp(4000))
            t += 0.010
            while (nxt := m.get_timer()) is not None and nxt <= t:
                m.handle_timer(nxt)
                while m.next_event() is not None:
                    pass
        return m

    fq, dt = run("fq_codel"), run("droptail")
    assert fq.counters["codel_drops"] > 0 and "codel_drops" in fq.MODELLED_DROPS
    assert fq.counters["queue_drops"] == 0
    assert fq.queue_length(1) < 10  # CoDel keeps the standing queue near its target
    assert dt.counters["codel_drops"] == 0 and dt.counters["queue_drops"] > 0
    assert dt.queue_length(1) >= 45  # a FIFO stays full: ~0.6 s of standing queue
    # every frame in is delivered, dropped by the model, or still queued (the one the MAC
    # is sending included): CoDel loses nothing it does not count
    for m in (fq, dt):
        c = m.counters
        done = c["unicast_ok"] + c["unicast_failed"] + c["queue_drops"] + c["codel_drops"]
        assert c["frames_in"] == done + m.queue_length(1)


def test_fq_codel_is_a_realistic_profile_setting():
    assert Radio(profile="outdoor", queue="fq_codel").queue == "fq_codel"
    with pytest.raises(ValidationError, match="queue"):
        Radio(profile="ns2", queue="fq_codel")
    with pytest.raises(ValidationError, match="queue"):
        Radio(profile="outdoor", queue="red")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["push", "serve"]), st.integers(0, 3), st.floats(0, 0.05)),
        max_size=300,
    ),
    st.integers(2, 40),
)
def test_no_frame_is_lost_uncounted_duplicated_or_reordered_within_its_flow(ops, limit):
    """Any sequence of arrivals (four flows) and services on a clock that only moves on:
    every frame in is served once, dropped and counted, or still queued; each flow's
    frames leave in the order they came."""
    q = FqCodelQueue(CodelParams(limit=limit))
    t, seq, served = 0.0, 0, []
    for op, flow, dt in ops:
        t += dt
        if op == "push":
            q.push(tcp(4000 + flow, 100) + seq.to_bytes(4, "big"), t)
            seq += 1
        elif (f := q.head(t)) is not None:
            served.append(f)
            assert q.head(t) is f  # the MAC's current frame stays until it is done
            q.pop()
    assert seq == len(served) + q.codel_drops + q.overlimit_drops + len(q)
    ids = [int.from_bytes(f[-4:], "big") for f in served]
    assert len(set(ids)) == len(ids)
    for flow in range(4):
        mine = [
            i for f, i in zip(served, ids, strict=True) if flow_key(f) == flow_key(tcp(4000 + flow))
        ]
        assert mine == sorted(mine)
