"""A page's timeout bounds the whole page, not each receive: a server (or a failing
route) that trickles the body in, a chunk well inside the socket timeout each time, must
fail the page at its timeout, or cut it at the window's end; before, such a page
finished long after both and counted as a completed page with a service time above the
timeout. The server here is a real one on loopback that sends a chunk every 50 ms."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from manetkit.experiment import webclient

CHUNKS, EVERY_S = 40, 0.05  # the body takes 2 s to arrive


@pytest.fixture
def trickle() -> Iterator[int]:
    """A loopback HTTP/1.0 server whose body arrives a byte-chunk every EVERY_S; its port."""
    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % (CHUNKS * 10))
                for _ in range(CHUNKS):
                    if stop.wait(EVERY_S):
                        return
                    try:
                        conn.sendall(b"x" * 10)
                    except OSError:
                        break  # the client gave up

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join(timeout=5)
    srv.close()


def test_a_trickling_page_fails_at_its_timeout(trickle: int) -> None:
    t0 = time.monotonic()
    rec = webclient.page("127.0.0.1", trickle, 0, timeout=0.5, window_end=t0 + 30)
    took = time.monotonic() - t0
    assert rec["ok"] is False and rec["cut"] is False, rec
    assert "timeout" in rec["error"] or "timed out" in rec["error"], rec
    assert took < 1.0, f"the page ran {took:.2f} s past a 0.5 s timeout"


def test_a_trickling_page_is_cut_at_the_windows_end(trickle: int) -> None:
    t0 = time.monotonic()
    rec = webclient.page("127.0.0.1", trickle, 0, timeout=30, window_end=t0 + 0.5)
    assert rec["ok"] is False and rec["cut"] is True, rec
    assert time.monotonic() - t0 < 1.0


def test_a_trickling_page_inside_its_timeout_completes(trickle: int) -> None:
    rec = webclient.page("127.0.0.1", trickle, 0, timeout=10, window_end=time.monotonic() + 30)
    assert rec["ok"] is True, rec
    assert rec["bytes"] == CHUNKS * 10
    assert CHUNKS * EVERY_S * 0.9 <= rec["service_s"] < 10
