"""ELFN probe variants (``elfn-probe<S>``): the spec, the proxy config the lab gets, and
the report's sweep (Holland & Vaidya Fig. 12) from hand-made run JSONs. No netns."""

from __future__ import annotations

import json

import pytest

from manetkit.errors import UserError
from manetkit.experiment import execute, probesweep, report
from manetkit.experiment import spec as S
from manetkit.lab import stacks
from manetkit.proxy.config import parse_config
from tests.experiment import rundocs

PNG = b"\x89PNG\r\n\x1a\n"


def base(**over):
    doc = {
        "name": "t",
        "scenarios": ["rwp-30"],
        "stacks": ["dsr"],
        "speeds": [10],
        "traffics": [{"kind": "bulk", "name": "bulk1"}],
    }
    doc.update(over)
    return doc


def refused(doc) -> str:
    with pytest.raises(UserError) as exc:
        S.spec_from_dict(doc, "x.yaml")
    return " ".join(str(exc.value).split())


def test_probe_variants_expand_to_elfn_with_their_interval():
    sp = S.spec_from_dict(base(
        stacks=["dsr", "babeld"], proxies=["plain", "elfn-probe0.5", "elfn-probe30"],
    ))  # fmt: skip
    runs = sp.runs()
    assert [r.name for r in runs] == [
        "rwp-30_dsr_plain_v10_s1_bulk1",
        "rwp-30_dsr_elfn-probe0.5_v10_s1_bulk1",
        "rwp-30_dsr_elfn-probe30_v10_s1_bulk1",
        "rwp-30_babeld_plain_v10_s1_bulk1",  # a peer has no route events: no elfn
    ]
    by = {r.proxy: execute.overrides_for(sp, r) for r in runs if r.stack == "dsr"}
    assert by["elfn-probe0.5"]["proxy"] == "elfn" and by["plain"]["proxy"] == "plain"
    assert by["elfn-probe0.5"] == {**by["plain"], "proxy": "elfn"}
    assert S.probe_interval("elfn-probe0.5") == 0.5 and S.probe_interval("elfn") is None
    assert S.lab_proxy("elfn-probe30") == "elfn" and S.lab_proxy("bus") == "bus"
    assert S.proxy_extra("elfn-probe2") == {"probe": "fixed", "probe_interval": 2.0}
    assert S.proxy_extra("elfn") == {}
    assert S.PROBE_RANGE == (0.1, 60.0)  # the proxy config's own bounds


@pytest.mark.parametrize(
    ("proxy", "reason"),
    [
        ("elfn-probe0.05", "outside 0.1..60 s"),
        ("elfn-probe61", "outside 0.1..60 s"),
        ("elfn-probeX", "'X' is not seconds"),
        ("elfn-probe2.0", "write it elfn-probe2"),
        ("elfn-probenan", "outside 0.1..60 s"),
        ("elfn2", "Input should be none, plain, fixed-rto, elfn, bus or elfn-probe<seconds>"),
    ],
)
def test_a_bad_probe_variant_is_refused_naming_the_field(proxy, reason):
    msg = refused(base(proxies=["plain", proxy]))
    assert f"proxies[1]: {proxy}:" in msg or "proxies[1]: Input should be" in msg, msg
    assert reason in msg, msg


def test_probe_variants_alone_on_peers_run_nothing():
    assert "no run" in refused(base(stacks=["babeld"], proxies=["elfn-probe2"]))
    assert "listed twice" in refused(base(proxies=["elfn-probe2", "elfn-probe2"]))


def test_the_interval_reaches_the_lab_proxy_config():
    sp = S.spec_from_dict({**base(proxies=["plain", "elfn-probe0.5"]),
                           "proxy_config": {"partition_timeout": 60, "probe_interval": 9}})  # fmt: skip
    plain, probe = sp.runs()
    assert execute.run_proxy_config(sp, plain) == {"partition_timeout": 60, "probe_interval": 9}
    # the spec's fields are kept; the variant's win
    got = execute.run_proxy_config(sp, probe)
    assert got == {"partition_timeout": 60, "probe": "fixed", "probe_interval": 0.5}
    cfg = parse_config(stacks.proxy_config("mkx1", "n1", "elfn", True, got), "test")
    assert (cfg.mode, cfg.probe, cfg.probe_interval) == ("elfn", "fixed", 0.5)
    assert cfg.partition_timeout == 60
    assert execute.run_proxy_config(S.spec_from_dict(base(proxies=["plain"])), plain) is None


