"""HTTP sessions on loopback: the generated site served by Python's http.server, the
session client fetching pages and their objects, and pages failing when the server is gone."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from manetkit.experiment import web, webclient
from manetkit.procs import stop, wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def serving(site: Path, port: int) -> Iterator[None]:
    """Python's http.server on loopback ``port`` serving ``site``, until the block ends."""
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
         "--directory", str(site)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: listening(port), 10, "http.server")
        yield
    finally:
        stop(server)


def test_the_site_is_the_same_for_a_seed_and_pages_embed_objects(tmp_path: Path):
    a = web.build_site(tmp_path / "a", 10, seed=3)
    b = web.build_site(tmp_path / "b", 10, seed=3)
    assert a == b and a["objects"] > 0
    for f in (tmp_path / "a").iterdir():
        assert f.read_bytes() == (tmp_path / "b" / f.name).read_bytes()
        assert f.stat().st_size <= web.CAP + 200
    page = next(p for p in sorted((tmp_path / "a").glob("page*.html")) if "<img" in p.read_text())
    for src in webclient._SRC.findall(page.read_bytes()):
        assert (tmp_path / "a" / src.decode().lstrip("/")).is_file()


def test_a_session_completes_pages_and_fails_them_when_the_server_is_gone(tmp_path: Path):
    site, port = tmp_path / "site", free_port()
    info = web.build_site(site, 5, seed=1)
    out = tmp_path / "pages.json"
    with serving(site, port):
        webclient.main(["--url", f"http://127.0.0.1:{port}", "--duration", "2", "--think",
                        "0,0.1", "--pages", "5", "--out", str(out)])  # fmt: skip
    res = web.pair_result("n1", "n2", out)
    assert res["pages_completed"] >= 3 and res["pages_failed"] == 0
    assert 0 < res["service_s"]["mean"] < 2
    sizes = {p.name: p.stat().st_size for p in site.iterdir()}
    for p in res["pages"]:
        if p["ok"]:  # the page and every object it embeds, whole
            assert p["bytes"] >= sizes[f"page{p['page']}.html"]
    assert info["pages"] == 5
    # the server is gone: every page fails (refused), none is counted as done
    out2 = tmp_path / "refused.json"
    before = signal.getsignal(signal.SIGTERM)
    webclient.main(["--url", f"http://127.0.0.1:{port}", "--duration", "1", "--think", "0,0.2",
                    "--out", str(out2)])  # fmt: skip
    res2 = web.pair_result("n1", "n2", out2)
    assert res2["pages_completed"] == 0 and res2["pages_failed"] >= 1
    assert any("ConnectionRefused" in e for e in res2["errors"])
    assert json.loads(out2.read_text())["url"].endswith(str(port))
    # main() leaves the caller's SIGTERM handler as it was (a forked child of the
    # caller must not inherit the client's exit-on-TERM)
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize(
    ("xs", "mean", "median", "p90"),
    [([1.0], 1.0, 1.0, 1.0), ([3.0, 1.0, 2.0, 4.0], 2.5, 2.5, 4.0),
     ([float(i) for i in range(1, 11)], 5.5, 5.5, 9.0)],
)  # fmt: skip
def test_service_time_summary(xs, mean, median, p90):
    assert web.summary(xs) == {"mean": mean, "median": median, "p90": p90}
    assert web.summary([])["mean"] is None
