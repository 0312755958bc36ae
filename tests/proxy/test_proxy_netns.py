"""The proxy pair over real namespaces, veth, nft and kernel TCP (tests/proxy/netlab.py).

client (curl, ftplib) -- router (route breaks: an nft drop rule) -- server (httpd, FTP).
A fake routing daemon feeds the proxies route-down/route-up (elfn) and erdn/ersn (bus).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from manetkit import events as ev
from manetkit.experiment.plugins.proxy import freeze_spans, log_summary
from tests.proxy.httpd import body
from tests.proxy.netlab import CLIENT_IP, SERVER_IP, Chain, sh, wait_for

pytestmark = [pytest.mark.netns, pytest.mark.slow]

HTTP_PORT = 8080
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    c = Chain("px", tmp_path_factory.mktemp("pxchain"))
    try:
        c.up()
        c.start_httpd(HTTP_PORT)
        yield c
    finally:
        c.down()


@pytest.fixture
def proxies(chain: Chain):  # type: ignore[no-untyped-def]
    """Start a proxy in the client and the server namespace with the given settings."""

    def start(**cfg: object) -> Chain:
        chain.start_proxy(chain.client, **cfg)
        chain.start_proxy(chain.server, **cfg)
        return chain

    yield start
    procs = [p for p in chain.procs if p.args and "proxy" in p.args]
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait(10)
        chain.procs.remove(p)
    chain.restore_route()


def received(out: Path) -> int:
    """Bytes of the body curl has written so far."""
    return out.stat().st_size if out.exists() else 0


def curl(chain: Chain, size: int, out: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            chain.client,
            "curl",
            "-sS",
            "-o",
            str(out),
            "-w",
            "%{http_code}",
            *extra,
            f"http://{SERVER_IP}:{HTTP_PORT}/{size}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def leg_ports(c: Chain, ns: str) -> tuple[int, int] | None:
    """(local, remote) port of the mesh leg of the one session in ``ns``'s proxy."""
    sessions = c.status(ns)["sessions"]
    leg = sessions[0]["leg"] if sessions else None
    return (leg["local_port"], leg["remote_port"]) if leg else None


def emit_break(c: Chain, mode: str) -> None:
    """What each side's daemon reports when the route breaks: ELFN's route-down (Holland
    & Vaidya section 4) or TCP-BuS's ERDN (Kim, Toh & Choi IV-B) for the session's flow."""
    for ns, me, peer, pivot in ((c.client, CLIENT_IP, SERVER_IP, "10.42.1.2"),
                                (c.server, SERVER_IP, CLIENT_IP, "10.42.2.2")):  # fmt: skip
        if mode == "elfn":
            c.daemons[ns].emit(ev.RouteDown(dst=peer, src=me, reason="link-broken"))
            continue
        ports = wait_for(lambda ns=ns: leg_ports(c, ns), 5, f"the session's leg in {ns}")
        c.daemons[ns].emit(ev.Erdn(dst=peer, src=me, sport=ports[0], dport=ports[1], seq=0,
                                   pivot=pivot))  # fmt: skip


def emit_repair(c: Chain, mode: str) -> None:
    for ns, me, peer, pivot in ((c.client, CLIENT_IP, SERVER_IP, "10.42.1.2"),
                                (c.server, SERVER_IP, CLIENT_IP, "10.42.2.2")):  # fmt: skip
        if mode == "elfn":
            c.daemons[ns].emit(ev.RouteUp(dst=peer, next_hop=pivot, hops=2))
            continue
        ports = leg_ports(c, ns) or (0, 0)
        c.daemons[ns].emit(ev.Ersn(dst=peer, src=me, sport=ports[0], dport=ports[1],
                                   last_ack=0, pivot=pivot))  # fmt: skip


