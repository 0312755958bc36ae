"""The acceptor is no open relay (manetkit/proxy/guard.py), over real namespaces.

client -- router -- server (tests/proxy/netlab.py): while a real transfer runs through
the proxies, forged hellos reach the server's proxy: a RESUME of the live session from
another peer (the router's address), OPENs for loopback and for another host, and a
RESUME from the right peer without the session key. Each gets a RESET, is counted,
logged once, and the transfer completes intact.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.proxy.httpd import body
from tests.proxy.netlab import CLIENT_IP, SERVER_IP, Chain, proxied_chain, wait_for

pytestmark = [pytest.mark.netns, pytest.mark.slow]

HTTP_PORT = 8080
PEER_PORT = 4242
REPO = Path(__file__).resolve().parents[2]
ROUTER_IP = "10.42.2.2"  # the router's address on the server's side: "another peer"

# Runs in a namespace: connect to the server's proxy from a chosen source address (with
# the proxies' own mark, so a proxy in that namespace does not intercept it), send one
# hello, print the first frame of the reply (or EOF).
FORGE = """
import socket, sys
from ipaddress import ip_address
from manetkit.proxy import frames as fr
src, kind, sid, epoch, a, b = sys.argv[1:7]
sid = bytes.fromhex(sid)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, 0x4D4B)  # past the client's interception
s.settimeout(5)
s.bind((src, 0))
s.connect((SERVER, PORT))
if kind == "open":
    s.sendall(fr.pack_open(sid, int(epoch), ip_address(a), int(b), "elfn", 0, bytes(range(1, 33))))
else:
    s.sendall(fr.pack_resume(sid, int(epoch), int(a), False))
r = fr.FrameReader()
while (f := r.next_frame()) is None:
    chunk = s.recv(4096)
    if not chunk:
        print("EOF"); sys.exit()
    r.feed(chunk)
print(type(f).__name__, getattr(f, "reason", ""))
""".replace("SERVER", repr(SERVER_IP)).replace("PORT", str(PEER_PORT))


def forge(c: Chain, ns: str, src: str, *args: object) -> str:
    out = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", FORGE, src, *map(str, args)],
        capture_output=True, text=True, timeout=20, cwd=REPO,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    with proxied_chain("pg", tmp_path_factory.mktemp("pgchain"), HTTP_PORT) as c:
        yield c


def test_forged_hellos_are_refused_and_the_real_transfer_passes(
    chain: Chain, tmp_path: Path
) -> None:
    c = chain
    size = 6 * 1024 * 1024
    out = tmp_path / "out"
    proc = subprocess.Popen(
        ["ip", "netns", "exec", c.client, "curl", "-sS", "-o", str(out), "-w", "%{http_code}",
         "--limit-rate", "2M", f"http://{SERVER_IP}:{HTTP_PORT}/{size}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: c.status(c.server)["sessions"], 10, "the session at the server")
        sid = c.status(c.client)["sessions"][0]["session"]
        assert len(bytes.fromhex(sid)) == 16  # 128-bit ids
        # 1. another peer (the router) tries to take the live session over
        assert forge(c, c.router, ROUTER_IP, "resume", sid, 7, 0, 0) == "Reset unknown session"
        # 2. OPENs for the acceptor's loopback and for another host: the acceptor is the
        # destination itself, never a relay
        fresh = os.urandom(16).hex()
        got = forge(c, c.router, ROUTER_IP, "open", fresh, 0, "127.0.0.1", HTTP_PORT)
        assert got.startswith("Reset") and "is not this node" in got, got
        got = forge(c, c.router, ROUTER_IP, "open", fresh, 0, "192.0.2.1", 80)
        assert got.startswith("Reset") and "is not this node" in got, got
        # 3. the right peer's address, but no session key (an attacker copying the session
        # id off the air): refused, the live leg untouched
        got = forge(c, c.client, CLIENT_IP, "resume", sid, 1, 1 << 40, 0)
        assert got == "Reset unknown session", got
        # ... and each again: counted every time, logged once
        for _ in range(3):
            forge(c, c.router, ROUTER_IP, "resume", sid, 8, 0, 0)
        code, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and code == "200", err
    data = out.read_bytes()
    assert hashlib.sha256(data).digest() == hashlib.sha256(body(size)).digest()
    counters = c.status(c.server)["counters"]
    assert counters["resume_wrong_peer"] == 4
    assert counters["refused_destination"] == 2
    assert counters["bad_proof"] == 1
    assert counters["resets"] == 0 and counters["protocol_errors"] == 0
    log = c.log(c.server)
    assert log.count("refused resume_wrong_peer") == 1
    assert log.count("refused refused_destination") == 1  # same peer: once
