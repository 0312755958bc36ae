"""The ``proxy`` metric plug-in: resets by reason, freezes and lost legs from the proxies'
logs over the window only, and the counters that moved (the log lines' format is checked
against real proxies in tests/proxy/test_proxy_netns.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from manetkit import paths
from manetkit.experiment.plugins import PLUGINS, RunContext
from manetkit.experiment.plugins import proxy as plugin
from manetkit.experiment.plugins.proxy import log_summary, reset_reason

BEFORE = """\
2026-11-27 16:18:16,045 manetkit.proxy WARNING session 0a0b0c0d to 10.42.0.2 (elfn) reset: partition timeout: no word from the peer for 30.0s (state resuming)
"""
WINDOW = """\
{t1} manetkit.proxy INFO session d584d19b frozen: route-failure from 10.42.0.7
{t2} manetkit.proxy INFO session d584d19b resumed (route-up)
{t2} manetkit.proxy INFO session d584d19b: mesh leg to 10.42.0.2 lost (None)
{t3} manetkit.proxy WARNING session d584d19b to 10.42.0.2 (elfn) reset: partition timeout: no word from the peer for 900.0s (idle stream, state resuming)
{t3} manetkit.proxy WARNING session 11111111 to 10.42.0.2 (elfn) reset: peer reset: application connection lost (closed)
{t3} manetkit.proxy WARNING session 22222222 to 10.42.0.2 (bus) reset: server 10.42.0.2:5201 unreachable: ConnectionRefusedError(111)
{late} manetkit.proxy WARNING session 33333333 to 10.42.0.2 (elfn) reset: application connection lost ([Errno 104] reset)
"""


def stamp(t: float) -> str:
    """logging's asctime (local time, milliseconds after a comma)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f",{int(t % 1 * 1000):03d}"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("partition timeout: no word from the peer for 3.0s (state flowing)", "partition timeout"),
        ("partition timeout: no word for 900.0s (idle stream, state resuming)",
         "partition timeout (idle stream)"),
        ("peer reset: partition timeout: no word for 30.0s (state resuming)",
         "peer reset: partition timeout"),
        ("application connection lost ([Errno 104] reset)", "application connection lost"),
        ("protocol error: DATA at 9 leaves a gap after 4", "protocol error"),
        ("server 10.42.0.2:80 unreachable: OSError()", "server unreachable"),
        ("", "unknown"),
    ],
)  # fmt: skip
def test_a_reset_is_counted_by_its_reason_without_particulars(text: str, reason: str) -> None:
    assert reset_reason(text) == reason


def test_the_window_counts_only_its_own_lines_and_the_counters_that_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MANETKIT_RUNDIR", str(tmp_path))
    lab = "t"
    paths.logs_dir(lab).mkdir(parents=True)
    log = paths.logs_dir(lab) / "proxy-n1.log"
    log.write_text(BEFORE)  # a reset before the window: not the run's
    counters = iter([{"done": 4, "resets": 1}, {}, {"done": 9, "resets": 4, "peer_busy": 0}, {}])
    monkeypatch.setattr(plugin, "_counters", lambda lab, node: next(counters))
    m = PLUGINS["proxy"]()
    ctx = RunContext(lab=lab, nodes=["n1", "n2"], stack="aodv", proxy="elfn", work=tmp_path)
    m.before(ctx)
    t0 = int(time.time()) + 1.5  # whole milliseconds in the stamps: an exact frozen_s
    with open(log, "a") as f:  # the window's lines, and one from the traffic's ending after it
        f.write(WINDOW.format(t1=stamp(t0 + 1), t2=stamp(t0 + 2), t3=stamp(t0 + 5),
                              late=stamp(t0 + 12)))  # fmt: skip
    m.closing(ctx)  # the counters, while the traffic runs
    ctx.window = (t0, t0 + 10)
    m.after(ctx)
    got = m.result(ctx, [])
    assert got["counters"] == {"done": 5, "resets": 3}
    assert (got["proxies"], got["answered"]) == (2, 1)  # n2's proxy did not answer
    assert got["log"] == {
        "frozen": 1,
        "resumed": 1,
        "legs_lost": 1,
        "frozen_s": 1.0,
        "resets": {
            "partition timeout (idle stream)": 1,
            "peer reset: application connection lost": 1,
            "server unreachable": 1,
        },
    }
    row = PLUGINS["proxy"].rows([{"params": {"scenario": "s", "traffic": "b", "stack": "aodv",
                                             "proxy": "elfn", "speed": 20}, "proxy": got}])  # fmt: skip
    assert row[0]["resets"] == 3 and row[0]["frozen"] == 1 and row[0]["done"] == 5


