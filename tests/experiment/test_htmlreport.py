"""``manetkit experiment report DIR --html``: one self-contained page from run JSONs."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from tests.experiment import rundocs
from tests.helpers.lab import manetkit

PNG = b"\x89PNG\r\n\x1a\n"


def _fidelity(valid: bool, p99: float, drops: int = 0) -> dict:
    return {
        "start_t": 5.0, "end_t": 30.0, "outputs": 12000, "lag_p50_ms": 0.1,
        "lag_p99_ms": p99, "lag_max_ms": p99 * 3, "per_second": [],
        "modelled_drops": {}, "unmodelled_drops": {"medium_send_drops": drops} if drops else {},
        "cpu_s": {"medium": 4.25}, "load_avg": [1.0, 1.0, 1.0], "steal_pct": 21.5, "valid": valid,
        "reasons": [] if valid else [f"medium scheduling lag p99 {p99} ms > 5 ms"],
    }  # fmt: skip


def test_html_report_embeds_tables_plots_fidelity_and_links(tmp_path: Path):
    runs = tmp_path / "runs"
    runs.mkdir()
    docs = [
        rundocs.bulk_run("dsr", 10, 1, 600.0, 800.0, fidelity=_fidelity(True, 0.8)),
        rundocs.bulk_run("aodv", 10, 1, 640.0, 800.0, fidelity=_fidelity(False, 12.0, drops=3)),
        rundocs.bulk_run("dsr", 20, 1, 500.0, 700.0),  # made before fidelity was recorded
    ]
    for d in docs:
        (runs / f"{d['run']}.json").write_text(json.dumps(d))
    (runs / "rwp-30_smr_none_v10_s1_bulk1.error.json").write_text('{"status": "failed"}')
    (tmp_path / "spec.yaml").write_text("name: t\n")

    r = manetkit("experiment", "report", str(tmp_path), "--html")
    page = (tmp_path / "report" / "index.html").read_text()
    assert "index.html" in r.stdout
    assert page.startswith("<!doctype html>") and "<table>" in page
    assert "<td>dsr</td>" in page and "600.0" in page  # the bulk table, rendered
    # every plot embedded: no file next to the page is needed to show it
    imgs = re.findall(r'<img src="([^"]+)"', page)
    assert imgs and all(src.startswith("data:image/png;base64,") for src in imgs)
    assert base64.b64decode(imgs[0].split(",", 1)[1]).startswith(PNG)
    assert 'src="http' not in page and "<script" not in page  # offline, nothing fetched
    # the runs with their fidelity and a link to each JSON
    assert 'href="../runs/rwp-30_dsr_none_v10_s1_bulk1.json"' in page
    assert 'href="../runs/rwp-30_smr_none_v10_s1_bulk1.error.json"' in page
    row = re.search(r"rwp-30_aodv_none_v10_s1_bulk1</a>.*?</tr>", page, re.S).group(0)
    assert "invalid" in row and ">12.0<" in row and ">3<" in row and "p99 12.0 ms" in row
    assert ">21.5<" in row  # the host's steal over the window
    row = re.search(r"rwp-30_dsr_none_v20_s1_bulk1</a>.*?</tr>", page, re.S).group(0)
    assert "not recorded" in row
    assert "4 run records: 1 valid, 1 invalid, 2 without a fidelity record" in page


def test_html_only_with_report(tmp_path: Path):
    r = manetkit("experiment", str(tmp_path / "spec.yaml"), "--html", check=False)
    assert r.returncode == 2 and "--html: only with `experiment report DIR`" in r.stderr
