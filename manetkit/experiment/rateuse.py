"""At which rates a run's unicast frames went: the realistic medium's per-link rate use
over the window.

The realistic MAC's rate controllers (``manetkit.lab.medium.ratecontrol``, one per
transmitter) count every unicast attempt per destination and rate, and whether it was
acknowledged; the medium's ``stats`` command returns the counts since it started
(``rate_use``). Read at the window's start and end, their difference says which rates
carried the run's traffic: a flow stuck at 1 Mbit/s on a long hop is told apart from one
that lost its route. The ns2 profile has one rate and no such counts (``None``).
"""

from __future__ import annotations

from typing import Any

from manetkit.errors import UserError
from manetkit.lab.nodes import medium_request

Use = dict[str, dict[str, list[int]]]  # {"n3>n17": {"11": [attempts, acked]}}

TOP_LINKS = 10  # the busiest links, by acknowledged frames, kept per run


def read(lab: str) -> Use | None:
    """The medium's rate use now, or ``None`` (a medium without rate control, or one
    that did not answer: the run goes on without this record)."""
    try:
        reply = medium_request(lab, {"cmd": "stats"})
    except (OSError, ValueError, UserError):
        return None
    use = (reply.get("medium") or {}).get("rate_use")
    return use if isinstance(use, dict) else None


def window(a: Use | None, b: Use | None, top: int = TOP_LINKS) -> dict[str, Any] | None:
    """The window's rate use between readings ``a`` (start) and ``b`` (end):
    ``{totals: {rate: {attempts, acked}}, acked_share: {rate: fraction}, links: [{link,
    attempts: {rate: n}, acked: {rate: n}, delivery, mean_rate_mbps}]}`` with the
    ``top`` links that acknowledged most frames, busiest first."""
    if a is None or b is None:
        return None
    totals: dict[str, list[int]] = {}
    links = []
    for link, per_rate in b.items():
        before = a.get(link, {})
        attempts: dict[str, int] = {}
        acked: dict[str, int] = {}
        for rate, (n, ok) in per_rate.items():
            n0, ok0 = before.get(rate, (0, 0))
            if n - n0 < 0 or ok - ok0 < 0:
                raise ValueError(f"rate use of {link} at {rate} Mbit/s went down: two media?")
            if n - n0:
                attempts[rate] = n - n0
                acked[rate] = ok - ok0
                t = totals.setdefault(rate, [0, 0])
                t[0] += n - n0
                t[1] += ok - ok0
        if not attempts:
            continue
        sent, got = sum(attempts.values()), sum(acked.values())
        mean = sum(float(r) * k for r, k in acked.items()) / got if got else None
        links.append(
            {
                "link": link,
                "attempts": attempts,
                "acked": acked,
                "delivery": round(got / sent, 4),
                "mean_rate_mbps": None if mean is None else round(mean, 2),
            }
        )
    links.sort(key=lambda x: (-sum(x["acked"].values()), x["link"]))
    all_acked = sum(t[1] for t in totals.values())
    order = sorted(totals, key=float)  # rates as numbers: 1, 2, 5.5, 11
    return {
        "totals": {r: {"attempts": totals[r][0], "acked": totals[r][1]} for r in order},
        "acked_share": {r: round(totals[r][1] / all_acked, 4) if all_acked else 0.0 for r in order},
        "links": links[:top],
    }
