"""Delivery-ratio curves: the JSON shape both curve sets share, and what is read off them.

A *curve set* is a JSON document ``{"source": ..., "curves": [curve, ...]}``; a curve is

    {"profile": "outdoor", "standard": "802.11b", "rate_mbps": 11, "frame_bytes": 1000,
     "psdu_bytes": 1028, "fading": "none" | "nakagami", "nakagami_m": null | 1.5,
     "points": [{"distance_m": 10, "sent": 1000, "received": 1000, "delivery": 1.0}, ...],
     "d50_m": 133.8, ...}

``frame_bytes`` is the 802.11 frame body (LLC/SNAP header + payload), ``psdu_bytes`` the
whole MPDU the error model sees (24-byte MAC header + body + 4-byte FCS). The ns-3 oracle
writes it; the lab medium's validation writes the same shape, and the comparison and the
plots take either.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

Curve = dict[str, Any]


def curve_key(curve: Curve) -> tuple[str, str, float, int, str]:
    """What identifies a curve across curve sets."""
    return (
        curve["profile"],
        curve["standard"],
        float(curve["rate_mbps"]),
        int(curve["frame_bytes"]),
        curve["fading"],
    )


def index(curve_set: dict[str, Any]) -> dict[tuple[str, str, float, int, str], Curve]:
    return {curve_key(c): c for c in curve_set["curves"]}


def trim(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The grid "from 10 m to where delivery is 0": every point up to the last one that
    received anything, and the first point after it."""
    last = max((i for i, p in enumerate(points) if p["received"] > 0), default=-1)
    return list(points[: last + 2])


def distance_at(points: Iterable[dict[str, Any]], level: float = 0.5) -> float | None:
    """The distance where delivery first falls to ``level`` (linear between the two grid
    points around the crossing); None if it never does on the grid."""
    prev = None
    for p in points:
        d, r = float(p["distance_m"]), float(p["delivery"])
        if r <= level:
            if prev is None:
                return d
            d0, r0 = prev
            return d0 + (d - d0) * (r0 - level) / (r0 - r)
        prev = (d, r)
    return None


def mean_abs_difference(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> float:
    """Mean |delivery_a - delivery_b| over the distances of ``a`` (``b`` beyond its own
    grid counts as 0: its curve ended where delivery was 0)."""
    other = {round(float(p["distance_m"]), 3): float(p["delivery"]) for p in b}
    diffs = [
        abs(float(p["delivery"]) - other.get(round(float(p["distance_m"]), 3), 0.0)) for p in a
    ]
    return sum(diffs) / len(diffs)


def gray_zone_ratio(curve_set: dict[str, Any], fading: str = "none") -> float:
    """How much farther 60-byte 1 Mbit/s frames reach (50 % delivery) than 1000-byte
    11 Mbit/s frames, on the outdoor 802.11b profile."""
    curves = index(curve_set)
    far = curves[("outdoor", "802.11b", 1.0, 60, fading)]
    near = curves[("outdoor", "802.11b", 11.0, 1000, fading)]
    d_far, d_near = distance_at(far["points"]), distance_at(near["points"])
    if d_far is None or d_near is None:
        raise ValueError("a gray-zone curve never falls to 50 % delivery on its grid")
    return d_far / d_near
