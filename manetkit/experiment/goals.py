"""The goals scored on the runs themselves, and the papers' figures beside ours.

:func:`goals` scores every (scenario, traffic, speed, congestion control) cell of a
results directory on its **valid** runs (:mod:`~manetkit.experiment.validity`): each
side's figure is the median over its runs, the comparison a percentile-bootstrap 95 %
interval (:mod:`~manetkit.stats`), and a goal is met only when the interval's
lower end clears the target and each side has at least :data:`MIN_RUNS` valid runs over
at least :data:`MIN_SEEDS` seeds (5 seeds x 2 repeats):

1. bulk TCP goodput of the best manetkit stack (dsr/aodv/smr, any proxy: the one with the
   highest median in the cell) >= 1.3x each peer's at 10 and 20 m/s, each peer at its
   best profile in that cell (``babeld``, ``babeld-fast``, ``babeld-mobile``... all
   count as babeld: ``spec.STACK_VARIANTS``);
2. the best manetkit stack's measured / expected throughput (Holland & Vaidya eq. 3.1)
   >= 80 % at 20 m/s (its per-run ratios' median);
3. HTTP page service time of the best manetkit stack (lowest median of the runs' mean
   service times) >= 30 % lower than each peer's at its best profile.

Beside each comparison's interval the table prints the seed-paired one
(:func:`~manetkit.stats.paired_ratio_ci`: whole seeds drawn for both sides at
once); the verdict stays on the independent interval, the rule the goals were set with.

``papers_markdown`` writes the papers' own figures beside the report's rows. Only numbers
printed in the papers' text or tables are quoted; values that exist only as plotted curves
are not read off the plots, and the report says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from manetkit import stats
from manetkit.bench import report as out
from manetkit.experiment import validity
from manetkit.experiment.spec import MANETKIT_STACKS as MANETKIT
from manetkit.experiment.spec import PEER_STACKS as PEERS
from manetkit.experiment.spec import STACK_VARIANTS, lab_stack

GOODPUT_RATIO = 1.3  # best manetkit >= 1.3x each peer (at its best profile)
EXPECTED_FRACTION = 0.8  # >= 80 % of expected at 20 m/s
HTTP_REDUCTION = 0.3  # service time >= 30 % lower than each peer's
MIN_RUNS = 10  # valid runs a side needs in a goal cell
MIN_SEEDS = 5  # distinct seeds (movement patterns) among them

# Anantharaman et al. (anantharaman-atra.txt) Table I (TCP/DSR/
# 802.11 "Default" and ELFN) and Table II (ATRA): mean throughput in kbit/s; ns-2, 100
# nodes in 1000 x 1000 m (section II.A), 50 runs; 1 and 25 connections; by mean speed (m/s).
ANANTHARAMAN: dict[int, dict[str, dict[int, float]]] = {
    1: {
        "DSR (Table I)": {1: 393.5, 10: 275.7, 20: 174.8},
        "DSR+ELFN (Table I)": {1: 398.2, 10: 301.9, 20: 210.4},
        "ATRA (Table II)": {1: 395.1, 10: 389.0, 20: 329.3},
    },
    25: {
        "DSR (Table I)": {1: 33.4, 10: 26.5, 20: 20.8},
        "DSR+ELFN (Table I)": {1: 34.3, 10: 17.5, 20: 8.3},
        "ATRA (Table II)": {1: 43.5, 10: 37.9, 20: 31.4},
    },
}

Cell = tuple[str, str, float, str]  # scenario, traffic, speed, congestion control


def stack_of(variant: str) -> str:
    """The lab stack of a report variant: ``dsr+fixed-rto`` -> ``dsr``, ``babeld-mobile``
    -> ``babeld`` (a peer's profile variants are that peer)."""
    return lab_stack(variant.split("+", 1)[0].split("@", 1)[0])


def lab_stack_of(params: dict[str, Any]) -> str:
    """The lab stack of a run: recorded in its params (a spec variant's: ``dsr-atra`` ->
    ``dsr``), else from its stack's name (runs made before runs recorded it)."""
    return params.get("lab_stack") or stack_of(params["stack"])


def variant(params: dict[str, Any]) -> str:
    """``dsr`` or ``dsr+elfn``: the stack, and the proxy mode when there is one; ``@reno``
    when the spec ran several congestion controls."""
    v = params["stack"] + ("" if params["proxy"] == "none" else f"+{params['proxy']}")
    return v + (f"@{params['cc']}" if params.get("cc_axis") else "")


def cell_of(doc: dict[str, Any]) -> Cell:
    p = doc["params"]
    return (p["scenario"], p["traffic"], float(p["speed"]), str(p.get("cc") or "-"))


def run_service_s(doc: dict[str, Any]) -> float | None:
    """A HTTP run's mean page service time (its completed pages)."""
    times = [pg["service_s"] for pair in doc["http"]["pairs"] for pg in pair["pages"] if pg["ok"]]
    return sum(times) / len(times) if times else None


def _values(docs: list[dict[str, Any]], get: Callable[[dict[str, Any]], Any]) -> dict[str, list]:
    """Per variant: (value, seed) of each run with a value."""
    by: dict[str, list] = {}
    for d in docs:
        v = get(d)
        if v is not None:
            by.setdefault(variant(d["params"]), []).append((float(v), d["params"]["seed"]))
    return by


def _median(xs: list[tuple[float, int]]) -> float:
    v = sorted(x for x, _ in xs)
    k = len(v) // 2
    return v[k] if len(v) % 2 else (v[k - 1] + v[k]) / 2


def _kinds(docs: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Each variant's lab stack."""
    return {variant(d["params"]): lab_stack_of(d["params"]) for d in docs}


def _best(
    by: dict[str, list], stacks: Iterable[str], kinds: dict[str, str], low: bool = False
) -> str | None:
    got = [v for v in by if kinds.get(v, stack_of(v)) in tuple(stacks)]
    if not got:
        return None
    return (min if low else max)(got, key=lambda v: _median(by[v]))


def _enough(xs: list[tuple[float, int]]) -> bool:
    return len(xs) >= MIN_RUNS and len({s for _, s in xs}) >= MIN_SEEDS


def _sides(xs: list[tuple[float, int]]) -> str:
    return f"{len(xs)} runs, {len({s for _, s in xs})} seeds"


def _verdict(ci: stats.Interval | None, target: float, sides: list[list]) -> str:
    if ci is None:
        return "not measured"
    short = [s for s in sides if not _enough(s)]
    if short:
        return (
            f"not scored: {min(len(s) for s in short)} valid runs "
            f"(needs {MIN_RUNS} over {MIN_SEEDS} seeds)"
        )
    return "met" if ci.clears(target) else "not met"


def _paired(
    pair: Callable[..., stats.Interval],
    ours: list[tuple[float, int]],
    theirs: list[tuple[float, int]],
) -> stats.Interval | None:
    """The seed-paired interval, or None when the sides share fewer than two seeds."""
    try:
        return pair(ours, theirs)
    except ValueError:
        return None


def _shown(fmt: str, x: float) -> str:
    """A figure in the table's format; an infinite ratio (a side's median 0) as "inf"."""
    return fmt.format(x) if math.isfinite(x) else ("-inf" if x < 0 else "inf")


def _entry(goal: str, cell: Cell, ours: str | None, theirs: str | None,
           ci: stats.Interval | None, shown: str, met: str,
           excluded: dict[str, int], paired: stats.Interval | None = None,
           ) -> dict[str, Any]:  # fmt: skip
    scen, traffic, speed, cc = cell
    return {
        "goal": goal, "scenario": scen, "traffic": traffic, "speed": speed, "cc": cc,
        "ours": ours, "theirs": theirs,
        "measured": _shown(shown, ci.estimate) if ci is not None else "-",
        "ci95": f"[{_shown(shown, ci.low)}, {_shown(shown, ci.high)}]" if ci is not None else "-",
        "interval": ci.to_json() if ci is not None else None,
        "paired_ci95": f"[{_shown(shown, paired.low)}, {_shown(shown, paired.high)}]"
        if paired is not None else "-",
        "paired_interval": paired.to_json() if paired is not None else None,
        "met": met, "excluded": excluded,
    }  # fmt: skip


def _cells(docs: Iterable[dict[str, Any]], part: str) -> dict[Cell, list[dict[str, Any]]]:
    cells: dict[Cell, list[dict[str, Any]]] = {}
    for d in docs:
        if d.get(part) is not None:
            cells.setdefault(cell_of(d), []).append(d)
    return dict(sorted(cells.items()))


def _flows(docs: list[dict[str, Any]]) -> int:
    return max((len(d["bulk"]["flows"]) for d in docs), default=1)


def goals(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per goal, cell and peer it applies to, scored on the cell's valid runs
    (``excluded``: how many invalid and unrecorded runs the cell had)."""
    found: list[dict[str, Any]] = []
    for cell, sel in _cells(docs, "bulk").items():
        ok = validity.split(sel)
        excluded = {"invalid": len(ok["invalid"]), "unrecorded": len(ok["unrecorded"])}
        valid = ok["valid"]
        speed = cell[2]
        by = _values(valid, lambda d: d["bulk"]["goodput_kbps"])
        kinds = _kinds(sel)
        ran = set(kinds.values())  # valid or not
        ours = _best(by, MANETKIT, kinds)
        if speed in (10, 20):
            for peer in PEERS:
                theirs = _best(by, (peer,), kinds)
                if peer not in ran and not ran & set(MANETKIT):
                    continue
                ci = stats.ratio_ci([x for x, _ in by[ours]], [x for x, _ in by[theirs]]) \
                    if ours and theirs else None  # fmt: skip
                paired = _paired(stats.paired_ratio_ci, by[ours], by[theirs]) if ci else None
                found.append(_entry(
                    f"TCP goodput >= {GOODPUT_RATIO:g}x {peer}", cell,
                    ours and f"{ours} median {_median(by[ours]):.0f} kbit/s ({_sides(by[ours])})",
                    theirs and f"{theirs} median {_median(by[theirs]):.0f} kbit/s "
                    f"({_sides(by[theirs])})",
                    ci, "{:.2f}x",
                    _verdict(ci, GOODPUT_RATIO, [by[ours], by[theirs]] if ci else []),
                    excluded, paired,
                ))  # fmt: skip
        if speed == 20 and ours is not None:
            frac = _values(valid, lambda d: d["bulk"]["measured_over_expected"]).get(ours, [])
            ci = stats.median_ci([x for x, _ in frac]) if frac else None
            met = _verdict(ci, EXPECTED_FRACTION, [frac])
            flows = _flows(sel)
            if flows > 1 and ci is not None:
                # eq. 3.1's T_i are one flow alone: flows at once share the medium, and
                # the sum of their bounds is not a target (Holland & Vaidya: one flow)
                met = f"not scored ({flows} flows: the sum of one-flow bounds)"
            found.append(_entry(
                f"measured >= {EXPECTED_FRACTION:.0%} of expected (eq. 3.1)", cell,
                f"{ours} ({_sides(frac)})", "expected (eq. 3.1)", ci, "{:.0%}", met, excluded,
            ))  # fmt: skip
    for cell, sel in _cells(docs, "http").items():
        ok = validity.split(sel)
        excluded = {"invalid": len(ok["invalid"]), "unrecorded": len(ok["unrecorded"])}
        by = _values(ok["valid"], run_service_s)
        kinds = _kinds(sel)
        ran = set(kinds.values())
        ours = _best(by, MANETKIT, kinds, low=True)
        for peer in PEERS:
            theirs = _best(by, (peer,), kinds, low=True)
            if peer not in ran and not ran & set(MANETKIT):
                continue
            ci = stats.reduction_ci([x for x, _ in by[ours]], [x for x, _ in by[theirs]]) \
                if ours and theirs else None  # fmt: skip
            paired = _paired(stats.paired_reduction_ci, by[ours], by[theirs]) if ci else None
            found.append(_entry(
                f"HTTP page service time >= {HTTP_REDUCTION:.0%} lower than {peer}'s", cell,
                ours and f"{ours} median {_median(by[ours]):.2f} s ({_sides(by[ours])})",
                theirs and f"{theirs} median {_median(by[theirs]):.2f} s ({_sides(by[theirs])})",
                ci, "{:+.0%}", _verdict(ci, HTTP_REDUCTION, [by[ours], by[theirs]] if ci else []),
                excluded, paired,
            ))  # fmt: skip
    return found


def goals_markdown(found: list[dict[str, Any]], variants: Iterable[str] = ()) -> list[str]:
    """The Goals table; ``variants`` (the runs' variants) says whether the peers ran at
    several profiles, and the text then says each counts at its best."""
    if not found:
        return []
    profiles = sorted({v for v in variants if v.split("+", 1)[0] in STACK_VARIANTS})
    per_profile = (
        f" Each peer counts at its best profile in the cell: {', '.join(profiles)} ran "
        "beside the bare peers (their operator profile unless the spec's set: says "
        "otherwise)."
        if profiles
        else ""
    )
    lines = [
        "## Goals",
        "",
        "Scored on each cell's valid runs only (invalid runs and runs without a fidelity "
        "record are left out: 'left out' says how many). Best manetkit stack = the "
        "manetkit variant (dsr/aodv/smr, any proxy) with the best median in that cell; "
        "each peer likewise among its profiles. 'measured' is the ratio of the medians "
        "(HTTP: how much lower the best manetkit median service time is; negative: "
        "higher), 'CI 95 %' its percentile-bootstrap interval (each side's runs "
        f"resampled, {stats.RESAMPLES} resamples, seed {stats.SEED}); a goal is met only "
        f"when the interval's lower end clears the target and each side has >= "
        f"{MIN_RUNS} valid runs over >= {MIN_SEEDS} seeds.{per_profile} 'seed-paired' is "
        "the interval with whole seeds drawn for both sides at once (both ran the same "
        "movement patterns); with few seeds it is too narrow, and no verdict rests on it.",
        "",
        "| goal | scenario | traffic | speed m/s | cc | best manetkit | compared with | "
        "measured | CI 95 % | seed-paired | left out (invalid/unrecorded) | met |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for g in found:
        ex = g.get("excluded") or {}
        lines.append(
            f"| {g['goal']} | {g['scenario']} | {g['traffic']} | {g['speed']:g} | "
            f"{g.get('cc', '-')} | {g['ours'] or '-'} | {g['theirs'] or '-'} | "
            f"{g['measured']} | {g['ci95']} | {g.get('paired_ci95', '-')} | "
            f"{ex.get('invalid', 0)}/{ex.get('unrecorded', 0)}"
            f" | {g['met']} |"
        )
    return [*lines, ""]


def _speed_table(
    rows: list[dict[str, Any]],
    cell: Callable[[list[dict[str, Any]]], str],
    paper: dict[str, dict[int, float]] | None = None,
) -> list[str]:
    """A row per speed, a column per variant (``cell`` of its rows at that speed), after
    the ``paper``'s columns (kbit/s by integer speed) when given."""
    speeds = sorted({r["speed"] for r in rows})
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    paper = paper or {}
    head = [*paper, *(f"ours: {v}" if paper else v for v in variants)]
    md = ["| speed m/s | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
    for s in speeds:
        theirs = [out.cell(t.get(int(s)) if s == int(s) else None, ".1f") for t in paper.values()]
        mine = [cell([r for r in rows if r["variant"] == v and r["speed"] == s]) for v in variants]
        md.append(f"| {s:g} | " + " | ".join(theirs + mine) + " |")
    return [*md, ""]


def _pages(rs: list[dict[str, Any]]) -> str:
    if not rs:
        return "-"
    r = rs[0]
    return f"{out.cell(r['service_mean_s'], '.2f')} ({r['pages_completed']}/{r['pages_failed']})"


def papers_markdown(bulk: list[dict[str, Any]], http: list[dict[str, Any]]) -> list[str]:
    """The papers' figures beside ours (a section of the report's README)."""
    if not bulk and not http:
        return []
    md = ["## Beside the papers", ""]
    for flows, table in ANANTHARAMAN.items():
        ours = [r for r in bulk if r["flows"] == flows]
        if not ours:
            continue
        # the paper's 25-connection figures are per flow (Table I: 33.4 kbit/s at 1 m/s,
        # ~835 in all): ours likewise, the run's sum over its flows
        field = "goodput_kbps" if flows == 1 else "goodput_per_flow_kbps"
        md += [
            f"TCP goodput, {flows} flow{'s' if flows > 1 else ''} (kbit/s): Anantharaman et "
            f"al. Tables I and II ({flows} connection{'s' if flows > 1 else ''}; ns-2, DSR, "
            "100 nodes in 1000 x 1000 m, "
            "2 Mbit/s 802.11) beside ours (means over seeds"
            + ("; theirs and ours are the mean PER FLOW: a run's goodput summed over its "
               f"flows, over {flows})" if flows > 1 else ")")
            + ". The paper's absolute figures "
            "come from another simulator and area; compare the trend with speed and the "
            "ratios between rows.",
            "",
        ]  # fmt: skip
        md += _speed_table(
            ours, lambda rs, f=field: out.cell(rs[0].get(f) if rs else None, ".1f"), table
        )
    if bulk:
        md += [
            "Measured / expected throughput (eq. 3.1). Holland & Vaidya (section 4, Fig. 3(a) "
            "and Fig. 4, 50 patterns of rwp-30, TCP-Reno over DSR) print no mean ratio in "
            "their text: every pattern's point lies below the diagonal (measured < expected), "
            "throughput 'drops sharply' from 2 to 10 m/s and 'decreases only slightly' from 10 "
            "to 20 m/s; section 5.1 shows a pattern with expected 694 kbit/s and measured 0 at "
            "30 m/s; with ELFN the points move closer to the diagonal (section 6, Fig. 11). "
            "Ours, mean of the runs' ratios:",
            "",
        ]
        md += _speed_table(
            bulk,
            lambda rs: out.cell(out.mean(r["measured_over_expected"] for r in rs), ".2f"),
        )
    if http:
        md += [
            "HTTP page service time. Dyer & Boppana (section III: 50 nodes, 1000 x 1000 m, "
            "speeds uniform 0-20 m/s, 10 clients and 3 servers, think time truncated at 15 s, "
            "100 s measured after 100 s warm-up, 50 patterns) give their service times only "
            "as plots (Figs. 6-8). Their text (section IV) reports: the proactive distance "
            "vector ADV had shorter service times than AODV and DSR for every client-server "
            "pair (Fig. 8); TCP Reno-F cut DSR's mean service time by 16 % without and 22 % "
            "with CBR background traffic, AODV's by 6 % (Figs. 6, 7). Ours, mean page "
            "service time in s (pages done / failed over all seeds):",
            "",
        ]
        md += _speed_table(http, _pages)
    return md
