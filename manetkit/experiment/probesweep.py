"""The ELFN probe interval sweep of a report (Holland & Vaidya section 5, Fig. 12).

When a results directory holds bulk runs of ELFN probe variants (``elfn-probe<S>``:
``spec.probe_interval``), the report gets, per (scenario, traffic, stack, speed) cell
that has them, a row per proxy: the runs without ELFN (``none``, ``plain``: the
baselines, Fig. 12's "TCP-Reno"), the bare ``elfn`` (its configured interval, 2 s by
default) and each probe interval, with goodput, expected throughput (eq. 3.1) and
measured as a percentage of expected, means over seeds; and a plot of that percentage vs
the probe interval with the baselines as lines (``probe-<scenario>-<traffic>.png``).
The paper's own values are quoted only where its text gives them (:func:`paper_markdown`:
it gives none for Fig. 12).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from manetkit.bench import report as out
from manetkit.experiment.spec import probe_interval

BASELINES = ("plain", "none")  # no ELFN; plain (the split proxy alone) preferred
Cell = tuple[str, str, str, float]  # scenario, traffic, stack, speed

# (column title, row field, format)
COLS = [("scenario", "scenario", "s"), ("traffic", "traffic", "s"), ("stack", "stack", "s"),
        ("speed m/s", "speed", "g"), ("proxy", "proxy", "s"),
        ("probe interval s", "probe_s", "g"), ("seeds", "seeds", "seeds"),
        ("goodput kbit/s", "goodput_kbps", ".1f"), ("expected kbit/s", "expected_kbps", ".1f"),
        ("measured/expected %", "percent_of_expected", ".0f"),
        ("goodput / baseline", "vs_baseline", ".2f")]  # fmt: skip


def _order(proxy: str) -> tuple[int, float]:
    """Baselines first, then the bare elfn, then the probe variants by interval."""
    if proxy in BASELINES:
        return (0, BASELINES.index(proxy))
    every = probe_interval(proxy)
    return (2, every) if every is not None else (1, 0.0)


def rows(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A row per proxy in each cell that has a probe variant (bulk runs only)."""
    groups: dict[Cell, dict[str, list[dict[str, Any]]]] = {}
    for d in docs:
        if d.get("bulk") is None:
            continue
        p = d["params"]
        cell = (p["scenario"], p["traffic"], p["stack"], float(p["speed"]))
        groups.setdefault(cell, {}).setdefault(p["proxy"], []).append(d)
    found = []
    for cell, by in sorted(groups.items()):
        if not any(probe_interval(proxy) is not None for proxy in by):
            continue
        kept = sorted(
            (p for p in by if p in BASELINES or p == "elfn" or probe_interval(p) is not None),
            key=_order,
        )
        base = next((p for p in BASELINES if p in by), None)
        base_kbps = out.mean(d["bulk"]["goodput_kbps"] for d in by[base]) if base else None
        for proxy in kept:
            runs = by[proxy]
            ratio = out.mean(d["bulk"]["measured_over_expected"] for d in runs)
            goodput = out.mean(d["bulk"]["goodput_kbps"] for d in runs)
            every = probe_interval(proxy)
            if proxy == "elfn":  # the interval its proxy config had (2 s unless set)
                every = out.mean(
                    (d.get("proxy_config") or {}).get("probe_interval", 2.0) for d in runs
                )
            found.append({
                "scenario": cell[0], "traffic": cell[1], "stack": cell[2], "speed": cell[3],
                "proxy": proxy, "probe_s": every, "baseline": proxy in BASELINES,
                "seeds": sorted(d["params"]["seed"] for d in runs),
                "goodput_kbps": goodput,
                "expected_kbps": out.mean(d["bulk"]["expected_kbps"] for d in runs),
                "measured_over_expected": ratio,
                "percent_of_expected": None if ratio is None else 100 * ratio,
                "per_seed_percent": {
                    str(d["params"]["seed"]): (
                        None if d["bulk"]["measured_over_expected"] is None
                        else round(100 * d["bulk"]["measured_over_expected"], 1)
                    ) for d in runs
                },
                "vs_baseline": goodput / base_kbps if base_kbps and goodput is not None else None,
            })  # fmt: skip
    return found


def table_markdown(found: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(h for h, _, _ in COLS) + " |", "|" + "---|" * len(COLS)]
    lines += [
        "| " + " | ".join(out.row_cell(r[f], fmt) for _, f, fmt in COLS) + " |" for r in found
    ]
    return "\n".join(lines)


