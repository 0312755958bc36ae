"""``manetkit experiment report DIR``: tables and PNG plots from a results directory.

Reads every ``DIR/runs/*.json`` with ``status: ok`` and writes ``DIR/report/``:

* ``README.md``: the tables (markdown) with the plots, and the spec that made the runs;
* ``summary.json``: the same rows (``manetkit.bench.report.write``, the one result writer);
* ``goodput-<scenario>-<traffic>.png``: bulk TCP goodput vs mean speed, one line per
  stack (+ proxy), means over seeds (Anantharaman et al. Tables I/II's axes);
* ``expected-<scenario>-<traffic>.png``: measured vs expected throughput, one point per
  flow and run, the diagonal is eq. 3.1's bound (Holland & Vaidya Fig. 4 / Fig. 11);
* ``http-<scenario>-<traffic>.png``: mean page service time per stack at each speed
  (Dyer & Boppana Fig. 6);
* ``probe-<scenario>-<traffic>.png``: with ELFN probe variants (``elfn-probe<S>``),
  measured/expected vs the probe interval beside the runs without ELFN
  (Holland & Vaidya Fig. 12; ``manetkit.experiment.probesweep``);
* in the README, the goals scored on the valid runs (medians, bootstrap 95 % intervals,
  met / not met: ``manetkit.experiment.goals``), the papers' figures beside ours, the
  fidelity of the runs (``manetkit.experiment.validity``: invalid runs listed with why,
  and left out of every table and goal cell) and the runs whose warm-up hit its cap.

The tables are also printed. The rows and the goals are plain data (:func:`bulk_rows`,
:func:`http_rows`, :func:`wrk_rows`, :func:`table_runs`, ``goals.goals``), so another
front end (an HTML report) builds on the same functions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.table import Table

from manetkit.bench import report as out
from manetkit.errors import UserError
from manetkit.experiment import goals, probesweep, validity
from manetkit.experiment.plugins import PLUGINS

Key = tuple[str, str, str, float]  # scenario, traffic, variant, speed


def load_runs(results: Path) -> list[dict[str, Any]]:
    """The finished runs of a results directory, in name order."""
    runs_dir = results / "runs"
    if not runs_dir.is_dir():
        raise UserError(f"{results}: not an experiment results directory (no runs/)")
    docs = []
    for p in sorted(runs_dir.glob("*.json")):
        if p.name.endswith(".error.json"):
            continue
        try:
            doc = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("status") == "ok":
            docs.append(doc)
    return docs


variant = goals.variant


def table_runs(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs the tables are made of: all but the invalid ones (runs without a fidelity
    record stay, as before runs recorded one)."""
    return [d for d in docs if validity.of(d) != "invalid"]


def _seeds(runs: list[dict[str, Any]]) -> list[int]:
    return sorted({int(d["params"]["seed"]) for d in runs})


def _median(xs: Iterable[float | None]) -> float | None:
    got = sorted(x for x in xs if x is not None)
    if not got:
        return None
    k = len(got) // 2
    return got[k] if len(got) % 2 else (got[k - 1] + got[k]) / 2


def _key(doc: dict[str, Any]) -> Key:
    p = doc["params"]
    return (p["scenario"], p["traffic"], variant(p), float(p["speed"]))


def _group(docs: Iterable[dict[str, Any]], part: str) -> dict[Key, list[dict[str, Any]]]:
    groups: dict[Key, list[dict[str, Any]]] = {}
    for d in docs:
        if d.get(part) is not None:
            groups.setdefault(_key(d), []).append(d)
    return dict(sorted(groups.items()))


def _control(runs: list[dict[str, Any]]) -> float | None:
    return out.mean((d.get("control") or {}).get("per_delivered") for d in runs)


def _control_bytes(runs: list[dict[str, Any]]) -> float | None:
    """Control bytes per delivered data packet (manetkit daemons: counted by the shell
    since the control-bytes counters; peers: nftables counters)."""
    return out.mean((d.get("control") or {}).get("bytes_per_delivered") for d in runs)


