"""The ``smr`` and ``retrans`` metric plug-ins and the reconnecting stream of
``configs/experiments/smr.yaml``: the retransmission parser, SMR's counters per flow end,
each SMR variant's daemon config, the reconnecting TCP sender and its receiver (loopback;
and in real namespaces through a fixed-RTO proxy pair whose partition timeout resets the
connection), and (real namespaces) that the retransmission ratio reads the TCP
connection that crosses the mesh."""

from __future__ import annotations

import json
import re
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from manetkit import procs
from manetkit.daemon.config import DaemonConfig, parse_config
from manetkit.daemonstatus import DaemonStatus
from manetkit.experiment import execute, spec
from manetkit.experiment.plugins.retrans import mesh_port, ss_retrans
from manetkit.experiment.plugins.smr import counters, endpoints
from manetkit.lab import stacks
from manetkit.lab.scenario import load_scenario
from manetkit.lab.tcpstat import connection_ss
from manetkit.procs import wait_for
from manetkit.proxy.config import ProxyConfig
from tests.helpers.statuses import make_status

REPO = Path(__file__).resolve().parents[2]
PEER_PORT = ProxyConfig.model_fields["peer_port"].default
STREAM_PORT = 5299


def mesh_leg_retrans(ns: str, peer: str, port: int) -> tuple[str, tuple[int, int] | None]:
    text = connection_ss(ns, peer, port)
    return text, ss_retrans(text)


# Two mesh legs to one peer proxy (an old one being replaced, the live one).
SS = """State Recv-Q Send-Q Local Address:Port Peer Address:Port
FIN-WAIT-1 0   4000   10.42.0.3:40000   10.42.0.9:4242
\t cubic wscale:7,7 rto:1000 rtt:300/20 segs_out:100 segs_in:50 retrans:1/12
ESTAB 0      87600  10.42.0.3:40002   10.42.0.9:4242
\t cubic rto:1200 rtt:350.2/20 segs_out:800 segs_in:400 retrans:1/37
"""


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
    """A bulk transfer through a real proxy pair (fixed-rto, as smr.yaml) with 1 in 8 of
    the mesh leg's segments dropped at the router: the query finds the proxy's mesh leg
    to the peer proxy (the one its status socket names), with about 1 in 8 segments
    retransmitted. The application's own connection (what was once read instead:
    ``dport`` the app's port) ends at the local proxy and shows next to none."""
    from tests.proxy.netlab import CLIENT_IP, SERVER_IP, Chain, sh

    chain = Chain("smrss", tmp_path)
    started: list[subprocess.Popen[bytes]] = []
    try:
        chain.up()
        # One segment per packet on the client's link: with TSO/GSO/GRO the router's
        # 1-in-8 drop takes whole super-packets of up to 40 segments, and the ratio
        # swings far from 1/8 (CI read 62/2032 once).
        for ns, dev in ((chain.client, "a0"), (chain.router, "a1")):
            sh("ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", ns=ns)
        chain.start_proxy(chain.client, mode="fixed-rto")
        chain.start_proxy(chain.server, mode="fixed-rto")
        sh("nft", f"add rule inet mkt_break brk ip daddr {SERVER_IP} tcp dport {PEER_PORT} "
           "numgen random mod 8 == 0 drop", ns=chain.router)  # fmt: skip
        rx, tx = tmp_path / "recv.json", tmp_path / "send.json"
        started.append(_in(chain.server, "manetkit.bench.stream", "recv",
                           "--port", str(STREAM_PORT), "--out", str(rx)))  # fmt: skip
        wait_for(
            lambda: f":{STREAM_PORT}" in sh("ss", "-ltn", ns=chain.server).stdout, 10, "receiver"
        )
        started.append(_in(chain.client, "manetkit.bench.stream", "send", "--addr", SERVER_IP,
                           "--port", str(STREAM_PORT), "--out", str(tx)))  # fmt: skip

        def mesh() -> tuple[int, int] | None:
            # as the plug-in: the leg's port from the source proxy's status socket
            port, _ = mesh_port(chain.status(chain.client), SERVER_IP)
            got = mesh_leg_retrans(chain.client, SERVER_IP, port)[1] if port else None
            return got if got and got[1] >= 800 else None

        retrans, sent = wait_for(mesh, 60, "800 segments sent on the mesh leg")
        # 1 in 8 dropped: about 12 % retransmitted (binomial sd ~1 % at 800 segments)
        assert 0.04 < retrans / sent < 0.4, (retrans, sent)
        text, app = mesh_leg_retrans(chain.client, SERVER_IP, STREAM_PORT)
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
    def st(counters: dict, **more: object) -> DaemonStatus:
        return make_status("smr", engine={"counters": counters, **more})

    primary = {"dst": "10.42.0.2", "role": "primary", "hops": 1, "age_s": 1.0,
               "path": ["10.42.0.1", "10.42.0.2"]}  # fmt: skip
    cached = {"dst": "10.42.0.2", "next_hop": "10.42.0.2", "hops": 1, "age_s": 1.0,
              "idle_s": 0.5, "path": ["10.42.0.1", "10.42.0.2"]}  # fmt: skip
    s0 = {"n1": st({"smr-switches": 1, "requests-sent": 2}), "n2": st({})}
    s1 = {
        "n1": st({"smr-switches": 3, "requests-sent": 2}, multipath=[primary], paths=[cached]),
        "n2": st({"requests-sent": 1}),
        "n3": st({"requests-sent": 4}),
    }
    assert counters(s1) == {"smr-switches": 3, "requests-sent": 7}
    ends = endpoints(["n1", "n2", "n1"], s0, s1)  # a node in two flows: once
    assert set(ends) == {"n1", "n2"}
    assert ends["n1"]["counters"] == {"smr-switches": 2}
    assert ends["n1"]["multipath"] == [primary]
    assert ends["n1"]["cached_paths"] == 1
    assert ends["n2"] == {"counters": {"requests-sent": 1}, "multipath": [], "cached_paths": 0}