def plot(found: list[dict[str, Any]], dest: Path) -> list[Path]:
    """Measured/expected (%) vs probe interval, a line per (stack, speed), the seeds' own
    points faint, the baselines as horizontal lines; one PNG per (scenario, traffic)."""
    plt = out.pyplot()
    made = []
    for scen, traffic in dict.fromkeys((r["scenario"], r["traffic"]) for r in found):
        sel = [r for r in found if (r["scenario"], r["traffic"]) == (scen, traffic)]
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        for k, (stack, speed) in enumerate(dict.fromkeys((r["stack"], r["speed"]) for r in sel)):
            mine = [r for r in sel if (r["stack"], r["speed"]) == (stack, speed)]
            color = f"C{k}"
            probes = [r for r in mine if probe_interval(r["proxy"]) is not None]
            pts = [(r["probe_s"], r["percent_of_expected"]) for r in probes
                   if r["percent_of_expected"] is not None]  # fmt: skip
            ax.plot([x for x, _ in pts], [y for _, y in pts], "o-", color=color,
                    label=f"{stack}+elfn, {speed:g} m/s (mean)")  # fmt: skip
            seeds = [(r["probe_s"], y) for r in probes for y in r["per_seed_percent"].values()
                     if y is not None]  # fmt: skip
            ax.scatter([x for x, _ in seeds], [y for _, y in seeds], s=10, color=color,
                       alpha=0.35)  # fmt: skip
            for j, r in enumerate(r for r in mine if r["baseline"]):
                if r["percent_of_expected"] is not None:
                    ax.axhline(r["percent_of_expected"], color=color, lw=1.2,
                               ls=("--", ":")[j % 2],
                               label=f"{stack}+{r['proxy']} (no ELFN), {speed:g} m/s")  # fmt: skip
        ax.set_xscale("log")
        ticks = sorted({r["probe_s"] for r in sel if probe_interval(r["proxy"]) is not None})
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.set_xlabel("ELFN probe interval (s, log scale)")
        ax.set_ylabel("measured / expected throughput (%)")
        ax.set_title(f"{scen}, {traffic}: ELFN probe interval (cf. Holland & Vaidya Fig. 12)",
                     fontsize=9)  # fmt: skip
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        made.append(out.save_figure(fig, dest / f"probe-{_slug(scen, traffic)}.png"))
    return made


def _slug(*parts: str) -> str:
    return "-".join("".join(c if c.isalnum() or c in "-_" else "_" for c in p) for p in parts)


def markdown(docs: list[dict[str, Any]], dest: Path) -> list[str]:
    """The report's section (table, plot, the paper beside it); empty without probe runs."""
    found = rows(docs)
    if not found:
        return []
    pngs = plot(found, dest)
    return [
        "## ELFN probe interval sweep (Holland & Vaidya Fig. 12)", "",
        table_markdown(found), "",
        "Measured/expected: the mean over seeds of each run's goodput / eq. 3.1's expected "
        "throughput (the same movement and pair at a seed for every proxy); goodput / "
        "baseline: the proxy's mean goodput over the mean goodput without ELFN ("
        + " or ".join(BASELINES) + ", the first the cell has). The bare elfn is at its "
        "configured interval (2 s unless the proxy config set another). manetkit's ELFN "
        "also redials at the daemon's route-up event, so the probe interval matters only "
        "while no route-up comes (docs/elfn-bus.md).", "",
        *[f"![{p.stem}]({p.name})" for p in pngs], "",
        *paper_markdown(),
    ]  # fmt: skip


def paper_markdown() -> list[str]:
    """What Holland & Vaidya's text says of their Fig. 12, beside ours: the figure's values
    are plotted only, and are not read off the plot."""
    return [
        "Holland & Vaidya (section 6, Fig. 12: 'Performance comparison between basic "
        "TCP-Reno and TCP-Reno with ELFN using varying probe intervals'; ns-2, DSR, rwp-30, "
        "means over 50 patterns of one 120 s TCP-Reno connection) give Fig. 12's values "
        "only as a plot: no percentage is printed in the text, and none is read off the "
        "plot here. The text names two intervals, 2 s (Fig. 11's ELFN) and 30 s, and says "
        "throughput is 'critically dependent' on the probe interval: with 30 s probes it "
        "'will degrade below that of standard TCP', and 'intuitively' too short an "
        "interval congests the network with probes. The text does not say at which speeds "
        "Fig. 12 was made (their patterns run at mean 2, 10, 20 and 30 m/s).",
        "",
    ]