def _cbr_delivered(runs: list[dict[str, Any]]) -> float | None:
    """The CBR background's delivery ratio, mean over the runs that had one."""
    return out.mean((d.get("background") or {}).get("delivery_ratio") for d in runs)


def with_background(cols: list[tuple[str, str, str]], rows: list[dict]) -> list:
    """``cols`` and a CBR column when some row's runs had a background (reports of
    results without one stay as they were)."""
    if any(r.get("cbr_delivered") is not None for r in rows):
        return [*cols, ("CBR delivered", "cbr_delivered", ".2f")]
    return cols


def with_flows(cols: list[tuple[str, str, str]], rows: list[dict]) -> list:
    """``cols`` for rows with several flows a run: goodput and expected are sums over a
    run's flows (say so), and a column with the mean per flow (Anantharaman et al.'s
    25-connection figures are per flow). One-flow reports stay as they were."""
    if not any((r.get("flows") or 0) > 1 for r in rows):
        return cols
    got = []
    for col in cols:
        if col[1] == "goodput_kbps":
            got += [("goodput kbit/s, sum of flows", "goodput_kbps", ".1f"),
                    ("goodput kbit/s per flow", "goodput_per_flow_kbps", ".1f")]  # fmt: skip
        elif col[1] == "goodput_median_kbps":
            got.append(("median kbit/s, sum of flows", "goodput_median_kbps", ".1f"))
        elif col[1] == "expected_kbps":
            got.append(("expected kbit/s, sum of flows (bound)", "expected_kbps", ".1f"))
        else:
            got.append(col)
    return got


MULTI_FLOW_NOTE = (
    "Several flows a run: goodput and expected are sums over the run's flows, and "
    "'per flow' is the sum over the number of flows (mean over seeds). Each flow's "
    "expected throughput is eq. 3.1 on T_i measured for ONE flow alone on a chain, so "
    "for flows sharing the medium at once the sum is an upper bound the medium cannot "
    "carry (it counts the channel once per flow); measured/expected is then far below "
    "1 for every stack and compares stacks only as the goodput does."
)


def _discovery(runs: list[dict[str, Any]]) -> float | None:
    """Mean route discovery latency (s), weighted by the discoveries of each run."""
    got = [(d.get("route_discovery") or {}) for d in runs]
    n = sum(g.get("completed") or 0 for g in got if g.get("mean_s") is not None)
    if not n:
        return None
    return sum(g["mean_s"] * g["completed"] for g in got if g.get("mean_s") is not None) / n


def _gt_partition(runs: list[dict[str, Any]]) -> float | None:
    """Mean partition time (s) per pair of the runs' ground truth (HTTP: client-server)."""
    return out.mean(
        p.get("partition_s")
        for d in runs
        for p in ((d.get("ground_truth") or {}).get("pairs") or {}).values()
    )


