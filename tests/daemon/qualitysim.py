"""Engines on links of graded quality, with a fake clock: gray zones and lossy links.

:class:`QualitySim` is :class:`~tests.daemon.enginesim.Sim` with a quality per link, as
the realistic medium makes them (docs/medium.md): a broadcast at the basic rate gets
through with probability ``bcast``; a unicast frame at the data rate makes up to 8
attempts (802.11's retry limit), each getting through (frame and ACK) with
probability ``unicast``, and fails back to the sender as ``TxFailed`` after the 8th;
the received signal is ``dbm``. Like the daemon's link sensing, every node sends a
neighbour beacon every second (``BeaconHeard`` at the neighbours that hear it) and
every 0.2 s a poll reports, per neighbour, the mean signal of what was heard
(``SignalSample``) and the transmit counters since the last poll (``TxReport``).

A gray link (Lundgren et al. 2002): ``Quality(bcast=0.83, unicast=0.02, dbm=-92)``;
a good one: ``Quality(1.0, 0.97, -75)``.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from ipaddress import IPv4Address

from manetkit.daemon.engines.base import (
    BeaconHeard,
    RoutingEngine,
    SendFrame,
    SignalSample,
    TxFailed,
    TxReport,
)
from tests.daemon.enginesim import Frame, Sim, mac_of

ATTEMPTS = 8  # the first try and 7 retries
POLL_S = 0.2
BEACON_S = 1.0


@dataclass(frozen=True, slots=True)
class Quality:
    bcast: float
    unicast: float
    dbm: float


GOOD = Quality(1.0, 0.97, -75.0)
GRAY = Quality(0.83, 0.02, -92.0)


class QualitySim(Sim):
    def __init__(
        self,
        engines: dict[IPv4Address, RoutingEngine],
        links: dict[tuple[IPv4Address, IPv4Address], Quality],
        seed: int = 1,
        reports: bool = True,
    ) -> None:
        super().__init__(engines, list(links))
        self.quality = {frozenset(k): q for k, q in links.items()}
        self.rng = random.Random(seed)
        self.reports = reports
        # (sender, receiver) -> [attempts, delivered] since the last poll
        self.tx: dict[tuple[IPv4Address, IPv4Address], list[int]] = defaultdict(lambda: [0, 0])
        self.heard: dict[tuple[IPv4Address, IPv4Address], int] = defaultdict(int)
        self.seq = 0
        if reports:
            self._at(0.05, self._beacons)
            self._at(0.1, self._poll)

    def q(self, a: IPv4Address, b: IPv4Address) -> Quality | None:
        return self.quality.get(frozenset((a, b)))

    def set_quality(self, a: IPv4Address, b: IPv4Address, q: Quality | None) -> None:
        if q is None:
            self.quality.pop(frozenset((a, b)), None)
            self.unlink(a, b)
        else:
            self.quality[frozenset((a, b))] = q
            self.link(a, b)

    # -- the air
    def _transmit(self, node: IPv4Address, a: SendFrame) -> None:
        self.frames.append(Frame(self.now, node, a.next_hop, a.packet))
        when = self.now + self.latency
        if a.next_hop is None:
            for nb in sorted(self.adj[node]):
                q = self.q(node, nb)
                if q is not None and self.rng.random() < q.bcast:
                    self.heard[(nb, node)] += 1
                    self._at(when, self._receiver(nb, a.packet, node))
            return
        nh, pkt = a.next_hop, a.packet
        q = self.q(node, nh) if nh in self.adj[node] else None
        tried = 0
        ok = False
        while tried < ATTEMPTS and not ok:
            tried += 1
            ok = q is not None and self.rng.random() < q.unicast
        stats = self.tx[(node, nh)]
        stats[0] += tried
        stats[1] += int(ok)
        if ok:
            self.heard[(nh, node)] += 1
            self._at(when, self._receiver(nh, pkt, node))
            return

        def fail() -> None:
            self.engines[node].link_event(self.now, TxFailed(nh, pkt))
            self._drain(node)

        self._at(when, fail)

    def _receiver(self, nb: IPv4Address, packet: bytes, sender: IPv4Address):
        """A frame arrives with the link's signal (as a radio would give it)."""
        q = self.q(sender, nb)
        dbm = q.dbm if q is not None else self.rssi_dbm

        def rx() -> None:
            self.engines[nb].receive_frame(self.now, packet, mac_of(sender), dbm)
            self._drain(nb)

        return rx

    # -- link sensing
    def _beacons(self) -> None:
        self.seq += 1
        for node in sorted(self.engines):
            for nb in sorted(self.adj[node]):
                q = self.q(node, nb)
                if q is not None and self.rng.random() < q.bcast:
                    self.heard[(nb, node)] += 1
                    self.link_event(nb, BeaconHeard(node, self.seq, BEACON_S))
        self._at(self.now + BEACON_S, self._beacons)

    def _poll(self) -> None:
        for (rx, tx), n in sorted(self.heard.items()):
            q = self.q(rx, tx)
            if n and q is not None:
                self.link_event(rx, SignalSample(tx, q.dbm + self.rng.uniform(-2, 2), self.now))
        self.heard.clear()
        for (tx, rx), (att, ok) in sorted(self.tx.items()):
            if att:
                self.link_event(tx, TxReport(rx, att, ok))
        self.tx.clear()
        self._at(self.now + POLL_S, self._poll)

    def run(self, until: float | None = None, duration: float | None = None, **kw) -> None:
        super().run(until=until, duration=duration, max_steps=kw.get("max_steps", 2_000_000))


def hostpart(a: IPv4Address) -> int:
    return int(str(a).rsplit(".", 1)[1])


def mac(a: IPv4Address) -> bytes:
    return mac_of(a)
