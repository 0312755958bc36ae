"""``manetkit bench smr``: flow pairs, the retransmission parser, and (real namespaces)
that the retransmission ratio reads the TCP connection that crosses the mesh."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from manetkit import procs
from manetkit.bench import flap
from manetkit.bench.smr import (
    counters,
    endpoints,
    flows,
    mesh_leg_retrans,
    mesh_port,
    ss_retrans,
)
from manetkit.procs import wait_for
from manetkit.proxy.config import ProxyConfig

REPO = Path(__file__).resolve().parents[2]
PEER_PORT = ProxyConfig.model_fields["peer_port"].default

# Two mesh legs to one peer proxy (an old one being replaced, the live one).
SS = """State Recv-Q Send-Q Local Address:Port Peer Address:Port
FIN-WAIT-1 0   4000   10.42.0.3:40000   10.42.0.9:4242
\t cubic wscale:7,7 rto:1000 rtt:300/20 segs_out:100 segs_in:50 retrans:1/12
ESTAB 0      87600  10.42.0.3:40002   10.42.0.9:4242
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


def test_ss_sums_every_listed_socket() -> None:
    assert ss_retrans(SS) == (12 + 37, 100 + 800)
    assert ss_retrans("State Recv-Q\n") is None
    assert ss_retrans("\t cubic rtt:10/1 segs_out:5\n") == (0, 5)


def test_ss_counts_data_segments_when_listed() -> None:
    # The paper's ratio (Fig. 2): retransmissions / data transmissions. segs_out also
    # counts the pure ACKs the sender sends, so data_segs_out is used when ss lists it.
    line = (
        "\t bbr segs_out:1498 segs_in:1318 data_segs_out:1369 data_segs_in:799 "
        "retrans:1/75 dsack_dups:29\n"
    )
    assert ss_retrans(line) == (75, 1369)


def test_mesh_port_comes_from_the_sessions_to_that_peer() -> None:
    status = {
        "sessions": [
            {"peer": "10.42.0.7", "leg": {"local_port": 40000, "remote_port": 4000}, "resumes": 0},
            {"peer": "10.42.0.9", "leg": None, "resumes": 2},
            {"peer": "10.42.0.9", "leg": {"local_port": 40002, "remote_port": 4242}, "resumes": 1},
        ]
    }
    assert mesh_port(status, "10.42.0.9") == (4242, 3)
    assert mesh_port(status, "10.42.0.8") == (None, 0)
    assert mesh_port({"sessions": [{"peer": "10.42.0.9", "leg": None}]}, "10.42.0.9") == (None, 0)


def _in(ns: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", *args], cwd=REPO)


@pytest.mark.netns
def test_the_ratio_reads_the_proxys_mesh_leg_not_the_apps_connection(tmp_path: Path) -> None:
    """A bulk transfer through a real proxy pair (fixed-rto, as the bench) with 1 in 8 of
    the mesh leg's segments dropped at the router: the query finds the proxy's mesh leg
    to the peer proxy (the one its status socket names), with about 1 in 8 segments
    retransmitted. The application's own connection (what the bench read before:
    ``dport`` the app's port) ends at the local proxy and shows next to none."""
    from tests.proxy.netlab import CLIENT_IP, SERVER_IP, Chain, sh

    chain = Chain("smrss", tmp_path)
    started: list[subprocess.Popen[bytes]] = []
    try:
        chain.up()
        chain.start_proxy(chain.client, mode="fixed-rto")
        chain.start_proxy(chain.server, mode="fixed-rto")
        sh("nft", f"add rule inet mkt_break brk ip daddr {SERVER_IP} tcp dport {PEER_PORT} "
           "numgen random mod 8 == 0 drop", ns=chain.router)  # fmt: skip
        rx, tx = tmp_path / "recv.json", tmp_path / "send.json"
        started.append(_in(chain.server, "manetkit.bench.flap", "recv",
                           "--port", str(flap.PORT), "--out", str(rx)))  # fmt: skip
        wait_for(
            lambda: f":{flap.PORT}" in sh("ss", "-ltn", ns=chain.server).stdout, 10, "receiver"
        )
        started.append(_in(chain.client, "manetkit.bench.flap", "send", "--addr", SERVER_IP,
                           "--port", str(flap.PORT), "--out", str(tx)))  # fmt: skip

        def mesh() -> tuple[int, int] | None:
            # as the bench: the leg's port from the source proxy's status socket
            port, _ = mesh_port(chain.status(chain.client), SERVER_IP)
            got = mesh_leg_retrans(chain.client, SERVER_IP, port)[1] if port else None
            return got if got and got[1] >= 800 else None

        retrans, sent = wait_for(mesh, 60, "800 segments sent on the mesh leg")
        # 1 in 8 dropped: about 12 % retransmitted (binomial sd ~1 % at 800 segments)
        assert 0.04 < retrans / sent < 0.4, (retrans, sent)
        text, app = mesh_leg_retrans(chain.client, SERVER_IP, flap.PORT)
        assert app is not None, "the app's connection to the server's port is listed"
        # local: at most a spurious tail-loss probe or two, whatever the mesh does
        assert app[0] / app[1] < retrans / sent / 3, text
        # What was read is the proxy's one mesh leg, as its status socket names it.
        (session,) = chain.status(chain.client)["sessions"]
        leg = session["leg"]
        assert session["peer"] == SERVER_IP and leg["remote_port"] == PEER_PORT
        listed = mesh_leg_retrans(chain.client, SERVER_IP, PEER_PORT)[0]
        tuples = re.findall(r"^\S+\s+\d+\s+\d+\s+(\S+):(\d+)\s+(\S+):(\d+)", listed, re.M)
        assert tuples == [(CLIENT_IP, str(leg["local_port"]), SERVER_IP, str(PEER_PORT))]
    finally:
        procs.stop_all(started, grace=5)
        chain.down()


def test_counters_sum_and_endpoints_keep_each_flow_end() -> None:
    s0 = {1: {"counters": {"smr-switches": 1, "requests-sent": 2}}, 2: {"counters": {}}}
    s1 = {
        1: {
            "counters": {"smr-switches": 3, "requests-sent": 2, "mode": "x"},
            "multipath": [{"dst": "10.42.0.2", "role": "primary"}],
            "paths": [["10.42.0.1", "10.42.0.2"]],
        },
        2: {"counters": {"requests-sent": 1}},
        3: {"counters": {"requests-sent": 4}},
    }
    assert counters(s1) == {"smr-switches": 3, "requests-sent": 7}
    ends = endpoints([("tcp", 1, 2), ("cbr", 3, 4)], s0, s1)
    assert set(ends) == {"n1", "n2"}  # the CBR flow's ends are not TCP ends
    assert ends["n1"]["counters"] == {"smr-switches": 2}
    assert ends["n1"]["multipath"] == [{"dst": "10.42.0.2", "role": "primary"}]
    assert ends["n1"]["cached_paths"] == 1
    assert ends["n2"] == {"counters": {"requests-sent": 1}, "multipath": [], "cached_paths": 0}
