"""The pure parts of ``manetkit bench smr``: flow pairs and the retransmission parser."""

from __future__ import annotations

from manetkit.bench.smr import flows, ss_retrans

SS = """State Recv-Q Send-Q Local Address:Port Peer Address:Port
ESTAB 0      0      10.42.0.3:40000   10.42.0.9:5400
\t cubic wscale:7,7 rto:204 rtt:0.05/0.02 segs_out:100 segs_in:50 retrans:0/0
ESTAB 0      87600  10.42.0.3:40000   10.42.0.9:5400
\t cubic rto:1200 rtt:350.2/20 segs_out:800 segs_in:400 retrans:1/37
"""


def test_flows_are_distinct_pairs_fixed_by_the_seed() -> None:
    f = flows(1, 5, 0)
    nodes = [n for _, s, d in f for n in (s, d)]
    assert len(nodes) == len(set(nodes)) == 10 and all(1 <= n <= 50 for n in nodes)
    assert f == flows(1, 5, 0) != flows(2, 5, 0)
    assert [k for k, _, _ in flows(3, 1, 4)] == ["tcp"] + ["cbr"] * 4
    # The TCP flow of 1tcp4cbr is the one of 1tcp with the same seed.
    assert flows(3, 1, 4)[0] == flows(3, 1, 0)[0]


def test_ss_takes_the_mesh_leg_of_a_proxied_connection() -> None:
    # The app's leg ends at the local proxy (RTT ~0); the proxy's leg crosses the mesh.
    assert ss_retrans(SS) == (37, 800)
    assert ss_retrans("State Recv-Q\n") is None
    assert ss_retrans("\t cubic rtt:10/1 segs_out:5\n") == (0, 5)
