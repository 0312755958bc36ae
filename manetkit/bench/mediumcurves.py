"""The lab medium's delivery curves in the ns-3 oracle's curve-set shape, and how far they
are from ns-3's.

:func:`medium_curve_set` runs :func:`manetkit.lab.medium.curves.delivery_curve` (the
realistic MAC on a fake clock: one sender, a receiver every 10 m, non-unicast frames, no
shadowing, independent fading draws) for every :class:`~manetkit.bench.oracle.params.CurveSpec`
of the validation grid and writes the JSON shape of :mod:`manetkit.bench.oracle.curves`,
so ``manetkit bench medium --oracle ns3`` plots it beside ns-3's and
:func:`compare` applies the acceptance rule: the distance of 50 % delivery within 10 %
of ns-3's for every curve and the mean absolute difference of the delivery ratio at
most 5 percentage points (``tests/test_medium_vs_ns3.py`` against the committed
``tests/data/ns3/delivery.json``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from manetkit.bench.oracle import curves as oracle_curves
from manetkit.bench.oracle.params import STEP_M, CurveSpec
from manetkit.lab.medium.curves import delivery_curve, psdu_bytes
from manetkit.lab.medium.profiles import profile_defaults

D50_TOLERANCE = 0.10  # relative
MAD_TOLERANCE = 0.05  # delivery ratio


def medium_curve(spec: CurveSpec, distances: Iterable[float], frames: int, seed: int = 1):
    """One curve of the grid from the lab medium, in the oracle's curve shape."""
    dist = [float(d) for d in distances]
    prof = profile_defaults(spec.profile, spec.standard)
    psdu = psdu_bytes(spec.frame_bytes)
    ratios = delivery_curve(prof, spec.rate_mbps, psdu, dist, frames, spec.fading, seed)
    points = [
        {"distance_m": d, "sent": frames, "received": round(r * frames), "delivery": r}
        for d, r in zip(dist, ratios, strict=True)
    ]
    return {
        "profile": spec.profile,
        "standard": spec.standard,
        "rate_mbps": spec.rate_mbps,
        "frame_bytes": spec.frame_bytes,
        "psdu_bytes": psdu,
        "fading": "nakagami" if spec.fading else "none",
        "nakagami_m": prof.nakagami_m if spec.fading else None,
        "points": points,
        "d50_m": oracle_curves.distance_at(points),
    }


def grid_distances(spec: CurveSpec) -> list[float]:
    """The oracle's receivers for ``spec``: every 10 m up to its maximum distance."""
    n = int(round(spec.max_distance_m() / STEP_M))
    return [STEP_M * k for k in range(1, n + 1)]


def medium_curve_set(grid: list[CurveSpec], frames: int, seed: int = 1) -> dict[str, Any]:
    """The lab medium's curve set for ``grid`` (``frames`` per point)."""
    return {
        "source": "lab medium (manetkit.lab.medium.realistic, fake clock)",
        "curves": [medium_curve(s, grid_distances(s), frames, seed) for s in grid],
    }


def compare(reference: dict[str, Any], medium: dict[str, Any]) -> list[dict[str, Any]]:
    """Per curve of ``reference`` (ns-3's set): both distances of 50 % delivery, their
    relative difference, the mean absolute difference over the reference's grid, and
    whether both are within tolerance."""
    mine = oracle_curves.index(medium)
    rows = []
    for c in reference["curves"]:
        key = oracle_curves.curve_key(c)
        m = mine.get(key)
        if m is None:
            rows.append({"key": key, "ok": False, "why": "no medium curve"})
            continue
        d_ref = oracle_curves.distance_at(c["points"])
        d_med = oracle_curves.distance_at(m["points"])
        rel = None if d_ref is None or d_med is None else abs(d_med - d_ref) / d_ref
        mad = oracle_curves.mean_abs_difference(c["points"], m["points"])
        rows.append(
            {
                "key": key,
                "d50_reference_m": d_ref,
                "d50_medium_m": d_med,
                "d50_rel_diff": rel,
                "mean_abs_diff": mad,
                "ok": rel is not None and rel <= D50_TOLERANCE and mad <= MAD_TOLERANCE,
            }
        )
    return rows
