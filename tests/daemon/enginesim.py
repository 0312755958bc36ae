"""An in-process network of routing engines with a fake clock (protocol-agnostic).

Engines are driven only through the base API (``manetkit.daemon.engines.base``):
``SendFrame`` goes to neighbours by an adjacency set (broadcast: every neighbour;
unicast: the named neighbour if linked, else ``TxFailed(neighbour, packet)`` back to the
sender, as 802.11's retry limit would), ``handle_timer`` runs at ``get_timer()``, and
everything happens in time order on a fake clock: no sleeping, fully deterministic.

Every transmitted frame is logged (``frames``) so tests can decode them with tshark.
With ``promiscuous=True`` a unicast frame is also handed to the sender's other
neighbours (overhearing) whose engine sets ``wants_overheard``, through
``overhear_frame`` (as the daemon's shell does), which DSR's route shortening uses.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address

from manetkit.daemon.engines.base import (
    Deliver,
    Dropped,
    LinkDown,
    LinkEvent,
    LinkUp,
    Notify,
    RoutingEngine,
    SendFrame,
    TxFailed,
)


def mac_of(addr: IPv4Address) -> bytes:
    return b"\x02\x00" + addr.packed


BROADCAST_MAC = b"\xff" * 6


@dataclass(slots=True)
class Frame:
    time: float
    sender: IPv4Address
    next_hop: IPv4Address | None  # None = broadcast
    packet: bytes

    def ether(self, ethertype: int = 0x88B5) -> bytes:
        dst = BROADCAST_MAC if self.next_hop is None else mac_of(self.next_hop)
        return dst + mac_of(self.sender) + ethertype.to_bytes(2, "big") + self.packet


class Sim:
    def __init__(
        self,
        engines: dict[IPv4Address, RoutingEngine],
        links: Iterable[tuple[IPv4Address, IPv4Address]] = (),
        latency: float = 0.001,
        promiscuous: bool = False,
        rssi_dbm: float = -60.0,
    ) -> None:
        self.engines = engines
        self.latency = latency
        self.promiscuous = promiscuous
        self.rssi_dbm = rssi_dbm
        self.now = 0.0
        self.adj: dict[IPv4Address, set[IPv4Address]] = defaultdict(set)
        for a, b in links:
            self.adj[a].add(b)
            self.adj[b].add(a)
        self.frames: list[Frame] = []
        self.delivered: dict[IPv4Address, list[bytes]] = defaultdict(list)
        self.notified: dict[IPv4Address, list[Notify]] = defaultdict(list)
        self.dropped: dict[IPv4Address, list[Dropped]] = defaultdict(list)
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self.frame_filter: Callable[[Frame], bool] | None = None  # False = lost on the air

    # -- topology
    def link(self, a: IPv4Address, b: IPv4Address, notify: bool = False) -> None:
        self.adj[a].add(b)
        self.adj[b].add(a)
        if notify:
            self.link_event(a, LinkUp(b))
            self.link_event(b, LinkUp(a))

    def unlink(self, a: IPv4Address, b: IPv4Address, notify: bool = False) -> None:
        self.adj[a].discard(b)
        self.adj[b].discard(a)
        if notify:
            self.link_event(a, LinkDown(b))
            self.link_event(b, LinkDown(a))

    # -- inputs
    def send(self, node: IPv4Address, packet: bytes) -> None:
        """An app on ``node`` sends ``packet`` (through its TUN) now."""
        self.engines[node].send_local(self.now, packet)
        self._drain(node)

    def link_event(self, node: IPv4Address, event: LinkEvent) -> None:
        self.engines[node].link_event(self.now, event)
        self._drain(node)

    def rediscover(self, node: IPv4Address, dst: IPv4Address) -> bool:
        """The event socket's ``discover`` command on ``node`` now (an ELFN probe)."""
        restarted = self.engines[node].rediscover(self.now, dst)
        self._drain(node)
        return restarted

    def inject(self, node: IPv4Address, packet: bytes, src_mac: bytes | None = None) -> None:
        """A raw frame payload arrives at ``node`` now (malformed-input tests)."""
        self.engines[node].receive_frame(self.now, packet, src_mac, self.rssi_dbm)
        self._drain(node)

    # -- clock
    def _at(self, when: float, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (when, self._seq, fn))

    def _next_timer(self) -> tuple[float, IPv4Address] | None:
        best = None
        for addr, eng in self.engines.items():
            t = eng.get_timer()
            if t is not None and (best is None or t < best[0]):
                best = (t, addr)
        return best

    def run(
        self, until: float | None = None, duration: float | None = None, max_steps: int = 200_000
    ) -> None:
        """Process frames and timers in time order up to ``until`` (or ``now + duration``;
        10 s of simulated time when neither is given: engines keep long timers, such as
        cache expiry, so "until nothing is pending" could be minutes away)."""
        if until is None:
            until = self.now + (10.0 if duration is None else duration)
        for _ in range(max_steps):
            timer = self._next_timer()
            qt = self._queue[0][0] if self._queue else None
            candidates = [t for t in (qt, timer[0] if timer else None) if t is not None]
            if not candidates:
                break
            t = min(candidates)
            if until is not None and t > until:
                break
            self.now = max(self.now, t)
            if qt is not None and qt <= t:
                _, _, fn = heapq.heappop(self._queue)
                fn()
            else:
                assert timer is not None
                self.engines[timer[1]].handle_timer(self.now)
                self._drain(timer[1])
        else:
            raise RuntimeError("simulation did not settle (max_steps)")
        if until is not None:
            self.now = max(self.now, until)

    # -- outputs
    def _drain(self, node: IPv4Address) -> None:
        eng = self.engines[node]
        while (a := eng.next_event()) is not None:
            if isinstance(a, SendFrame):
                self._transmit(node, a)
            elif isinstance(a, Deliver):
                self.delivered[node].append(a.packet)
            elif isinstance(a, Notify):
                self.notified[node].append(a)
            elif isinstance(a, Dropped):
                self.dropped[node].append(a)

    def _transmit(self, node: IPv4Address, a: SendFrame) -> None:
        frame = Frame(self.now, node, a.next_hop, a.packet)
        self.frames.append(frame)
        lost = self.frame_filter is not None and not self.frame_filter(frame)
        when = self.now + self.latency
        if a.next_hop is None:
            for nb in sorted(self.adj[node]):
                if not lost:
                    self._at(when, self._receiver(nb, a.packet, node))
            return
        if a.next_hop not in self.adj[node] or lost:
            nh, pkt = a.next_hop, a.packet

            def fail() -> None:
                self.engines[node].link_event(self.now, TxFailed(nh, pkt))
                self._drain(node)

            self._at(when, fail)
            return
        self._at(when, self._receiver(a.next_hop, a.packet, node))
        if self.promiscuous:
            for nb in sorted(self.adj[node] - {a.next_hop}):
                if self.engines[nb].wants_overheard:
                    self._at(when, self._overhearer(nb, a.packet, node))

    def _receiver(self, nb: IPv4Address, packet: bytes, sender: IPv4Address) -> Callable[[], None]:
        def rx() -> None:
            self.engines[nb].receive_frame(self.now, packet, mac_of(sender), self.rssi_dbm)
            self._drain(nb)

        return rx

    def _overhearer(
        self, nb: IPv4Address, packet: bytes, sender: IPv4Address
    ) -> Callable[[], None]:
        def rx() -> None:
            self.engines[nb].overhear_frame(self.now, packet, mac_of(sender), self.rssi_dbm)
            self._drain(nb)

        return rx

    # -- helpers for tests
    def frames_from(self, node: IPv4Address) -> list[Frame]:
        return [f for f in self.frames if f.sender == node]

    def events(self, node: IPv4Address, name: str) -> list[dict]:
        return [n.fields for n in self.notified[node] if n.name == name]


def chain(
    n: int, prefix: str = "10.42.0."
) -> tuple[list[IPv4Address], list[tuple[IPv4Address, IPv4Address]]]:
    """Addresses 1..n and the links of a chain n1 - n2 - ... - nN."""
    nodes = [IPv4Address(f"{prefix}{i}") for i in range(1, n + 1)]
    return nodes, list(zip(nodes, nodes[1:], strict=False))
