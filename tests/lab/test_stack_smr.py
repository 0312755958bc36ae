"""SMR in the real lab: a TCP transfer moves to the backup rail when its primary breaks.

ladder-6 (configs/scenarios/ladder-6.yaml): n1 reaches n6 over n2-n3 or n4-n5, two
node-disjoint 3-hop routes. Real daemons (``--stack smr``, backup1), real TCP (iperf3).
Once n1 holds a primary and a backup to n6, the primary's first link is forced down
through the medium (the request ``manetkit lab link A B down`` sends, issued in-process
so its time is known to the millisecond). Asserted: n1's daemon reports a path-switch
to the backup within 1 s; n1's first TCP data frame over the backup's first hop
(tcpdump on n1's radio, decoded by tshark as DSR) leaves within 1 s of the cut; n1
sends no Route Request; iperf3 keeps moving bytes after the cut. (1 s, not the 0.2 s
of a break taken at the first failed frame: the false-failure veto, on by default,
breaks a link it still heard at the third failed frame in a row, each one the MAC's
whole retry chain: 0.23-0.35 s after the cut in three runs; docs/linkquality.md.)
"""

from __future__ import annotations

import json
import time

import pytest
from scapy.utils import rdpcap

from manetkit.daemonstatus import SmrRoute, SmrStatus
from manetkit.lab.medium.control import control
from tests.helpers import tshark
from tests.helpers.dsrframes import hop_list
from tests.helpers.lab import (
    SCENARIOS,
    EventLog,
    nsexec,
    nspopen,
    status,
    wait_for,
    wait_ping,
)

pytestmark = [pytest.mark.netns, pytest.mark.slow]

DST = "10.42.0.6"


def routes(lab: str) -> list[SmrRoute]:
    engine = status(lab, "n1").engine
    assert isinstance(engine, SmrStatus)
    return [r for r in engine.multipath if r.dst == DST]


def test_primary_cut_moves_tcp_to_backup(lab_factory, tmp_path, record_property) -> None:
    lab = lab_factory(SCENARIOS / "ladder-6.yaml", "--stack", "smr", prefix="smr")
    wait_ping(lab, "n1", DST, timeout=30)

    def two_routes() -> bool:
        nsexec(lab, "n1", "ping", "-c", "1", "-W", "1", DST, check=False)
        return len(routes(lab)) == 2

    wait_for(two_routes, 30, "n1 holding a primary and a backup to n6")
    primary, backup = (r.path for r in routes(lab))
    assert set(primary[1:-1]).isdisjoint(backup[1:-1]), (primary, backup)
    a, b = (f"n{p.rsplit('.', 1)[1]}" for p in primary[:2])

    nsexec(lab, "n6", "iperf3", "-s", "-1", "-D", "-B", DST)
    wait_for(lambda: ":5201" in nsexec(lab, "n6", "ss", "-ltn").stdout, 10, "iperf3 server")
    log = EventLog(lab, "n1")
    pcap = tmp_path / "n1-radio0.pcap"
    cap = nspopen(
        lab, "n1", "tcpdump", "-i", "radio0", "-U", "-n", "-w", str(pcap), "ether proto 0x88b5"
    )
    assert cap.stdout is not None
    wait_for(lambda: "listening" in cap.stdout.readline(), 10, "tcpdump on n1's radio0")
    client = nspopen(lab, "n1", "iperf3", "-c", DST, "-t", "8", "-i", "0.5", "-J")
    try:
        # the transfer in steady state before the cut: the experiment's design, no event
        time.sleep(3.0)
        requests_before = status(lab, "n1").engine.counters.get("requests-sent", 0)
        t_cut = time.time()
        control(lab, {"cmd": "link", "a": a, "b": b, "state": "down"})
        out, _ = client.communicate(timeout=30)
    finally:
        for p in (client, cap):
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=10)
        log.close()
    switches = [e for e in log.named("path-switch") if e["time"] >= t_cut and e["dst"] == DST]
    assert switches, f"no path-switch after the cut; events: {log.events[-10:]}"
    sw = switches[0]
    took = sw["time"] - t_cut
    assert sw["from_path"] == primary and sw["to_path"] == backup
    record_property("switch_s", round(took, 3))
    # n1's TCP data frames as tshark decodes them (DSR Source Route: first hop).
    frames = rdpcap(str(pcap))
    decoded = tshark.decode([bytes(f) for f in frames])
    data: list[tuple[float, str]] = []
    for f, layers in zip(frames, decoded, strict=True):
        if layers["ip"]["ip.proto"] != "48":
            # Only the link-sensing hellos (UDP broadcasts) travel outside DSR.
            assert layers["ip"]["ip.dst"] == "255.255.255.255" and "udp" in layers, layers
            continue
        tcp = layers.get("tcp", {})
        if layers["ip"]["ip.src"] == "10.42.0.1" and int(tcp.get("tcp.len", "0")) > 0:
            hops = hop_list(layers["dsr"]["Options"]["Source route"])
            data.append((float(f.time), hops[0]))
    before = [h for t, h in data if t < t_cut]
    after = [(t, h) for t, h in data if t >= t_cut and h == backup[1]]
    assert before and before[-1] == primary[1], "the transfer did not use the primary"
    assert after, "no data of n1 took the backup after the cut"
    moved = after[0][0] - t_cut
    record_property("backup_data_s", round(moved, 3))
    print(
        f"cut {a}-{b}: path-switch ({sw['reason']}) after {took * 1000:.0f} ms, "
        f"first data frame over {backup[1]} after {moved * 1000:.0f} ms"
    )
    assert took < 1.0
    assert moved < 1.0
    counters = status(lab, "n1").engine.counters
    assert counters.get("requests-sent", 0) == requests_before, "n1 asked for a route"
    assert counters["smr-discoveries-avoided"] >= 1
    report = json.loads(out)
    late = [i["sum"]["bytes"] for i in report["intervals"] if i["sum"]["start"] >= 4.0]
    assert sum(late) > 0, "no TCP bytes moved after the cut"
    assert [r.path for r in routes(lab)] == [backup]
