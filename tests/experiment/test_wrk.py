"""wrk's text report parsed (a real wrk 4.1 report, and one with errors); a wrk that
exits at its first connect for lack of a route is started again for the rest of the
window (faked, and a real ENETUNREACH in an unshare -n namespace)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from manetkit.experiment import web, wrk
from tests.experiment.test_web import free_port

REPORT = """Running 2s test @ http://127.0.0.1:18080/README.md
  1 threads and 2 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     7.12ms   13.97ms 107.90ms   90.35%
    Req/Sec   815.58    753.14     2.24k    73.68%
  Latency Distribution
     50%    1.06ms
     75%    6.93ms
     90%   20.07ms
     99%   79.77ms
  1567 requests in 2.00s, 3.72MB read
Requests/sec:    782.59
Transfer/sec:      1.86MB
"""


def test_a_report_gives_requests_rate_and_latency_in_seconds():
    got = wrk.parse(REPORT)
    assert got["requests"] == 1567 and got["errors"] == 0
    assert got["requests_per_s"] == 782.59
    assert got["latency_s"]["mean"] == pytest.approx(0.00712)
    assert got["latency_s"]["p50"] == pytest.approx(0.00106)
    assert got["latency_s"]["p90"] == pytest.approx(0.02007)
    assert got["latency_s"]["p99"] == pytest.approx(0.07977)


def test_socket_errors_and_bad_statuses_are_counted():
    text = REPORT.replace(
        "Requests/sec:",
        "  Socket errors: connect 1, read 2, write 0, timeout 4\n"
        "  Non-2xx or 3xx responses: 3\nRequests/sec:",
    )
    assert wrk.parse(text)["errors"] == 1 + 2 + 4 + 3
    assert wrk.parse("")["requests_per_s"] is None


def test_the_command_line():
    argv = wrk.argv("http://10.42.0.3:8080/page0.html", 4, 8, 9.6)
    assert argv[:2] == ["wrk", "--latency"]
    assert argv[argv.index("-t") + 1] == "4"  # never more threads than connections
    assert argv[argv.index("-d") + 1] == "10s"


NO_ROUTE = "unable to connect to 10.42.0.3:8080 Network is unreachable\n"


def fake_wrk(monkeypatch: pytest.MonkeyPatch, outcomes: list[tuple[int, str, str]]):
    """netns.run replaced: each call takes the next (exit, stdout, stderr); the argvs."""
    calls: list[list[str]] = []

    def run(ns, argv, *, check=True, timeout=None):
        calls.append(list(argv))
        code, out, err = outcomes[min(len(calls), len(outcomes)) - 1]
        return subprocess.CompletedProcess(argv, code, out, err)

    monkeypatch.setattr(wrk.netns, "run", run)
    monkeypatch.setattr(wrk, "RETRY_S", 0.01)
    return calls


def test_a_wrk_that_could_not_connect_is_started_again_for_the_rest_of_the_window(
    monkeypatch: pytest.MonkeyPatch,
):
    calls = fake_wrk(monkeypatch, [(1, "", NO_ROUTE), (1, "", NO_ROUTE), (0, REPORT, "")])
    got = wrk.run("mk-x-n1", "http://10.42.0.3:8080/page0.html", 2, 1, 4.0)
    assert len(calls) == 3 and got["attempts"] == 3 and got["exit"] == 0
    assert got["requests"] == 1567
    # the rate is over the whole window (the time without a route counts), wrk's kept
    assert got["requests_per_s"] == round(1567 / 4.0, 2) and got["wrk_requests_per_s"] == 782.59
    assert all(c[c.index("-d") + 1] == "4s" for c in calls)  # what was left, rounded


def test_a_wrk_that_connected_or_failed_otherwise_runs_once(monkeypatch: pytest.MonkeyPatch):
    calls = fake_wrk(monkeypatch, [(0, REPORT, "")])
    got = wrk.run("mk-x-n1", "http://10.42.0.3:8080/page0.html", 2, 1, 2.0)
    assert len(calls) == 1 and got["attempts"] == 1
    assert got["requests_per_s"] == 782.59 and "wrk_requests_per_s" not in got
    calls = fake_wrk(monkeypatch, [(1, "", "PANIC: unprotected error in call to Lua API\n")])
    assert wrk.run("mk-x-n1", "http://h/", 2, 1, 5.0)["attempts"] == 1


def test_no_new_wrk_when_less_than_a_second_would_be_left(monkeypatch: pytest.MonkeyPatch):
    calls = fake_wrk(monkeypatch, [(1, "", NO_ROUTE)])
    got = wrk.run("mk-x-n1", "http://h/", 2, 1, 0.9)
    assert len(calls) == 1 and got["attempts"] == 1 and got["exit"] == 1
    assert got["requests"] == 0 and got["requests_per_s"] is None


# In a fresh network namespace (unshare -n: nothing named, gone with the process) only lo
# is up: the real wrk's first connect to 10.99.0.1 fails with ENETUNREACH until the address
# is put on lo, 1.5 s into the window.
DRIVER = """
import json, subprocess, sys, threading, time
from manetkit.experiment import wrk
from manetkit.lab import netns
from manetkit.procs import stop, wait_for
from tests.experiment.test_web import listening
port, site = int(sys.argv[1]), sys.argv[2]
netns.exec_argv = lambda name, argv: list(argv)  # already inside the namespace
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
srv = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--directory", site],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    wait_for(lambda: listening(port), 10, "http.server")
    threading.Timer(1.5, subprocess.run, [["ip", "addr", "add", "10.99.0.1/32", "dev", "lo"]]).start()
    print(json.dumps(wrk.run("self", f"http://10.99.0.1:{port}/page0.html", 2, 1, 4.0)))
finally:
    stop(srv)
"""


@pytest.mark.netns
@pytest.mark.skipif(shutil.which("wrk") is None, reason="needs wrk (.ci/install installs it)")
def test_a_real_wrk_without_a_route_yet_is_started_again(tmp_path: Path):
    site = tmp_path / "site"
    web.build_site(site, 1, seed=1)
    proc = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", DRIVER, str(free_port()), str(site)],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[2],
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["attempts"] >= 2 and got["exit"] == 0 and got["requests"] > 0
    assert 0 < got["requests_per_s"] < got["wrk_requests_per_s"]