def test_each_variant_of_the_smr_spec_gets_its_own_daemon_config() -> None:
    """What a lab node's daemon would run with, per stack of configs/experiments/smr.yaml:
    the run's lab up overrides, the scenario's protocol sections, merged and validated as
    `lab up` does."""
    sp = spec.load_spec(REPO / "configs" / "experiments" / "smr.yaml")

    def config(stack: str) -> DaemonConfig:
        run = spec.Run("rwp-50", stack, "fixed-rto", 30.0, 1, "1tcp", lab_stack=sp.lab_stack(stack))
        sc = load_scenario(sp.scenario_path("rwp-50"), execute.overrides_for(sp, run))
        extra = stacks.scenario_daemon_extra(sc)
        return parse_config(stacks.daemon_config("lab", "n1", sc.stack, extra))

    plain, ask = config("dsr"), config("dsr-rediscover")
    assert plain.protocol == ask.protocol == "dsr"
    assert plain.dsr.rediscover_on_break is False
    assert ask.dsr.rediscover_on_break is True
    assert (plain.dsr.target_replies, config("dsr-first").dsr.target_replies) == (
        "every",
        "first",
    )
    b1, b1c = config("backup1"), config("backup1-cache")
    assert b1.protocol == "smr" and b1.smr.mode == b1c.smr.mode == "backup1"
    assert (b1.smr.after_all_broken, b1c.smr.after_all_broken) == ("discover", "cache")
    assert (b1.smr.reply_wait_ms, config("backup1-wait300").smr.reply_wait_ms) == (100, 300)
    assert (config("concurrent").smr.mode, config("backup2").smr.mode) == ("concurrent", "backup2")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _role(
    role: str, *args: str, ns: str | None = None, stderr: Path | None = None
) -> subprocess.Popen[bytes]:
    more = ["--reconnect"] if role == "send" else ["--many"]
    argv = [sys.executable, "-m", "manetkit.bench.stream", role, *more, *args]
    err = open(stderr, "wb") if stderr else subprocess.DEVNULL  # noqa: SIM115
    try:
        return subprocess.Popen(
            (["ip", "netns", "exec", ns] if ns else []) + argv, cwd=REPO, stderr=err
        )
    finally:
        if stderr:
            err.close()


def _says(path: Path, *words: str) -> bool:
    text = path.read_text() if path.exists() else ""
    return any(w in text for w in words)


def test_the_sender_dials_again_after_a_refused_connect_and_a_reset(tmp_path: Path) -> None:
    """Loopback, no privileges: nobody listens (ECONNREFUSED), then a listener accepts
    and resets the connection (SO_LINGER 0: a real RST), then the stream's receiver
    listens: the sender dialled each time and its stream reached the receiver."""
    port = _free_port()
    tx, rx, err = tmp_path / "send.json", tmp_path / "recv.json", tmp_path / "send.err"
    started: list[subprocess.Popen[bytes]] = []
    try:
        started.append(_role("send", "--addr", "127.0.0.1", "--port", str(port),
                             "--out", str(tx), "--retry", "0.05", stderr=err))  # fmt: skip
        wait_for(lambda: _says(err, "ECONNREFUSED"), 10, "a refused connect")
        with socket.socket() as lsock:
            lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            lsock.bind(("127.0.0.1", port))
            lsock.listen(1)
            lsock.settimeout(10)
            conn, _ = lsock.accept()
            assert conn.recv(1000)  # the stream flows
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # RST
        wait_for(lambda: _says(err, "ECONNRESET", "EPIPE"), 10, "the reset seen by the sender")
        started.append(_role("recv", "--port", str(port), "--out", str(rx)))
        t_recv = time.monotonic()
        wait_for(
            lambda: f":{port}" in subprocess.run(
                ["ss", "-Htn", "state", "established", f"sport = :{port}"],
                capture_output=True, text=True, check=False).stdout,
            10, "the sender connected to the receiver",
        )  # fmt: skip
    finally:
        procs.stop_all(started, grace=5)
    sent, got = json.loads(tx.read_text()), json.loads(rx.read_text())
    assert sent["errors"].get("ECONNREFUSED", 0) >= 1, sent
    # (a second reset: the receiver may exit before the sender at the end)
    assert sent["errors"].get("ECONNRESET", 0) + sent["errors"].get("EPIPE", 0) >= 1, sent
    assert sent["connects"] == 2 and sent["attempts"] >= 3, sent
    assert got["connections"] == 1 and got["bytes"] > 0, {
        k: got[k] for k in ("bytes", "connections")
    }
    assert got["samples"][0][0] >= t_recv - 0.01  # monotonic, as stream.received_kbps reads