def _group_cells(key: Key, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The cells every table's row starts with: which group of runs it is."""
    scen, traffic, var, speed = key
    return {"scenario": scen, "traffic": traffic, "variant": var, "speed": speed,
            "seeds": _seeds(runs), "runs": len(runs)}  # fmt: skip


def _routing_cells(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The cells a bulk or HTTP row ends with: what the routing paid, and the background."""
    return {
        "control_per_delivered": _control(runs),
        "control_bytes_per_delivered": _control_bytes(runs),
        "discovery_s": _discovery(runs),
        "cbr_delivered": _cbr_delivered(runs),
    }


def bulk_rows(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for key, runs in _group(docs, "bulk").items():
        flows = [f for d in runs for f in d["bulk"]["flows"]]
        rows.append(
            {
                **_group_cells(key, runs),
                "flows": len(runs[0]["bulk"]["flows"]),
                "goodput_kbps": out.mean(d["bulk"]["goodput_kbps"] for d in runs),
                "goodput_median_kbps": _median(d["bulk"]["goodput_kbps"] for d in runs),
                "goodput_per_flow_kbps": out.mean(
                    d["bulk"]["goodput_kbps"] / len(d["bulk"]["flows"])
                    for d in runs
                    if d["bulk"]["flows"]
                ),
                "expected_kbps": out.mean(d["bulk"]["expected_kbps"] for d in runs),
                "measured_over_expected": out.mean(
                    d["bulk"]["measured_over_expected"] for d in runs
                ),
                "partition_s": out.mean(f["partition_s"] for f in flows),
                **_routing_cells(runs),
            }
        )  # fmt: skip
    return rows


def http_page_outcomes(run: dict[str, Any]) -> tuple[list[float], int, int]:
    """A run's pages: the service times of the completed ones, how many failed, and how
    many the window's end cut (those have not ended)."""
    pages = [p for pair in run["http"]["pairs"] for p in pair["pages"]]
    done = [p["service_s"] for p in pages if p["ok"]]
    cut = sum(1 for p in pages if not p["ok"] and p.get("cut"))
    return done, len(pages) - len(done) - cut, cut


def _http_censored(runs: list[dict[str, Any]]) -> tuple[float | None, float | None]:
    """The share of the ended pages that completed (in %), and the mean page time with
    each failed page counted at its run's page timeout, a lower bound of what the failed
    pages would have taken: the completed pages' mean alone rewards a stack that fails
    its slow pages. The mean is None where a failed page's run records no page timeout
    (made before pages had one). Pages cut by the window's end count in neither."""
    times: list[float] = []
    ended = completed = 0
    unknown = False
    for d in runs:
        done, failed, _ = http_page_outcomes(d)
        timeout = (d.get("traffic") or {}).get("page_timeout_s")
        unknown |= failed > 0 and timeout is None
        times += done + [float(timeout or 0.0)] * failed
        completed += len(done)
        ended += len(done) + failed
    if not ended:
        return None, None
    return 100.0 * completed / ended, None if unknown else out.mean(times)


def http_rows(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for key, runs in _group(docs, "http").items():
        times = sorted(
            p["service_s"] for d in runs for pair in d["http"]["pairs"] for p in pair["pages"]
            if p["ok"]
        )  # fmt: skip
        completed_pct, censored_mean_s = _http_censored(runs)
        rows.append(
            {
                **_group_cells(key, runs),
                "pages_completed": sum(d["http"]["pages_completed"] for d in runs),
                "pages_failed": sum(d["http"]["pages_failed"] for d in runs),
                "service_mean_s": out.mean(times),
                "service_median_s": times[len(times) // 2] if times else None,
                "completed_pct": completed_pct,
                "censored_mean_s": censored_mean_s,
                "partition_s": _gt_partition(runs),
                **_routing_cells(runs),
            }
        )  # fmt: skip
    return rows


def wrk_rows(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for key, runs in _group(docs, "wrk").items():
        rows.append(
            {
                **_group_cells(key, runs),
                "requests_per_s": out.mean(d["wrk"]["requests_per_s"] for d in runs),
                "latency_p50_s": out.mean(d["wrk"]["latency_s"].get("p50") for d in runs),
                "errors": sum(d["wrk"]["errors"] for d in runs),
            }
        )  # fmt: skip
    return rows


# (column title, row field, format). Every table starts with the group's columns
# (_group_cells); bulk and HTTP end with the routing's (_routing_cells, CBR aside).
_GROUP_COLS = [("scenario", "scenario", "s"), ("traffic", "traffic", "s"),
               ("stack", "variant", "s"), ("speed m/s", "speed", "g"),
               ("seeds", "seeds", "seeds"), ("runs", "runs", "d")]  # fmt: skip
_ROUTING_COLS = [("control pkts/delivered", "control_per_delivered", ".3f"),
                 ("control B/delivered", "control_bytes_per_delivered", ".1f"),
                 ("discovery s", "discovery_s", ".3f")]  # fmt: skip
BULK_COLS = [*_GROUP_COLS, ("flows", "flows", "d"), ("goodput kbit/s", "goodput_kbps", ".1f"),
             ("median kbit/s", "goodput_median_kbps", ".1f"),
             ("expected kbit/s", "expected_kbps", ".1f"),
             ("measured/expected", "measured_over_expected", ".2f"),
             ("partition s/flow", "partition_s", ".1f"), *_ROUTING_COLS]  # fmt: skip
HTTP_COLS = [*_GROUP_COLS, ("pages done", "pages_completed", "d"),
             ("pages failed", "pages_failed", "d"),
             ("service mean s", "service_mean_s", ".2f"),
             ("service median s", "service_median_s", ".2f"),
             ("completed %", "completed_pct", ".0f"),
             ("mean, failed at timeout s", "censored_mean_s", ".2f"),
             ("partition s/pair", "partition_s", ".1f"), *_ROUTING_COLS]  # fmt: skip
WRK_COLS = [*_GROUP_COLS, ("requests/s", "requests_per_s", ".1f"),
            ("latency p50 s", "latency_p50_s", ".3f"), ("errors", "errors", "d")]  # fmt: skip


def rich_table(title: str, cols: list[tuple[str, str, str]], rows: list[dict]) -> Table:
    t = Table(title=title)
    for head, _, _ in cols:
        t.add_column(head)
    for r in rows:
        t.add_row(*(out.row_cell(r[f], fmt) for _, f, fmt in cols))
    return t


def markdown_table(cols: list[tuple[str, str, str]], rows: list[dict]) -> str:
    lines = ["| " + " | ".join(h for h, _, _ in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(out.row_cell(r[f], fmt) for _, f, fmt in cols) + " |" for r in rows]
    return "\n".join(lines)


def per_seed_markdown(docs: list[dict[str, Any]]) -> list[str]:
    """Bulk goodput per seed, stacks side by side (the same movement and pairs in a row),
    with the row's expected throughput and partition time (ground truth, per run)."""
    runs = [d for d in docs if d.get("bulk") is not None]
    if not runs:
        return []
    variants = list(dict.fromkeys(variant(d["params"]) for d in sorted(runs, key=_key)))
    rows: dict[tuple[str, str, float, int, int], dict[str, dict[str, Any]]] = {}
    for d in runs:
        p = d["params"]
        k = (p["scenario"], p["traffic"], float(p["speed"]), int(p["seed"]),
             int(p.get("repeat") or 1))  # fmt: skip
        rows.setdefault(k, {})[variant(p)] = d
    repeats = any(k[4] > 1 for k in rows)
    md = ["Per seed, kbit/s (one row = one movement pattern and the same flow pairs; "
          "expected and partition from the ground truth"
          + ("; `3 r2` is seed 3's second repeat" if repeats else "") + "):", "",
          "| scenario | traffic | speed m/s | seed | pairs | expected kbit/s | partition s | "
          + " | ".join(variants) + " |", "|---|" + "---|" * (6 + len(variants))]  # fmt: skip
    for (scen, traffic, speed, seed0, repeat), by in sorted(rows.items()):
        seed = f"{seed0} r{repeat}" if repeats else str(seed0)
        any_doc = next(iter(by.values()))
        flows = any_doc["bulk"]["flows"]
        cells = [out.cell(by[v]["bulk"]["goodput_kbps"] if v in by else None, ".1f")
                 for v in variants]  # fmt: skip
        md.append(
            f"| {scen} | {traffic} | {speed:g} | {seed} | "
            + ", ".join(f"{f['src']}->{f['dst']}" for f in flows)
            + f" | {out.cell(any_doc['bulk']['expected_kbps'], '.1f')}"
            + f" | {out.cell(sum(f['partition_s'] or 0 for f in flows), '.1f')} | "
            + " | ".join(cells)
            + " |"
        )
    return [*md, ""]


def code_markdown(docs: list[dict[str, Any]]) -> list[str]:
    """Which checkout made which runs (a run's ``code``; older runs did not record it:
    they are listed with the time they finished, to set against the commits' times)."""
    by: dict[str, list[str]] = {}
    for d in docs:
        code = d.get("code")
        if code:
            dirty = f" + uncommitted {', '.join(code['dirty'])}" if code.get("dirty") else ""
            key = f"{code['commit'][:10]}{dirty}"
        else:
            key = "not recorded"
        when = time.strftime("%H:%M", time.gmtime(d["finished"])) if d.get("finished") else "?"
        by.setdefault(key, []).append(f"{d['run']} ({when} UTC)")
    md = ["## Code", "", "The checkout each run used (runs/*.json `code`):", ""]
    for key, names in by.items():
        md.append(f"- {key}: {len(names)} run(s): {', '.join(sorted(names))}")
    return [*md, ""]


# --- plots -----------------------------------------------------------------------------


def _slug(*parts: str) -> str:
    return "-".join("".join(c if c.isalnum() or c in "-_" else "_" for c in p) for p in parts)


def plot_goodput(rows: list[dict], dest: Path) -> list[Path]:
    """Goodput vs speed, a line per variant, one PNG per (scenario, traffic)."""
    plt = out.pyplot()
    made = []
    for scen, traffic in dict.fromkeys((r["scenario"], r["traffic"]) for r in rows):
        sel = [r for r in rows if (r["scenario"], r["traffic"]) == (scen, traffic)]
        fig, ax = plt.subplots(figsize=(6, 4))
        for var in dict.fromkeys(r["variant"] for r in sel):
            pts = sorted((r["speed"], r["goodput_kbps"]) for r in sel if r["variant"] == var)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=var)
        speeds = sorted({r["speed"] for r in sel})
        exp = [(s, out.mean(r["expected_kbps"] for r in sel if r["speed"] == s)) for s in speeds]
        exp = [e for e in exp if e[1] is not None]
        flows = max(r["flows"] for r in sel)
        if exp and flows == 1:  # several flows: the sum of one-flow bounds, off the chart
            ax.plot([e[0] for e in exp], [e[1] for e in exp], "k--", lw=1, label="expected (3.1)")
        ax.set_xlabel("mean speed (m/s)")
        ax.set_ylabel("TCP goodput (kbit/s" + (f", sum of {flows} flows)" if flows > 1 else ")"))
        ax.set_title(f"{scen}, {traffic}: goodput vs speed")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend()
        made.append(out.save_figure(fig, dest / f"goodput-{_slug(scen, traffic)}.png"))
    return made


def plot_expected(docs: list[dict[str, Any]], dest: Path) -> list[Path]:
    """Measured vs expected per flow and run (Holland & Vaidya Fig. 4)."""
    plt = out.pyplot()
    made = []
    pts: dict[tuple[str, str], dict[str, list[tuple[float, float]]]] = {}
    for d in docs:
        if d.get("bulk") is None:
            continue
        p = d["params"]
        for f in d["bulk"]["flows"]:
            if f["expected_kbps"] is not None:
                pts.setdefault((p["scenario"], p["traffic"]), {}).setdefault(variant(p), []).append(
                    (f["expected_kbps"], f["goodput_kbps"])
                )
    for (scen, traffic), by_var in pts.items():
        fig, ax = plt.subplots(figsize=(5, 5))
        top = max(max(x, y) for v in by_var.values() for x, y in v) * 1.05 or 1.0
        ax.plot([0, top], [0, top], "k-", lw=0.8, label="measured = expected")
        for var, xy in by_var.items():
            ax.scatter([x for x, _ in xy], [y for _, y in xy], label=var, s=18)
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
        ax.set_xlabel("expected throughput, eq. 3.1 (kbit/s)")
        ax.set_ylabel("measured goodput (kbit/s)")
        ax.set_title(f"{scen}, {traffic}: measured vs expected")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        made.append(out.save_figure(fig, dest / f"expected-{_slug(scen, traffic)}.png"))
    return made


def plot_http(rows: list[dict], dest: Path) -> list[Path]:
    """Mean page service time, a bar per variant at each speed."""
    plt = out.pyplot()
    made = []
    for scen, traffic in dict.fromkeys((r["scenario"], r["traffic"]) for r in rows):
        sel = [r for r in rows if (r["scenario"], r["traffic"]) == (scen, traffic)]
        speeds = sorted({r["speed"] for r in sel})
        variants = list(dict.fromkeys(r["variant"] for r in sel))
        fig, ax = plt.subplots(figsize=(6, 4))
        width = 0.8 / max(1, len(variants))
        for k, var in enumerate(variants):
            ys = []
            for s in speeds:
                r = next((r for r in sel if r["variant"] == var and r["speed"] == s), None)
                ys.append(r["service_mean_s"] if r and r["service_mean_s"] is not None else 0.0)
            xs = [i + (k - (len(variants) - 1) / 2) * width for i in range(len(speeds))]
            ax.bar(xs, ys, width, label=var)
        ax.set_xticks(range(len(speeds)), [f"{s:g}" for s in speeds])
        ax.set_xlabel("mean speed (m/s)")
        ax.set_ylabel("mean page service time (s)")
        ax.set_title(f"{scen}, {traffic}: HTTP page service time")
        ax.grid(axis="y", alpha=0.3)
        ax.legend()
        made.append(out.save_figure(fig, dest / f"http-{_slug(scen, traffic)}.png"))
    return made


def plugin_tables(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each metric plug-in's rows (``manetkit.experiment.plugins``) for the runs that
    measured it; plug-ins no run measured are left out."""
    out = {}
    for name, plugin in PLUGINS.items():
        rows = plugin.rows(docs)
        if rows:
            out[name] = rows
    return out


def plugin_markdown(tables: dict[str, list[dict[str, Any]]]) -> list[str]:
    md: list[str] = []
    for name, rows in tables.items():
        plugin = PLUGINS[name]
        out.show(rich_table(plugin.title, plugin.columns, rows))
        md += [f"## {plugin.title}", "", markdown_table(plugin.columns, rows), "", plugin.note, ""]
    return md


def convergence_markdown(docs: list[dict[str, Any]]) -> list[str]:
    """The runs whose warm-up ended at its cap: some pair had no route when the window
    opened (a partitioned pair, or a stack that had not converged)."""
    capped = [d for d in docs if (d.get("convergence") or {}).get("cap_hit")]
    if not capped:
        return []
    md = ["## Runs whose warm-up hit its cap", "",
          "Some pair of the traffic had no route at the cap (medium time); the window "
          "opened at `warmup_s` as in every run. Pairs without a route:", ""]  # fmt: skip
    for d in sorted(capped, key=lambda d: d["run"]):
        c = d["convergence"]
        missing = [k for k, t in (c.get("pairs") or {}).items() if t is None]
        md.append(f"- {d['run']}: cap {c['cap_s']:g} s; {', '.join(missing) or '?'}")
    return [*md, ""]


def _by_unique_name(docs: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each invalid run's reasons by its name; a run made again after an invalid try
    (``--redo-invalid``) can be invalid twice: its later tries get ``#2``, ``#3``..."""
    out: dict[str, list[str]] = {}
    for d in docs:
        name, k = d["run"], 1
        while name in out:
            k += 1
            name = f"{d['run']}#{k}"
        out[name] = validity.reasons(d)
    return out


def fidelity_summary(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """How many runs were valid, invalid (named, with why), or unrecorded."""
    by = validity.split(docs)
    return {
        "valid": len(by["valid"]),
        "invalid": _by_unique_name(by["invalid"]),
        "unrecorded": len(by["unrecorded"]),
    }


def make_report(results: Path) -> Path:
    """Write ``results/report/`` (README.md, summary.json, PNGs); print the tables."""
    docs = load_runs(results)
    if not docs:
        raise UserError(f"{results}: no finished runs in runs/")
    dest = results / "report"
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.png"):
        old.unlink()
    shown = table_runs(docs)
    b, h, w = bulk_rows(shown), http_rows(shown), wrk_rows(shown)
    failed = sorted(
        p.name.removesuffix(".error.json") for p in (results / "runs").glob("*.error.json")
    )
    md = [f"# Experiment report: {results.name}", "",
          f"{len(docs)} runs (`manetkit experiment report {results}`); the tables are "
          f"means (and medians) over the runs of a row, invalid runs left out "
          f"({len(docs) - len(shown)} of them: Fidelity below); the goals are medians with "
          "bootstrap intervals on the valid runs.", ""]  # fmt: skip
    spec = results / "spec.yaml"
    if b:
        cols = with_background(with_flows(BULK_COLS, b), b)
        out.show(rich_table("bulk TCP (iperf3; stream traffics)", cols, b))
        pngs = plot_goodput(b, dest) + plot_expected(shown, dest)
        md += ["## Bulk TCP", "", markdown_table(cols, b), "",
               "Expected: Holland & Vaidya eq. 3.1 over the medium's ground truth, summed over "
               "a run's flows; measured/expected is the mean of the runs' ratios; control: "
               "routing packets sent per data packet delivered (manetkit daemons' counters; "
               "babeld/batmand: nftables counters on radio0, with bytes); discovery: mean "
               "route discovery latency at the sources (proactive peers: none)."
               + (" " + MULTI_FLOW_NOTE if any(r["flows"] > 1 for r in b) else ""),
               "", *per_seed_markdown(shown),
               ] + [f"![{p.stem}]({p.name})" for p in pngs] + [""]  # fmt: skip
    if h:
        cols = with_background(HTTP_COLS, h)
        out.show(rich_table("HTTP sessions (Dyer & Boppana)", cols, h))
        pngs = plot_http(h, dest)
        md += ["## HTTP sessions", "", markdown_table(cols, h), "",
               "Service time: a page and its embedded objects, over every page of every "
               "client of the runs." + (" CBR delivered: the share of the CBR background's "
               "datagrams that arrived (mean over the runs)." if cols != HTTP_COLS else ""),
               ""] + [f"![{p.stem}]({p.name})" for p in pngs] + [""]  # fmt: skip
    if w:
        out.show(rich_table("HTTP load (wrk)", WRK_COLS, w))
        md += ["## HTTP load (wrk)", "", markdown_table(WRK_COLS, w), ""]
    variants = [r["variant"] for r in b + h]
    md += probesweep.markdown(shown, dest)
    extra = plugin_tables(shown)
    md += plugin_markdown(extra)
    found = goals.goals(docs)
    md += goals.goals_markdown(found, variants) + goals.papers_markdown(b, h)
    md += validity.markdown(docs) + convergence_markdown(shown)
    late = [(d["run"], d["late_s"]) for d in docs if (d.get("late_s") or 0) > 0]
    if late:
        md += ["## Runs whose traffic started late", "",
               "Their lab took longer to come up than `warmup_s`: their window saw later "
               "movement than the other stacks' at that seed.", "",
               *[f"- {name}: {s:g} s late" for name, s in late], ""]  # fmt: skip
    md += code_markdown(docs)
    if failed:
        md += ["## Failed runs", "", *[f"- {f} (runs/{f}.error.json)" for f in failed], ""]
    if spec.exists():
        md += ["## Spec", "", "```yaml", spec.read_text().rstrip(), "```", ""]
    (dest / "README.md").write_text("\n".join(md))
    out.write(dest, "summary", {"bulk": b, "http": h, "wrk": w, "failed": failed,
                                "goals": found, "probe_sweep": probesweep.rows(shown),
                                "fidelity": fidelity_summary(docs), "metrics": extra})  # fmt: skip
    out.console.print(f"written {dest / 'README.md'}")
    return dest
