"""Every link of the medium in one reply (the control command ``links``), so a client
that draws the whole lab (``manetkit lab map``) asks once, not once per node.

A link is an unordered pair ``a``-``b`` that receives frames (the reception graph of the
current :class:`~manetkit.lab.medium.topology.Snapshot`, forced links included) with the
power ``a``'s frames arrive at ``b`` (``rssi_dbm``); the pairs within carrier-sense range
that cannot receive each other are listed apart (``cs``). Readers take unknown fields in
a link as optional quality figures (a propagation model with noise may add ``snr_db``
or a delivery ratio ``pdr``), so the reply can grow without breaking them.
"""

from __future__ import annotations

from typing import Any

from manetkit.lab.medium.propagation import TwoRayGround, watts_to_dbm
from manetkit.lab.medium.topology import Snapshot


def link_table(snap: Snapshot, prop: TwoRayGround) -> dict[str, Any]:
    """``{"links": [{"a", "b", "rssi_dbm"}], "cs": [[a, b]], "ranges": {...}}``."""
    links: list[dict[str, Any]] = []
    cs: list[list[str]] = []
    rx_sets = snap.rx_sets
    for i, row in enumerate(snap.rx):
        for j in row:
            if i < j or i not in rx_sets[j]:  # each pair once, also a one-way link
                links.append(
                    {"a": f"n{i + 1}", "b": f"n{j + 1}", "rssi_dbm": round(snap.dbm[i][j], 1)}
                )
    for i, row in enumerate(snap.cs):
        for j in row:
            if i < j and j not in rx_sets[i] and i not in rx_sets[j]:
                cs.append([f"n{i + 1}", f"n{j + 1}"])
    return {
        "links": links,
        "cs": cs,
        "ranges": {
            "rx_m": round(prop.range_m(), 1),
            "cs_m": round(prop.cs_range_m(), 1),
            "rx_threshold_dbm": round(watts_to_dbm(prop.rx_threshold_w), 1),
        },
    }
