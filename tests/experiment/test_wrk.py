"""wrk's text report parsed (a real wrk 4.1 report, and one with errors)."""

from __future__ import annotations

import pytest

from manetkit.experiment import wrk

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