def test_freezes_are_checked_against_the_medium_graph() -> None:
    """n1's sessions to n3: the first freeze names a link the graph held all along while
    a path exists (a failure the medium did not decide); the second a link that is gone,
    during a partition that heals before the window ends without a resume; the third a
    link that came back a second before it, and the session is reset."""
    t0 = int(time.time()) + 0.5
    graph = [
        {"wall": t0, "edges": [["n1", "n2"], ["n2", "n3"]]},
        {"wall": t0 + 3, "edges": [["n1", "n2"]]},
        {"wall": t0 + 6, "edges": [["n1", "n3"]]},
    ]
    lines = [
        f"{stamp(t0 - 2)} manetkit.proxy INFO session aaaaaaaa to 10.42.0.3 frozen: "
        "route-down from 10.42.0.1",  # before the graph's first line
        f"{stamp(t0 + 1)} manetkit.proxy INFO session d584d19b to 10.42.0.3 frozen: "
        "route-down from 10.42.0.1, link 10.42.0.1-10.42.0.2",
        f"{stamp(t0 + 4)} manetkit.proxy INFO session d584d19b resumed (route-up)",
        f"{stamp(t0 + 5)} manetkit.proxy INFO session d584d19b to 10.42.0.3 frozen: "
        "route-down from 10.42.0.1, link 10.42.0.2-10.42.0.3",
        f"{stamp(t0 + 5.5)} manetkit.proxy INFO session 0b0b0b0b frozen: route-down from "
        "10.42.0.1",  # an older proxy's line: no peer
        f"{stamp(t0 + 7)} manetkit.proxy INFO session cccccccc to 10.42.0.3 frozen: "
        "route-down from 10.42.0.1, link 10.42.0.1-10.42.0.3",
        f"{stamp(t0 + 7.5)} manetkit.proxy WARNING session cccccccc to 10.42.0.3 (elfn) "
        "reset: partition timeout: no word from the peer for 30.0s (state frozen)",
        f"{stamp(t0 + 7.75)} manetkit.proxy INFO session aaaaaaaa done",
    ]
    spans = plugin.freeze_spans(lines)
    assert [(round(f.start - t0, 3), f.end and round(f.end - t0, 3), f.how) for f in spans] == [
        (-2, 7.75, "closed"), (1, 4, "resumed"), (5, None, "open"), (5.5, None, "open"),
        (7, 7.5, "reset"),
    ]  # fmt: skip
    assert spans[1].peer == "10.42.0.3" and spans[1].link == ("10.42.0.1", "10.42.0.2")
    assert plugin.against_graph({"n1": spans}, graph, t0 + 8) == {
        "with_path": 2,
        "without_path": 1,
        "link_in_graph": 1,
        "link_returned": 1,
        "link_gone": 1,
        "unchecked": 2,
        "frozen_s_checked": 6.5,
        "frozen_s_with_path": 4.5,
        "ended": {"open": 1, "reset": 1, "resumed": 1},
    }


def test_a_run_without_proxies_records_nothing(tmp_path: Path) -> None:
    m = PLUGINS["proxy"]()
    ctx = RunContext(lab="t", nodes=["n1"], stack="aodv", proxy="none", work=tmp_path)
    m.before(ctx)
    m.after(ctx)
    assert m.result(ctx, []) == {}
    assert log_summary([]) == {
        "frozen": 0, "resumed": 0, "legs_lost": 0, "frozen_s": 0.0, "resets": {}
    }  # fmt: skip


def test_a_spec_may_name_every_plug_in_and_no_other() -> None:
    from manetkit.experiment.spec import METRICS

    assert set(METRICS) == set(PLUGINS)
