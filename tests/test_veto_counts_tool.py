"""tools/veto_counts.py counts the veto's work inside each valid run's window."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from tools.veto_counts import main


def _snapshot(counters: dict[str, dict[str, int]]) -> bytes:
    nodes: dict[str, Any] = {
        n: {"daemon": {"engine": {"counters": {"link-breaks": 5, **c}}}}
        for n, c in counters.items()
    }
    nodes["peer"] = {"daemon": None}  # a node with no manetkit daemon
    return gzip.compress(json.dumps({"nodes": nodes}).encode())


def _run(results: Path, name: str, stack: str, valid: bool, start: dict, end: dict) -> None:
    runs = results / "runs"
    (runs / name).mkdir(parents=True)
    doc = {"run": name, "params": {"stack": stack, "seed": 1}, "fidelity": {"valid": valid}}
    (runs / f"{name}.json").write_text(json.dumps(doc))
    (runs / name / "snapshot-start.json.gz").write_bytes(_snapshot(start))
    (runs / name / "snapshot-end.json.gz").write_bytes(_snapshot(end))


def test_window_counts_per_run_and_pooled_per_variant(tmp_path: Path) -> None:
    start = {"n1": {"veto-vetoed": 10, "veto-confirmed": 5}, "n2": {"veto-vetoed": 50}}
    end = {
        "n1": {
            "veto-vetoed": 20,
            "veto-confirmed": 13,
            "veto-break-silent": 2,
            "veto-delayed-breaks": 2,
            "veto-delay-ms": 300,
        },
        "n2": {"veto-vetoed": 4},  # restarted: its counters count from zero
    }
    _run(tmp_path, "a", "dsr-veto", True, start, end)
    _run(tmp_path, "b", "dsr-veto", False, {}, {"n1": {"veto-vetoed": 999}})  # invalid
    _run(tmp_path, "c", "dsr", True, {}, {"n1": {}})  # veto off: no veto counters
    doc = main(tmp_path)
    assert set(doc["runs"]) == {"a"}
    got = doc["by_variant"]["dsr-veto"]
    assert got["runs"] == 1
    assert got["vetoed"] == 10 + 4
    assert got["confirmed"] == 8 and got["confirmed_share"] == round(8 / 14, 3)
    assert got["breaks"] == {"silent": 2}
    assert got["delayed_breaks"] == 2 and got["mean_delay_ms"] == 150.0
    assert json.loads((tmp_path / "veto-counts.json").read_text()) == doc


def test_the_admissions_refusals_and_the_discoveries_are_counted_too(tmp_path: Path) -> None:
    start = {"n1": {"link-not-admitted": 3, "admission-refused-signal": 3,
                    "discoveries-completed": 1, "discovery-latency-ms": 500}}  # fmt: skip
    end = {"n1": {"link-not-admitted": 10, "admission-refused-signal": 8,
                  "admission-refused-unheard": 2, "discoveries-completed": 3,
                  "discovery-latency-ms": 2500}}  # fmt: skip
    _run(tmp_path, "a", "aodv-floor", True, start, end)
    _run(tmp_path, "c", "aodv", True, {"n1": {"discoveries-completed": 1}},
         {"n1": {"discoveries-completed": 9}})  # fmt: skip  # neither on: left out
    got = main(tmp_path)["by_variant"]
    assert set(got) == {"aodv-floor"}
    assert got["aodv-floor"]["admission"] == {"refused": 7, "by_rule": {"signal": 5, "unheard": 2}}
    assert got["aodv-floor"]["discoveries"] == 2 and got["aodv-floor"]["discovery_mean_s"] == 1.0
