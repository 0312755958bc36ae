"""Attacks on the split-TCP proxy from a rogue node (tests/security/proxy_rogue.py).

Real namespaces (tests/proxy/netlab.py): client -- rogue -- server. The rogue is the
node between the two (it relays their traffic, as a node in radio range can become a
relay, and sees every frame), holds no key, and has an address inside the mesh prefix.
The client and the server run proxies in elfn mode and the server an HTTP server.
Each test asserts the safe outcome: the client's transfers complete with the right
SHA-256 in normal time, and the server proxy's counters show the refusals. Run under
the heavy lock (docs/security.md, "The proxy").
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.proxy.httpd import body
from tests.proxy.netlab import CLIENT_IP, SERVER_IP, Chain, proxied_chain, sh, wait_for

pytestmark = [pytest.mark.netns, pytest.mark.slow]

HTTP_PORT = 8080
PEER_PORT, APP_PORT = 4242, 4241
ROGUE_IP = "10.42.2.2"  # the rogue's address on the server's side: inside 10.42.0.0/16
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    with proxied_chain("pa", tmp_path_factory.mktemp("pachain"), HTTP_PORT) as c:
        yield c


def rogue_argv(c: Chain, *args: str) -> list[str]:
    return ["ip", "netns", "exec", c.router, sys.executable, "-m", "tests.security.proxy_rogue",
            *args]  # fmt: skip


def rogue(c: Chain, *args: str) -> dict:
    out = subprocess.run(rogue_argv(c, *args), capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def fetch(c: Chain, out: Path, size: int, rate: str | None = None) -> tuple[str, float, bool]:
    """curl from the client through both proxies: (HTTP code, seconds, body intact)."""
    limit = ["--limit-rate", rate] if rate else []
    t0 = time.monotonic()
    r = sh("curl", "-sS", "-m", "60", "-o", str(out), "-w", "%{http_code}", *limit,
           f"http://{SERVER_IP}:{HTTP_PORT}/{size}", ns=c.client, check=False)  # fmt: skip
    took = time.monotonic() - t0
    data = out.read_bytes() if out.exists() else b""
    intact = hashlib.sha256(data).digest() == hashlib.sha256(body(size)).digest()
    return r.stdout, took, intact


def established(c: Chain, port: int) -> int:
    """Connections the server's kernel has established on ``port`` (accepted or not)."""
    out = sh("ss", "-Htn", "state", "established", f"sport = :{port}", ns=c.server).stdout
    return len(out.splitlines())


def counters(c: Chain) -> dict[str, int]:
    return c.status(c.server)["counters"]


def test_silent_connections_do_not_stall_the_peer_listener(chain: Chain, tmp_path: Path) -> None:
    """12 connections to the server proxy's peer port that never speak: the client's page
    arrives in normal time (before: the listener read hellos one after the other, each
    silent connection cost the 10 s hello timeout and curl gave up), and beyond 8 per
    peer they are answered BUSY and closed at once."""
    c = chain
    before = counters(c)
    code, base, intact = fetch(c, tmp_path / "a", 200_000)
    assert code == "200" and intact
    idle = subprocess.Popen(
        rogue_argv(c, "idle", "--to", f"{SERVER_IP}:{PEER_PORT}", "--count", "12", "--hold", "6"),
        stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        wait_for(lambda: established(c, PEER_PORT) >= 8, 10, "the idle legs")
        code, took, intact = fetch(c, tmp_path / "b", 200_000)
        out, _ = idle.communicate(timeout=30)
    finally:
        if idle.poll() is None:
            idle.kill()
    assert code == "200" and intact, code
    assert took < base + 1.0, f"{took:.2f} s with idle legs, {base:.2f} s without"
    res = json.loads(out.strip().splitlines()[-1])
    # 8 wait, the rest are answered BUSY and closed
    assert res["connected"] == 12 and res["closed_by_peer"] >= 4 and res["busy"] >= 4, res
    assert counters(c)["hello_overflow"] - before["hello_overflow"] >= 4


def test_the_proxy_cannot_be_looped_into_itself(chain: Chain, tmp_path: Path) -> None:
    """Every way into a loop is shut: the intercept port is on loopback (the rogue cannot
    reach it), an OPEN may not name the acceptor's own ports, a local process dialling
    the proxy's own peer port is not a peer, and an app asking for a peer port through
    its own proxy is refused. The real page still arrives; no session was chained."""
    c = chain
    before = counters(c)
    assert rogue(c, "direct", "--to", f"{SERVER_IP}:{APP_PORT}")["connect"] == "refused"
    for port in (PEER_PORT, APP_PORT):
        got = rogue(c, "open", "--to", f"{SERVER_IP}:{PEER_PORT}", "--addr", SERVER_IP,
                    "--port", str(port))  # fmt: skip
        assert got["reply"] == "Reset" and "the proxy's own" in got["reason"], got
    local = sh(sys.executable, "-c", "import socket, sys; s = socket.create_connection("
               f"('{SERVER_IP}', {PEER_PORT}), timeout=3); s.settimeout(3); "
               "sys.stdout.write(repr(s.recv(10)))", ns=c.server, check=False)  # fmt: skip
    assert local.stdout == "b''" or "ConnectionResetError" in local.stderr, local
    r = sh("curl", "-sS", "-m", "10", "-o", "/dev/null", "-w", "%{http_code}",
           f"http://{SERVER_IP}:{PEER_PORT}/", ns=c.client, check=False)  # fmt: skip
    assert r.stdout == "000"  # reset: an app's connection to a proxy port is refused
    code, _, intact = fetch(c, tmp_path / "page", 300_000)
    assert code == "200" and intact
    after = counters(c)
    assert after["refused_destination"] - before["refused_destination"] == 3
    assert after["refused_peer"] - before["refused_peer"] == 1
    wait_for(lambda: not c.status(c.server)["sessions"], 10, "no session left at the server")
    assert not c.status(c.client)["sessions"]


def test_a_hijacking_resume_is_refused_and_the_transfer_completes(
    chain: Chain, tmp_path: Path
) -> None:
    """The rogue reads the session id off the client's OPEN and the client's last
    acknowledged offset off its ACKs, and sends RESUME(sid, 0xFFFFFFFF, that offset) from
    the client's address on a connection of its own. Without the session
    key it is refused ("unknown session", nothing replayed to it) and the client's 6 MB
    transfer completes intact (before: the server adopted the rogue's leg, replayed its
    bytes to it and refused the client's next RESUME as stale: the client was locked
    out)."""
    c = chain
    before = counters(c)
    hijacker = subprocess.Popen(
        rogue_argv(c, "hijack", "--iface", "a1", "--to", f"{SERVER_IP}:{PEER_PORT}",
                   "--as", CLIENT_IP),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        assert hijacker.stdout is not None
        assert json.loads(hijacker.stdout.readline()) == {"ready": True}
        size = 6 * 1024 * 1024
        code, took, intact = fetch(c, tmp_path / "big", size, "2M")
        out, err = hijacker.communicate(timeout=30)
    finally:
        if hijacker.poll() is None:
            hijacker.kill()
    assert hijacker.returncode == 0, err
    res = json.loads(out.strip().splitlines()[-1])
    print(f"hijack: {res}; client: HTTP {code}, intact {intact}, {took:.1f} s")
    assert res["reply"] == "Reset" and res["reason"] == "unknown session", res
    assert res["bytes_after"] == 0 and res["attempts"] == 1
    assert code == "200" and intact, (code, intact)
    after = counters(c)
    assert after["bad_proof"] - before["bad_proof"] == 1
    assert after["resets"] == before["resets"]
