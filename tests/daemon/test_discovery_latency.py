"""Route discovery latency counters, on a fake clock: ``discoveries-completed``
and ``discovery-latency-ms`` (sum, from the first request to the route-up) in DSR
(RFC 4728 8.2.1) and AODV (RFC 3561 6.3). The experiment runner divides their
differences over a run's window (``manetkit.experiment.metrics.discovery_latency``)."""

from __future__ import annotations

from manetkit.daemon.wire import aodv, dsr, ipv4
from tests.daemon.aodvsim import addr, chain, control, data, network
from tests.daemon.dsrutil import A, chain_links, dsr_net, first, udp_packet


def test_dsr_counts_a_discovery_and_its_latency():
    sim = dsr_net(5, chain_links(5))
    sim.send(A(1), udp_packet(A(1), A(5)))
    sim.run()
    # The buffered packet leaves with its source route the moment the route is up.
    sent = [
        f.time
        for f in sim.frames_from(A(1))
        if ipv4.parse(f.packet).ttl == 64 and first(f.packet, dsr.SourceRoute)
    ]
    counters = sim.engines[A(1)].status()["counters"]
    assert counters["discoveries-completed"] == 1
    assert counters["discovery-latency-ms"] == round(sent[0] * 1000)
    assert sent[0] > 0.03  # after the propagating request (ring 0 had no answer)
    # A second packet finds the route cached: no discovery, no latency added.
    sim.send(A(1), udp_packet(A(1), A(5)))
    sim.run()
    counters = sim.engines[A(1)].status()["counters"]
    assert counters["discoveries-completed"] == 1
    assert counters["discovery-latency-ms"] == round(sent[0] * 1000)


def test_dsr_failed_discovery_is_not_counted_as_completed():
    sim = dsr_net(3, chain_links(3))
    sim.send(A(1), udp_packet(A(1), A(9)))
    sim.run(duration=60.0)
    counters = sim.engines[A(1)].status()["counters"]
    assert counters["requests-sent"] > 1  # it asked, and nobody answered
    assert counters.get("discoveries-completed", 0) == 0
    assert counters.get("discovery-latency-ms", 0) == 0


def test_aodv_counts_a_discovery_and_its_latency():
    nodes, links = chain(5)
    sim = network(nodes, links)
    n1, n5 = addr(1), addr(5)
    sim.send(n1, data(n1, n5, 0))
    sim.run(duration=3.0)
    rreqs = [f.time for f, m in control(sim, n1) if isinstance(m, aodv.RREQ)]
    ctl = {id(f) for f, _ in control(sim, n1)}
    sent = [f.time for f in sim.frames_from(n1) if id(f) not in ctl]
    counters = sim.engines[n1].status()["counters"]
    assert counters["discoveries-completed"] == 1
    # From the first RREQ (TTL 1) to the RREP that made the route valid: the third
    # ring's answer, when the buffered packet leaves.
    assert rreqs[0] == 0.0 and len(rreqs) == 3
    assert counters["discovery-latency-ms"] == round(sent[0] * 1000)
    assert sent[0] > rreqs[-1]
