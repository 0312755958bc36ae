"""tools/http_pages.py: HTTP runs page by page (failed pages at their timeout, the pages
both stacks completed)."""

from __future__ import annotations

import json
from pathlib import Path

from tools.http_pages import main, run_figures


def _page(k: int, service: float | None, cut: bool = False) -> dict:
    if service is None:
        return {"page": k, "ok": False, "cut": cut}
    return {"page": k, "ok": True, "service_s": service}


def _run(results: Path, stack: str, seed: int, pages: list[dict], valid: bool = True) -> None:
    runs = results / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    doc = {
        "params": {"stack": stack, "seed": seed, "repeat": 1},
        "traffic": {"page_timeout_s": 30.0},
        "http": {"pairs": [{"client": "n1", "server": "n2", "pages": pages}]},
        "fidelity": {"valid": valid},
    }
    (runs / f"{stack}_s{seed}.json").write_text(json.dumps(doc))


def test_a_failed_page_counts_at_its_timeout_in_the_censored_mean() -> None:
    run = {
        "traffic": {"page_timeout_s": 30.0},
        "http": {"pairs": [{"pages": [_page(1, 2.0), _page(2, None), _page(3, None, cut=True)]}]},
    }
    f = run_figures(run)
    assert (f["completed"], f["failed"], f["cut"]) == (1, 1, 1)
    assert f["service_s"] == 2.0  # the goal's figure: completed pages only
    assert f["censored_s"] == 16.0  # (2 + 30) / 2; the cut page is neither


def test_the_stack_that_fails_its_slow_pages_is_not_faster_page_for_page(tmp_path: Path) -> None:
    for seed in (1, 2, 3, 4, 5):
        # ours completes every page at 4 s; theirs fails the 2nd and does the others in 3 s
        _run(tmp_path, "aodv", seed, [_page(7, 4.0), _page(8, 4.0), _page(9, 4.0)])
        _run(tmp_path, "babeld", seed, [_page(7, 3.0), _page(8, None), _page(9, 3.0)])
    _run(tmp_path, "babeld", 6, [_page(7, 0.1)], valid=False)  # left out, counted
    out = main(tmp_path, [("aodv", "babeld"), ("aodv", "dsr")])
    assert out["stacks"]["babeld"]["invalid_runs"] == 1
    assert out["stacks"]["babeld"]["completed_share"] == round(10 / 15, 4)
    pair = out["pairs"]["aodv/babeld"]
    assert set(out["pairs"]) == {"aodv/babeld"}  # no runs of dsr: left out
    assert pair["service"]["estimate"] < 0  # by the goal's figure ours is slower
    assert pair["censored"]["estimate"] > 0.3  # 4 s against (3 + 30 + 3) / 3 = 12 s
    ppp = pair["page_for_page"]
    assert ppp["pages"] == 10 and ppp["different_page"] == 0
    assert abs(ppp["reduction"] - (1 - 40 / 30)) < 1e-4


def test_the_air_figures_are_medians_over_the_runs_and_absent_where_unrecorded(
    tmp_path: Path,
) -> None:
    for seed, (acked, control) in enumerate([(10, 500), (30, 700), (20, 600)], start=1):
        _run(tmp_path, "aodv", seed, [_page(1, 1.0)])
        f = tmp_path / "runs" / f"aodv_s{seed}.json"
        doc = json.loads(f.read_text())
        # attempts over two rates: the share is of all of them
        doc["rates"] = {
            "totals": {"1": {"attempts": 60, "acked": acked}, "11": {"attempts": 40, "acked": 0}}
        }
        doc["control"] = {"control_packets": control}
        doc["window"] = {"duration_s": 100.0}
        f.write_text(json.dumps(doc))
    _run(tmp_path, "batmand", 1, [_page(1, 1.0)])  # made before runs recorded rates
    out = main(tmp_path, [])
    assert out["stacks"]["aodv"]["unicast_acked"] == 0.2  # 20 of 100 attempts, the median run
    assert out["stacks"]["aodv"]["control_per_s"] == 6.0
    assert out["stacks"]["batmand"]["unicast_acked"] is None
    assert out["stacks"]["batmand"]["control_per_s"] is None


def test_several_cells_name_their_stacks_by_directory_and_pair_across_cells(
    tmp_path: Path,
) -> None:
    basic, mcast = tmp_path / "cell-basic", tmp_path / "cell-mcast"
    for seed in (1, 2, 3):
        _run(basic, "aodv", seed, [_page(1, 5.0), _page(2, 5.0)])
        _run(mcast, "aodv", seed, [_page(1, 4.0), _page(2, 4.0)])
    out = main([basic, mcast], [("aodv@cell-mcast", "aodv@cell-basic")])
    assert set(out["stacks"]) == {"aodv@cell-basic", "aodv@cell-mcast"}
    pair = out["pairs"]["aodv@cell-mcast/aodv@cell-basic"]
    assert abs(pair["service"]["estimate"] - 0.2) < 1e-9  # 4 s against 5 s
    assert pair["page_for_page"]["pages"] == 6  # the same seeds ask for the same pages
    # one directory keeps the plain stack names
    assert set(main(basic, [])["stacks"]) == {"aodv"}
