"""``manetkit experiment report DIR`` from fixture run JSONs: tables and PNGs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from manetkit.errors import UserError
from manetkit.experiment import report
from tests.experiment import rundocs
from tests.helpers.lab import manetkit

PNG = b"\x89PNG\r\n\x1a\n"


def bulk_run(stack: str, speed: float, seed: int, kbps: float, expected: float) -> dict:
    return rundocs.bulk_run(stack, speed, seed, kbps, expected, control={"per_delivered": 0.25})


def http_run(stack: str, times: list[float], failed: int) -> dict:
    pages = [{"ok": True, "service_s": t, "bytes": 1000} for t in times]
    pages += [{"ok": False, "error": "TimeoutError: timed out", "bytes": 0}] * failed
    return {
        "status": "ok",
        "run": f"rwp-30_{stack}_none_v10_s1_http",
        "params": {"scenario": "rwp-30", "stack": stack, "proxy": "none", "speed": 10.0,
                   "seed": 1, "traffic": "http"},
        "http": {"pairs": [{"client": "n3", "server": "n4", "pages": pages}],
                 "pages_completed": len(times), "pages_failed": failed},
        "control": None,
    }  # fmt: skip


@pytest.fixture
def results(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    runs.mkdir()
    docs = [
        bulk_run("dsr", 1, 1, 600.0, 800.0),
        bulk_run("dsr", 1, 2, 400.0, 800.0),  # mean over seeds: 500
        bulk_run("dsr", 20, 1, 150.0, 600.0),
        bulk_run("aodv", 1, 1, 700.0, 800.0),
        {
            **bulk_run("aodv", 20, 1, 321.5, 600.0),
            "late_s": 2.5,
            "code": {"commit": "0123456789abcdef" * 2 + "01234567", "dirty": []},
        },
        http_run("dsr", [1.0, 2.0, 6.0], 1),
        http_run("aodv", [0.5, 0.75], 0),
        # a run whose medium fell behind real time: in no table, listed with why
        rundocs.bulk_run("dsr", 1, 3, 5.0, 800.0, valid=False),
    ]
    for d in docs:
        (runs / f"{d['run']}.json").write_text(json.dumps(d))
    (runs / "rwp-30_smr_none_v1_s1_bulk1.error.json").write_text('{"status": "failed"}')
    (runs / "broken.json").write_text("{")  # half written: ignored
    (tmp_path / "spec.yaml").write_text("name: t\n")
    return tmp_path


def test_the_report_has_the_tables_numbers_and_the_plots(results: Path):
    proc = manetkit("experiment", "report", str(results))
    dest = results / "report"
    for png in ("goodput-rwp-30-bulk1.png", "expected-rwp-30-bulk1.png", "http-rwp-30-http.png"):
        assert (dest / png).read_bytes().startswith(PNG), png
    md = (dest / "README.md").read_text()
    # bulk: seeds, runs, the runs' mean and median, expected, the ratio's mean, control
    assert "| rwp-30 | bulk1 | dsr | 1 | 1,2 | 2 | 1 | 500.0 | 500.0 | 800.0 | 0.62 | 2.0 |" in md
    assert "| rwp-30 | bulk1 | aodv | 20 | 1 | 1 | 1 | 321.5 | 321.5 | 600.0 | 0.54 |" in md
    # http: pages done / failed, mean and median service time over every page, the share
    # completed, and no failed-at-timeout mean where the run records no page timeout
    assert "| rwp-30 | http | dsr | 10 | 1 | 1 | 3 | 1 | 3.00 | 2.00 | 75 | - | - |" in md
    assert "| rwp-30 | http | aodv | 10 | 1 | 1 | 2 | 0 | 0.62 | 0.75 | 100 | 0.62 | - |" in md
    # the invalid run: out of the tables (seed 3 is nowhere), listed with its lag
    assert "0 valid, 1 invalid, 7 without a fidelity record" in md
    assert "| rwp-30_dsr_none_v1_s3_bulk1 | 40 | 120 | 1.2 | 18 | medium scheduling lag p99" in md
    assert "(host steal), median: valid runs - %, invalid runs 18 %" in md  # why it was late
    assert "| 1 | 3 | n1->n2" not in md
    # per seed, stacks side by side (a stack without that seed: -)
    assert "| rwp-30 | bulk1 | 1 | 1 | n1->n2 | 800.0 | 2.0 | 700.0 | 600.0 |" in md
    assert "| rwp-30 | bulk1 | 1 | 2 | n1->n2 | 800.0 | 2.0 | - | 400.0 |" in md
    assert "- 0123456789: 1 run(s): rwp-30_aodv_none_v20_s1_bulk1 (? UTC)" in md  # its checkout
    assert "- not recorded: 7 run(s)" in md
    assert "rwp-30_smr_none_v1_s1_bulk1" in md  # failed runs are listed
    assert "- rwp-30_aodv_none_v20_s1_bulk1: 2.5 s late" in md
    assert "![goodput-rwp-30-bulk1](goodput-rwp-30-bulk1.png)" in md
    assert "name: t" in md  # the spec
    assert "321.5" in proc.stdout  # and printed
    summary = json.loads((dest / "summary.json").read_text())
    assert [r["variant"] for r in summary["bulk"]] == ["aodv", "aodv", "dsr", "dsr"]
    assert summary["fidelity"]["invalid"] == {
        "rwp-30_dsr_none_v1_s3_bulk1": ["medium scheduling lag p99 40 ms > 5 ms"]
    }
    assert summary["http"][0]["pages_completed"] == 2


def test_failed_pages_count_at_their_timeout_and_cut_pages_not_at_all():
    run = http_run("dsr", [1.0, 2.0, 3.0], 1)
    run["traffic"] = {"page_timeout_s": 30.0}
    run["http"]["pairs"][0]["pages"].append({"ok": False, "cut": True, "bytes": 0})
    (row,) = report.http_rows([run])
    assert row["service_mean_s"] == 2.0  # the completed pages alone
    assert row["completed_pct"] == 75.0  # 3 of the 4 that ended; the cut page did not
    assert row["censored_mean_s"] == 9.0  # (1 + 2 + 3 + 30) / 4


def test_a_cbr_background_gets_a_column_only_where_runs_had_one():
    rows = report.http_rows([http_run("dsr", [1.0], 0)])
    assert rows[0]["cbr_delivered"] is None
    assert report.with_background(report.HTTP_COLS, rows) == report.HTTP_COLS
    runs = [{**http_run("dsr", [1.0], 0), "background": {"delivery_ratio": r}} for r in (0.5, 0.75)]
    rows = report.http_rows(runs)
    assert rows[0]["cbr_delivered"] == 0.625  # mean over the runs
    cols = report.with_background(report.HTTP_COLS, rows)
    assert cols[-1] == ("CBR delivered", "cbr_delivered", ".2f")
    assert report.markdown_table(cols, rows).splitlines()[-1].endswith("| 0.62 |")


def test_a_directory_without_runs_is_refused(tmp_path: Path):
    with pytest.raises(UserError, match="no runs/"):
        report.make_report(tmp_path)
    proc = manetkit("experiment", "report", str(tmp_path), check=False)
    assert proc.returncode == 2 and "not an experiment results directory" in proc.stderr


def multi_flow_run(stack: str, speed: float, seed: int, kbps: list[float]) -> dict:
    """A run of len(kbps) flows at once, each with a one-flow bound of 800 kbit/s."""
    flows = [{"src": f"n{k + 1}", "dst": f"n{k + 11}", "goodput_kbps": g, "expected_kbps": 800.0,
              "measured_over_expected": g / 800.0, "partition_s": 0.0, "mean_hops": 2.0}
             for k, g in enumerate(kbps)]  # fmt: skip
    total, expected = sum(kbps), 800.0 * len(kbps)
    return {
        "status": "ok",
        "run": f"rwp-30_{stack}_none_v{speed:g}_s{seed}_bulk25",
        "params": {"scenario": "rwp-30", "stack": stack, "proxy": "none", "speed": speed,
                   "seed": seed, "traffic": "bulk25"},
        "bulk": {"flows": flows, "goodput_kbps": total, "expected_kbps": expected,
                 "measured_over_expected": total / expected},
        "control": None,
        "fidelity": rundocs.fidelity(),
    }  # fmt: skip


def test_several_flows_a_run_show_the_sum_and_the_mean_per_flow(tmp_path: Path):
    runs = tmp_path / "runs"
    runs.mkdir()
    for d in (multi_flow_run("aodv", 20, 1, [40.0] * 25),  # 1000 in all, 40 a flow
              multi_flow_run("aodv", 20, 2, [20.0] * 25),  # 500 in all, 20 a flow
              multi_flow_run("babeld", 20, 1, [10.0] * 25)):  # fmt: skip
        (runs / f"{d['run']}.json").write_text(json.dumps(d))
    rows = report.bulk_rows(report.load_runs(tmp_path))
    assert (rows[0]["goodput_kbps"], rows[0]["goodput_per_flow_kbps"]) == (750.0, 30.0)
    cols = report.with_flows(report.BULK_COLS, rows)
    assert [h for h, _, _ in cols][7:11] == ["goodput kbit/s, sum of flows",
                                             "goodput kbit/s per flow",
                                             "median kbit/s, sum of flows",
                                             "expected kbit/s, sum of flows (bound)"]  # fmt: skip
    assert report.with_flows(report.BULK_COLS, [{**rows[0], "flows": 1}]) == report.BULK_COLS
    report.make_report(tmp_path)
    md = (tmp_path / "report" / "README.md").read_text()
    assert "| rwp-30 | bulk25 | aodv | 20 | 1,2 | 2 | 25 | 750.0 | 30.0 | 750.0 | 20000.0 |" in md
    assert "an upper bound the medium cannot" in md
    # beside Anantharaman et al.'s 25 connections (per flow): ours per flow too
    assert "| 20 | 20.8 | 8.3 | 31.4 | 30.0 | 10.0 |" in md
    # eq. 3.1's bound summed over flows at once is not a goal to meet
    assert "not scored (25 flows: the sum of one-flow bounds)" in md
