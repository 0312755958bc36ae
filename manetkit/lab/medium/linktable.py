"""Every link of the medium in one reply (the control command ``links``), so a client
that draws the whole lab (``manetkit lab map``) asks once, not once per node.

A link is an unordered pair ``a``-``b`` that receives frames (the reception graph of the
current :class:`~manetkit.lab.medium.topology.Snapshot`, forced links included) with the
power ``a``'s frames arrive at ``b`` (``rssi_dbm``). Links are rows under a header,
``"fields": ["a", "b", "rssi_dbm"]``, ``"links": [["n1", "n2", -60.5], ...]``: compact
(the medium answers between frames and must stay quick; a 50-node lab's reply encodes in
a fraction of a millisecond), and open to more columns: a propagation model with noise
adds ``snr_db`` or a delivery ratio ``pdr`` to ``fields`` and every row, and a reader
maps each row by ``fields``, so it can grow without breaking readers. On request
(``"cs": true``) the pairs within carrier-sense range that cannot receive each other are
listed apart (``cs``), many more than the links in a dense lab.
"""

from __future__ import annotations

from typing import Any

from manetkit.lab.medium.channel import LinkBudget
from manetkit.lab.medium.propagation import TwoRayGround, watts_to_dbm
from manetkit.lab.medium.topology import Snapshot

FIELDS = ("a", "b", "rssi_dbm")
REALISTIC_FIELDS = ("a", "b", "rssi_dbm", "snr_db")


def link_table(snap: Snapshot, prop: TwoRayGround, cs: bool = False) -> dict[str, Any]:
    """``{"fields", "links", "ranges"}`` and with ``cs`` the ``cs`` pairs (module docstring)."""
    rows: list[list[Any]] = []
    rx_sets = snap.rx_sets
    dbm = snap.dbm
    names = [f"n{i + 1}" for i in range(len(snap.rx))]
    for i, row in enumerate(snap.rx):
        a, p = names[i], dbm[i]
        for j in row:
            if i < j or i not in rx_sets[j]:  # each pair once, also a one-way link
                rows.append([a, names[j], round(p[j], 1)])
    out: dict[str, Any] = {
        "fields": list(FIELDS),
        "links": rows,
        "ranges": {
            "rx_m": round(prop.range_m(), 1),
            "cs_m": round(prop.cs_range_m(), 1),
            "rx_threshold_dbm": round(watts_to_dbm(prop.rx_threshold_w), 1),
        },
    }
    if cs:
        out["cs"] = [
            [names[i], names[j]]
            for i, row in enumerate(snap.cs)
            for j in row
            if i < j and j not in rx_sets[i] and i not in rx_sets[j]
        ]
    return out


def realistic_link_table(
    lb: LinkBudget, ranges: dict[str, float], detect_dbm: float, cs: bool = False
) -> dict[str, Any]:
    """The same reply for a realistic profile (``channel.py``): the usable links of the
    ground truth with their mean power and mean SNR at ``b`` (no fading), ``ranges`` as
    the profile gives them (``rx_m``: the usable-link rule's reach without shadowing,
    ``cs_m``: where preambles are still detected, ``rx_threshold_dbm``: the usable
    level over the noise floor); ``cs``: pairs that detect each other's preambles on the
    mean power but have no usable link."""
    rows: list[list[Any]] = []
    names = [f"n{i + 1}" for i in range(len(lb.rx))]
    noise_dbm = [watts_to_dbm(w) for w in lb.noise_w]
    dbm = lb.dbm
    for i, row in enumerate(lb.rx):
        for j in row:
            if i < j or i not in lb.rx_sets[j]:
                p = dbm[i][j]
                rows.append([names[i], names[j], round(p, 1), round(p - noise_dbm[j], 1)])
    out: dict[str, Any] = {"fields": list(REALISTIC_FIELDS), "links": rows, "ranges": ranges}
    if cs:
        out["cs"] = [
            [names[i], names[j]]
            for i, row in enumerate(dbm)
            for j in range(i + 1, len(row))
            if j not in lb.rx_sets[i] and min(row[j], dbm[j][i]) >= detect_dbm
        ]
    return out