def test_run_one_brings_the_lab_up_with_the_variant(tmp_path, monkeypatch):
    """run_one's lab up gets proxy elfn and the interval in its proxy config (the lab
    itself is faked: it stops the run right there)."""
    sp = S.spec_from_dict(base(proxies=["elfn-probe10"]))
    (run,) = sp.runs()
    seen: dict = {}

    class Stop(Exception):
        pass

    def fake_up(path, *, name, overrides, timeout, proxy_config):
        seen["overrides"] = overrides
        seen["extra"] = proxy_config
        raise Stop

    monkeypatch.setattr(execute.nodes, "up", fake_up)
    monkeypatch.setattr(execute.nodes, "down", lambda lab: None)
    with pytest.raises(Stop):
        execute.run_one(sp, run, tmp_path / "work")
    assert seen["overrides"]["proxy"] == "elfn"
    assert seen["extra"] == {"probe": "fixed", "probe_interval": 10.0}


# --- the report ------------------------------------------------------------------------


def bulk_run(proxy: str, seed: int, kbps: float, expected: float, stack: str = "dsr") -> dict:
    return rundocs.bulk_run(
        stack, 10.0, seed, kbps, expected, proxy=proxy,
        probe_interval_s=S.probe_interval(proxy), proxy_config=S.proxy_extra(proxy) or None,
    )  # fmt: skip


DOCS = [
    bulk_run("plain", 1, 400.0, 800.0),
    bulk_run("plain", 2, 600.0, 800.0),  # mean 500, 62.5 %
    bulk_run("elfn-probe0.5", 1, 700.0, 800.0),
    bulk_run("elfn-probe0.5", 2, 700.0, 800.0),
    bulk_run("elfn-probe30", 1, 200.0, 800.0),
    bulk_run("elfn-probe30", 2, 300.0, 800.0),
    bulk_run("elfn-probe2", 1, 720.0, 800.0),
    bulk_run("elfn-probe2", 2, 680.0, 800.0),
    bulk_run("none", 1, 100.0, 800.0, stack="aodv"),  # no probe runs there: no sweep row
]


def test_sweep_rows_put_the_baseline_first_and_the_intervals_in_order():
    rows = probesweep.rows(DOCS)
    assert [(r["proxy"], r["probe_s"]) for r in rows] == [
        ("plain", None), ("elfn-probe0.5", 0.5), ("elfn-probe2", 2.0), ("elfn-probe30", 30.0),
    ]  # fmt: skip
    plain, fast, _, slow = rows
    assert plain["percent_of_expected"] == pytest.approx(62.5)
    assert plain["vs_baseline"] == pytest.approx(1.0)
    assert fast["percent_of_expected"] == pytest.approx(87.5)
    assert fast["vs_baseline"] == pytest.approx(1.4)
    assert slow["per_seed_percent"] == {"1": 25.0, "2": 37.5}
    assert probesweep.rows([d for d in DOCS if "probe" not in d["params"]["proxy"]]) == []


def test_the_sweep_section_has_the_table_the_plot_and_the_paper(tmp_path):
    md = "\n".join(probesweep.markdown(DOCS, tmp_path))
    assert "## ELFN probe interval sweep (Holland & Vaidya Fig. 12)" in md
    assert "| rwp-30 | bulk1 | dsr | 10 | plain | - | 1,2 | 500.0 | 800.0 | 62 | 1.00 |" in md
    assert (
        "| rwp-30 | bulk1 | dsr | 10 | elfn-probe30 | 30 | 1,2 | 250.0 | 800.0 | 31 | 0.50 |" in md
    )
    assert "no percentage is printed in the text" in md
    assert (tmp_path / "probe-rwp-30-bulk1.png").read_bytes().startswith(PNG)
    assert probesweep.markdown(DOCS[:2], tmp_path) == []  # no probe runs, no section


def test_make_report_has_the_sweep(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    for d in DOCS:
        (runs / f"{d['run']}.json").write_text(json.dumps(d))
    dest = report.make_report(tmp_path)
    md = (dest / "README.md").read_text()
    assert "## ELFN probe interval sweep" in md and "![probe-rwp-30-bulk1]" in md
    # the bulk table names the variant as any proxy
    assert "| rwp-30 | bulk1 | dsr+elfn-probe0.5 | 10 | 1,2 | 2 | 1 | 700.0 |" in md
    summary = json.loads((dest / "summary.json").read_text())
    assert [r["proxy"] for r in summary["probe_sweep"]][0] == "plain"