@pytest.mark.parametrize("mode", ["plain", "fixed-rto", "elfn", "bus"])
def test_10mb_survives_a_5s_break(proxies, mode: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    c = proxies(mode=mode)
    size = 10 * 1024 * 1024
    out = tmp_path / "out"
    proc = curl(c, size, out, "--limit-rate", "5M")
    # mid-transfer (2 s at the limited rate)
    wait_for(lambda: received(out) > size // 4, 10, "a quarter of the body")
    c.break_route()
    if mode in ("elfn", "bus"):
        emit_break(c, mode)
    time.sleep(5)  # the 5 s break under test
    c.restore_route()
    if mode in ("elfn", "bus"):
        emit_repair(c, mode)
    code, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and code == "200", err
    assert sha(out.read_bytes()) == sha(body(size))
    if mode == "plain":
        assert c.status(c.client)["counters"]["accepted"] == 0  # not intercepted at all
    else:
        assert c.status(c.client)["counters"]["accepted"] >= 1
        try:
            wait_for(lambda: c.status(c.client)["counters"]["done"] >= 1, 5, "a clean close")
        except AssertionError:
            print(c.status(c.client), c.status(c.server), c.log(c.client), c.log(c.server))
            raise
    counters = c.status(c.server)["counters"]
    if mode in ("elfn", "bus"):
        assert counters["freezes"] >= 1 and counters["thaws"] >= 1, counters
        assert "frozen" in c.log(c.server) and "resumed" in c.log(c.server)
        # the proxy plug-in reads each freeze's peer and end from these real lines
        spans = freeze_spans(c.log(c.server).splitlines())
        assert spans and all(f.peer is not None for f in spans), spans
        assert any(f.end is not None and f.end >= f.start for f in spans), spans
    else:  # no event: nothing froze (fixed-rto rides the break on the kernel's retries)
        assert counters["freezes"] == 0 and counters["legs_replaced"] == 0, counters


def test_partition_beyond_timeout_resets_the_app(proxies, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    c = proxies(mode="elfn", partition_timeout=3, keepalive=1)
    out = tmp_path / "out"
    size = 60 * 1024 * 1024  # more than the kernel buffers hold: the server side owes data
    proc = curl(c, size, out, "--limit-rate", "2M")
    wait_for(lambda: out.exists() and out.stat().st_size > 0, 10, "the transfer to start")
    c.break_route()
    t0 = time.monotonic()
    try:
        code, err = proc.communicate(timeout=15)  # reset, not hung
    finally:
        c.restore_route()
    took = time.monotonic() - t0
    assert proc.returncode == 56 and "reset" in err.lower(), (proc.returncode, err)
    assert 2.5 < took < 8, took
    assert out.stat().st_size < size
    assert "partition timeout" in c.log(c.client) + c.log(c.server)
    # the experiment's proxy plug-in reads these lines: one side timed out, the other
    # was told so (its reason: the peer's reset)
    seen = log_summary((c.log(c.client) + c.log(c.server)).splitlines())["resets"]
    assert seen.get("partition timeout", 0) >= 1, seen


ECHO_SERVER = r"""
import socket
s = socket.create_server(("0.0.0.0", 7000))
while True:
    c, _ = s.accept()
    while d := c.recv(100):
        c.sendall(d)
"""

IDLE_CLIENT = r"""
import socket, sys
c = socket.create_connection((sys.argv[1], 7000), timeout=30)
c.sendall(b"a")
print(c.recv(10).decode(), flush=True)
sys.stdin.readline()  # idle until the test says: after the outage
try:
    c.sendall(b"b")
    print(c.recv(10).decode(), flush=True)
except OSError as e:
    print("error", e, flush=True)
"""


def test_an_idle_connection_rides_out_an_outage_longer_than_the_partition_timeout(
    proxies, chain: Chain
) -> None:  # type: ignore[no-untyped-def]
    """An idle app connection (an iperf3 control connection, a keep-alive HTTP one) sends
    nothing during an outage, so over plain TCP it carries on afterwards whatever the
    outage's length. Through the proxies it must too: its leg dies (TCP_USER_TIMEOUT),
    but the session waits ``idle_timeout``, not ``partition_timeout``, and resumes on a
    new leg (before, it was reset the moment its leg died)."""
    srv = subprocess.Popen(["ip", "netns", "exec", chain.server, sys.executable, "-c", ECHO_SERVER])
    cl = None
    try:
        wait_for(
            lambda: sh("ss", "-ltn", "sport = :7000", ns=chain.server).stdout.count("LISTEN"),
            10,
            "echo server",
        )
        c = proxies(mode="elfn", partition_timeout=3, keepalive=1)
        # the proxies' logs are appended to across the module: read only this test's part
        start = {ns: len(c.log(ns)) for ns in (c.client, c.server)}

        def logs() -> str:
            return "".join(c.log(ns)[start[ns] :] for ns in start)

        cl = subprocess.Popen(
            ["ip", "netns", "exec", c.client, sys.executable, "-c", IDLE_CLIENT, SERVER_IP],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert cl.stdout is not None and cl.stdin is not None
        assert cl.stdout.readline().strip() == "a"
        time.sleep(4)  # idle (keepalives only) for longer than the partition timeout
        c.break_route()
        time.sleep(6)  # the outage under test: twice the partition timeout
        c.restore_route()
        cl.stdin.write("\n")
        cl.stdin.flush()
        assert cl.stdout.readline().strip() == "b"
        assert "mesh leg to" in logs()  # its leg did die in the outage
        assert "partition timeout" not in logs()
        seen = log_summary(logs().splitlines())
        assert seen["legs_lost"] >= 1 and seen["resets"] == {}, seen
    finally:
        for p in (cl, srv):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def test_curl_sees_the_server_and_the_server_sees_the_client(proxies, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    c = proxies(mode="elfn", transparent_source=True)
    out = tmp_path / "out"
    proc = curl(c, 1000, out, "-D", str(tmp_path / "hdr"))
    code, err = proc.communicate(timeout=20)
    assert code == "200", err
    assert out.read_bytes() == body(1000)
    # the server saw the client's mesh address, not the proxy's
    assert f"X-Peer: {CLIENT_IP}" in (tmp_path / "hdr").read_text()
    # curl returns with the body; the server-side session ends when both its legs have
    # closed, which may come a moment later (CI saw done == 0 once when read at once).
    wait_for(lambda: c.status(c.server)["counters"]["done"] >= 1, 5, "the server session's close")


def test_200_concurrent_http_connections(proxies, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    c = proxies(mode="elfn")
    args = []
    for i in range(200):
        args += ["-o", str(tmp_path / f"o{i}"), f"http://{SERVER_IP}:{HTTP_PORT}/{20000 + i}"]
    res = sh(
        "curl",
        "-sS",
        "-Z",
        "--parallel-immediate",
        "--parallel-max",
        "200",
        *args,
        ns=c.client,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    for i in range(200):
        assert (tmp_path / f"o{i}").read_bytes() == body(20000 + i), i
    assert c.status(c.client)["counters"]["accepted"] >= 200


def test_sessions_beyond_the_peers_limit_wait_instead_of_being_reset(
    proxies, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """40 parallel downloads against a server proxy that takes 4 sessions from a peer:
    the rest are answered BUSY and dial again, so every download completes (before,
    each refused one was reset)."""
    c = proxies(mode="elfn", max_peer_sessions=4)
    args = []
    for i in range(40):
        args += ["-o", str(tmp_path / f"o{i}"), f"http://{SERVER_IP}:{HTTP_PORT}/{2_000_000 + i}"]
    res = sh(
        "curl", "-sS", "-Z", "--parallel-immediate", "--parallel-max", "40", *args,
        ns=c.client, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    for i in range(40):
        assert (tmp_path / f"o{i}").read_bytes() == body(2_000_000 + i), i
    busy = c.status(c.client)["counters"]["peer_busy"]
    refused = c.status(c.server)["counters"]["refused_limit"]
    assert busy > 0 and refused > 0, (busy, refused)


FTP_CLIENT = r"""
import ftplib, sys
ftp = ftplib.FTP()
ftp.connect(sys.argv[1], 2121, timeout=20)
ftp.login()
ftp.set_pasv(sys.argv[2] == "passive")
chunks = []
ftp.retrbinary("RETR data.bin", chunks.append)
ftp.quit()
sys.stdout.buffer.write(b"".join(chunks))
"""


@pytest.mark.parametrize("ftp_mode", ["passive", "active"])
def test_ftp_through_the_proxies(proxies, chain: Chain, ftp_mode: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "ftproot"
    root.mkdir()
    data = os.urandom(300_000)
    (root / "data.bin").write_bytes(data)
    ftpd = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            chain.server,
            sys.executable,
            "-m",
            "pyftpdlib",
            "-p",
            "2121",
            "-d",
            str(root),
            "-i",
            SERVER_IP,
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "ftpd.log", "wb"),  # noqa: SIM115
    )
    try:
        wait_for(
            lambda: sh("ss", "-ltn", "sport = :2121", ns=chain.server).stdout.count("LISTEN"),
            10,
            "ftpd",
        )
        c = proxies(mode="elfn")
        res = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                c.client,
                sys.executable,
                "-c",
                FTP_CLIENT,
                SERVER_IP,
                ftp_mode,
            ],
            capture_output=True,
            timeout=60,
        )
        assert res.returncode == 0, res.stderr.decode()
        assert sha(res.stdout) == sha(data)
        # control + data connection both went through the proxies (active: the server's
        # data connection was intercepted by the server's proxy)
        side = c.server if ftp_mode == "active" else c.client
        assert c.status(side)["counters"]["accepted"] >= 1
        assert c.status(c.client)["counters"]["accepted"] >= 1
    finally:
        ftpd.kill()
        ftpd.wait()


def test_sigkill_resets_apps_and_restart_removes_the_stale_table(proxies, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    c = proxies(mode="elfn")
    out = tmp_path / "out"
    proc = curl(c, 10 * 1024 * 1024, out, "--limit-rate", "1M")
    wait_for(lambda: received(out) > 512 * 1024, 10, "the transfer under way")
    victim = next(p for p in c.procs if p.args and c.client in p.args and "proxy" in p.args)
    # the python process inside `ip netns exec` (exec replaces it: same pid)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(5)
    c.procs.remove(victim)
    code, err = proc.communicate(timeout=10)  # reset at once, not hung
    assert proc.returncode == 56 and "reset" in err.lower(), (proc.returncode, err)
    tables = sh("nft", "list", "tables", ns=c.client).stdout
    assert "manetkit_proxy" in tables  # a crash leaves it ...
    c.start_proxy(c.client, mode="elfn")
    assert "stale nft table" in c.log(c.client)  # ... the next start replaces it
    assert sh("nft", "list", "tables", ns=c.client).stdout.count("manetkit") == 1
