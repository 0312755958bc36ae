"""Which runs may back a claim: the fidelity verdict each run carries.

A run's JSON holds the fidelity of its window (``fidelity``: ``manetkit.lab.fidelity``'s
``Fidelity.to_json()``: the medium's scheduling lag, frames lost outside the model, CPU
per process class, ``valid`` and the ``reasons`` it is not). A run is

* ``valid``: the emulation held (lag p99 and unmodelled drops within the spec's
  thresholds);
* ``invalid``: it did not; the run is listed with its reasons and left out of every
  table row and goal cell;
* ``unrecorded``: made before runs recorded their fidelity; it stays in the tables
  (marked) but never backs a goal.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any, Literal

Validity = Literal["valid", "invalid", "unrecorded"]


def of(doc: dict[str, Any]) -> Validity:
    f = doc.get("fidelity")
    if not isinstance(f, dict) or "valid" not in f:
        return "unrecorded"
    return "valid" if f["valid"] else "invalid"


def reasons(doc: dict[str, Any]) -> list[str]:
    return list((doc.get("fidelity") or {}).get("reasons") or [])


def split(docs: Iterable[dict[str, Any]]) -> dict[Validity, list[dict[str, Any]]]:
    """The runs by verdict (every key present)."""
    out: dict[Validity, list[dict[str, Any]]] = {"valid": [], "invalid": [], "unrecorded": []}
    for d in docs:
        out[of(d)].append(d)
    return out


def markdown(docs: list[dict[str, Any]]) -> list[str]:
    """The report's fidelity section: how many runs of each kind, every invalid run with
    why, and the window's lag and load of each, so a reader sees the emulation held."""
    by = split(docs)
    if not docs:
        return []
    md = [
        "## Fidelity",
        "",
        f"{len(by['valid'])} valid, {len(by['invalid'])} invalid, "
        f"{len(by['unrecorded'])} without a fidelity record (made before runs recorded "
        "one). Invalid runs (the medium's scheduling lag or frames lost outside the model "
        "beyond the spec's `fidelity:` thresholds) are left out of every table and goal "
        "cell; runs without a record stay in the tables but back no goal.",
        "",
    ]
    steal = {k: _median_steal(by[k]) for k in ("valid", "invalid")}
    if any(v is not None for v in steal.values()):
        md += [
            "Share of the machine's CPU time the hypervisor gave to other guests over the "
            f"window (host steal), median: valid runs {_ms(steal['valid'])} %, invalid runs "
            f"{_ms(steal['invalid'])} %.",
            "",
        ]
    if by["invalid"]:
        md += [
            "| run | lag p99 ms | lag max ms | load | host steal % | why |",
            "|---|---|---|---|---|---|",
        ]
        for d in sorted(by["invalid"], key=lambda d: d["run"]):
            f = d["fidelity"]
            load = f.get("load_avg") or [None]
            md.append(
                f"| {d['run']} | {_ms(f.get('lag_p99_ms'))} | {_ms(f.get('lag_max_ms'))} | "
                f"{_ms(load[0])} | {_ms(f.get('steal_pct'))} | {'; '.join(reasons(d))} |"
            )
        md.append("")
    return md


def _median_steal(docs: list[dict[str, Any]]) -> float | None:
    got = [
        f["steal_pct"] for d in docs if (f := d.get("fidelity")) and f.get("steal_pct") is not None
    ]
    return statistics.median(got) if got else None


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"