@pytest.mark.netns
def test_the_sender_comes_back_after_no_route_and_a_partition_reset(tmp_path: Path) -> None:
    """Real namespaces and a fixed-RTO proxy pair, as smr.yaml: the client has no route
    yet (connect: ENETUNREACH), then a route; the stream flows through the proxies; the
    router drops everything for longer than the proxies' partition timeout, so the
    client's proxy resets the application's connection (what killed three of fifteen
    flows per variant in the 5tcp run); the route comes back and the sender's new
    connection carries the stream to the receiver again."""
    from tests.proxy.netlab import SERVER_IP, Chain, sh

    chain = Chain("smrrc", tmp_path)
    port = 5400
    tx, rx, err = tmp_path / "send.json", tmp_path / "recv.json", tmp_path / "send.err"
    started: list[subprocess.Popen[bytes]] = []

    def receiving() -> dict[int, int]:
        """Established connections into the receiver (from the server's proxy): bytes
        the receiver has read, by remote port. The kernel's bytes_received counts bytes
        still queued too (and a connection not yet accepted), so the unread Recv-Q is
        taken off: a stop right after the wait must not race the receiver's read."""
        ss = sh("ss", "-Htin", "state", "established", f"sport = :{port}", ns=chain.server)
        read: dict[int, int] = {}
        conn = None  # each connection's line, then its info line (no bytes_received: 0)
        for line in ss.stdout.splitlines():
            if m := re.match(rf"(\d+)\s+\d+\s+\S+:{port}\s+\S+:(\d+)", line):
                conn = int(m.group(2))
                read[conn] = -int(m.group(1))
            elif conn is not None and (b := re.search(r"bytes_received:(\d+)", line)):
                read[conn] += int(b.group(1))
        return read

    try:
        chain.up()
        sh("ip", "route", "del", "default", ns=chain.client)
        timeouts = {"partition_timeout": 2, "keepalive": 0.5, "ack_delay": 0.5}
        chain.start_proxy(chain.client, mode="fixed-rto", **timeouts)
        chain.start_proxy(chain.server, mode="fixed-rto", **timeouts)
        started.append(_role("recv", "--port", str(port), "--out", str(rx), ns=chain.server))
        wait_for(lambda: f":{port}" in sh("ss", "-ltn", ns=chain.server).stdout, 10, "receiver")
        started.append(_role("send", "--addr", SERVER_IP, "--port", str(port), "--out",
                             str(tx), "--retry", "0.2", ns=chain.client, stderr=err))  # fmt: skip
        wait_for(lambda: _says(err, "ENETUNREACH"), 10, "a connect with no route")
        sh("ip", "route", "add", "default", "via", "10.42.1.2", ns=chain.client)
        before = wait_for(receiving, 20, "the stream through the proxies")
        chain.break_route()
        wait_for(lambda: _says(err, "ECONNRESET", "EPIPE"), 20, "the proxy's reset")
        t_back = time.monotonic()
        chain.restore_route()
        wait_for(
            lambda: any(n > 0 for p, n in receiving().items() if p not in before),
            20,
            "bytes on a new connection after the partition",
        )
    finally:
        procs.stop_all(started, grace=5)
        chain.down()
    sent, got = json.loads(tx.read_text()), json.loads(rx.read_text())
    assert sent["errors"].get("ENETUNREACH", 0) >= 1, sent
    assert sent["errors"].get("ECONNRESET", 0) + sent["errors"].get("EPIPE", 0) >= 1, sent
    assert sent["connects"] >= 2, sent
    assert got["connections"] >= 2, {k: got[k] for k in ("bytes", "connections", "errors")}
    # the receiver got bytes after the route came back (over the sender's new connection)
    assert any(t > t_back for t, _ in got["samples"]), got["samples"][-3:]
    assert not [n for n in sh("ip", "netns", "list").stdout.split() if chain.tag in n]
