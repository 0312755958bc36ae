"""A page whose connect fails for lack of a route (ENETUNREACH / EHOSTUNREACH: a peer
daemon such as babeld before its first route) is tried again within the page's timeout
with ``--retry-no-route``, and the retries are counted; before, such a page failed in a
millisecond. A connection refused is not retried (the server is there: no route
problem). The connect failures are faked here; the netns test gets a real ENETUNREACH."""

from __future__ import annotations

import errno
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from manetkit.experiment import web, webclient
from tests.experiment.test_web import free_port, serving


@pytest.fixture
def server(tmp_path: Path) -> Iterator[int]:
    """http.server on loopback serving a 3-page site; its port."""
    site, port = tmp_path / "site", free_port()
    web.build_site(site, 3, seed=1)
    with serving(site, port):
        yield port


@pytest.fixture
def no_route_first(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The first ``n[0]`` connects fail with ENETUNREACH, as the kernel's with no route;
    short back-offs so the test takes tens of ms."""
    n = [0]
    real = socket.create_connection

    def create_connection(*args, **kwargs):
        if n[0] > 0:
            n[0] -= 1
            raise OSError(errno.ENETUNREACH, "Network is unreachable")
        return real(*args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setattr(webclient, "RETRY_FIRST_S", 0.01)
    monkeypatch.setattr(webclient, "RETRY_MAX_S", 0.02)
    return n


def test_a_page_with_no_route_yet_is_retried_and_completes(server: int, no_route_first):
    no_route_first[0] = 3
    rec = webclient.page("127.0.0.1", server, 0, 5.0, time.monotonic() + 10, True)
    assert rec["ok"] and rec["connect_retries"] == 3
    assert rec["service_s"] >= 0.01 + 0.02 + 0.02  # the back-off doubles up to its cap


def test_without_the_option_a_page_with_no_route_fails_at_once(server: int, no_route_first):
    no_route_first[0] = 1
    rec = webclient.page("127.0.0.1", server, 0, 5.0, time.monotonic() + 10)
    assert not rec["ok"] and not rec["cut"] and rec["connect_retries"] == 0
    assert "unreachable" in rec["error"]


def test_no_route_for_the_whole_timeout_fails_the_page_with_the_routing_error(
    server: int, no_route_first
):
    no_route_first[0] = 10**6
    t0 = time.monotonic()
    rec = webclient.page("127.0.0.1", server, 0, 0.2, t0 + 10, True)
    took = time.monotonic() - t0
    assert not rec["ok"] and not rec["cut"] and "unreachable" in rec["error"]
    assert 0.2 <= took < 1.0 and rec["connect_retries"] >= 3
    # the window ends first: the page is cut, not failed
    t0 = time.monotonic()
    rec = webclient.page("127.0.0.1", server, 0, 5.0, t0 + 0.1, True)
    assert not rec["ok"] and rec["cut"] and time.monotonic() - t0 < 1.0


def test_a_refused_connect_is_not_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(webclient, "RETRY_FIRST_S", 0.01)
    rec = webclient.page("127.0.0.1", free_port(), 0, 5.0, time.monotonic() + 10, True)
    assert not rec["ok"] and "ConnectionRefused" in rec["error"]
    assert rec["connect_retries"] == 0


def test_the_session_client_counts_retries_per_pair(tmp_path: Path, server: int, no_route_first):
    no_route_first[0] = 2
    out = tmp_path / "pages.json"
    # 3 s: the client starts up to 1 s late (not in step with others); the first page,
    # the one without a route, must not be cut by the window's end
    webclient.main(["--url", f"http://127.0.0.1:{server}", "--duration", "3", "--think",
                    "0,0.1", "--pages", "3", "--out", str(out), "--retry-no-route"])  # fmt: skip
    res = web.pair_result("n1", "n2", out)
    assert res["connect_retries"] == 2 and res["pages_failed"] == 0
    assert res["pages"][0]["connect_retries"] == 2
    # a client from before the option wrote no connect_retries: counted as 0
    old = tmp_path / "old.json"
    old.write_text('{"url": "x", "pages": [{"ok": true, "service_s": 1.0, "bytes": 5}]}')
    assert web.pair_result("n1", "n2", old)["connect_retries"] == 0


def test_the_lab_client_asks_for_the_retry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    seen: list[list[str]] = []

    class Popen:
        def __init__(self, argv, **kwargs):
            seen.append(argv)

    monkeypatch.setattr(web.subprocess, "Popen", Popen)
    web.start_client("lab", "n1", "n2", 8080, duration=5, think=(0, 1), timeout=3, pages=2,
                     seed=1, out=tmp_path / "o.json")  # fmt: skip
    assert "--retry-no-route" in seen[0]


# In a fresh network namespace (unshare -n: nothing named, gone with the process) only lo
# is up, so a connect to 10.99.0.1 fails with a real ENETUNREACH until the address is
# put on lo: once the page has failed twice for lack of a route (or given up).
DRIVER = """
import errno, json, socket, subprocess, sys, threading, time
from manetkit.experiment import webclient
from manetkit.procs import stop, wait_for
from tests.experiment.test_web import listening
port, site = int(sys.argv[1]), sys.argv[2]
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
srv = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--directory", site],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
unreachable = []
real = socket.create_connection
def connect(*args, **kwargs):
    try:
        return real(*args, **kwargs)
    except OSError as exc:
        if exc.errno == errno.ENETUNREACH:
            unreachable.append(time.monotonic())
        raise
socket.create_connection = connect
try:
    wait_for(lambda: listening(port), 10, "http.server")
    t0 = time.monotonic()
    recs = []
    th = threading.Thread(target=lambda: recs.append(
        webclient.page("10.99.0.1", port, 0, 5.0, t0 + 10, sys.argv[3] == "retry")))
    th.start()
    wait_for(lambda: len(unreachable) >= 2 or not th.is_alive(), 10, "two connects with no route")
    subprocess.run(["ip", "addr", "add", "10.99.0.1/32", "dev", "lo"], check=True)
    th.join()
    print(json.dumps({**recs[0], "unreachable": len(unreachable)}))
finally:
    stop(srv)
"""


@pytest.mark.netns
@pytest.mark.parametrize("mode", ["retry", "no-retry"])
def test_a_real_enetunreach_is_retried_until_the_route_appears(tmp_path: Path, mode: str):
    site = tmp_path / "site"
    web.build_site(site, 1, seed=1)
    proc = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", DRIVER, str(free_port()), str(site), mode],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[2],
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    if mode == "retry":
        # both failures retried, the second after RETRY_FIRST_S, the success after twice that
        first = webclient.RETRY_FIRST_S
        assert rec["ok"] and rec["connect_retries"] == rec["unreachable"] >= 2
        assert rec["service_s"] >= first + 2 * first
    else:  # the old behaviour: the page fails at once
        assert not rec["ok"] and "Network is unreachable" in rec["error"]
        assert rec["unreachable"] == 1 and rec["connect_retries"] == 0
