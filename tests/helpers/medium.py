"""A sans-I/O medium on a fake clock, for tests: frames, a static world, run until t."""

from __future__ import annotations

from manetkit.lab.medium.airtime import Airtime
from manetkit.lab.medium.mac import Delivery, Medium
from manetkit.lab.medium.macbase import MacBase, TxStatus
from manetkit.lab.medium.mobility import Static, World
from manetkit.lab.medium.protocol import BROADCAST_MAC, node_mac


def frame(src: int, dst: int | None, size: int = 1514) -> bytes:
    d = BROADCAST_MAC if dst is None else node_mac(dst)
    return d + node_mac(src) + b"\x08\x00" + bytes(size - 14)


def medium(positions, **kw) -> Medium:
    airtime = Airtime(kw.pop("rate", 2.0), rts_threshold=kw.pop("rts_threshold", 2347))
    return Medium(World(Static(positions), len(positions)), airtime, **kw)


def run_events(
    m: MacBase, until: float, saturate: dict[int, int] | None = None, t: float = 0.0
) -> tuple[list[Delivery], list[TxStatus]]:
    """Advance the fake clock event by event until ``until``; keep the queues of the
    ``saturate`` senders (``{src: dst}``) at 10 frames. Returns the medium's Delivery and
    TxStatus events, each list in the order the medium produced them (any MAC profile)."""
    deliveries: list[Delivery] = []
    statuses: list[TxStatus] = []
    while True:
        for src, dst in (saturate or {}).items():
            while m.queue_length(src) < 10:
                m.transmit(t, src, frame(src, dst))
        nxt = m.get_timer()
        if nxt is None or nxt > until:
            break
        t = nxt
        m.handle_timer(t)
        while (ev := m.next_event()) is not None:
            if isinstance(ev, Delivery):
                deliveries.append(ev)
            else:
                statuses.append(ev)
    return deliveries, statuses


def run(m: Medium, until: float, saturate: dict[int, int] | None = None, t: float = 0.0):
    """:func:`run_events` without the ``at`` stamps: the deliveries ``(node, rssi_dbm,
    frame)`` and statuses ``(node, dst_mac, retries, ok, frame)``."""
    deliveries, statuses = run_events(m, until, saturate, t)
    return [tuple(d)[1:] for d in deliveries], [tuple(s)[1:] for s in statuses]


def drain(m: Medium) -> tuple[list, list]:
    """Every output the medium has, as (deliveries, statuses) without the ``at`` stamps."""
    deliveries, statuses = [], []
    while (ev := m.next_event()) is not None:
        (deliveries if isinstance(ev, Delivery) else statuses).append(tuple(ev)[1:])
    return deliveries, statuses
