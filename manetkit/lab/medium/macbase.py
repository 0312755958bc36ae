"""What the two sans-I/O MACs share: their outputs, inputs and snapshot cache.

The ns2 MAC (:mod:`.mac`) and the realistic one (:mod:`.realistic`) model the air
differently but meet the medium process (``server.py``) through one contract: the same
inputs (:meth:`MacBase.transmit`, :meth:`~MacBase.set_attached`,
:meth:`~MacBase.set_overhear`), the same outputs (:class:`Delivery`, :class:`TxStatus`),
the same cached view of who hears whom and the same statistics. Written once here, the
two cannot drift apart; each subclass supplies only how it queues a frame, what it
drops when a node detaches and how it computes a snapshot.

Only code that was the same in both lives here, so the ns2 MAC stays bit-for-bit what
it was (``tests/lab/test_medium_ns2_golden.py``): nothing here draws from the random
generator except :meth:`MacBase._lossy`, which draws exactly when both MACs did.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from manetkit.lab.medium.mobility import World

# A node's MAC state; both MACs use the same three.
IDLE, CONTEND, TX = 0, 1, 2

# The counters both MACs keep, in the order ``stats`` lists them (each adds its own after:
# lab/fidelity.py and the control command ``stats`` read them by name).
COUNTERS = (
    "frames_in",
    "transmissions",
    "delivered",
    "broadcast",
    "unicast_ok",
    "unicast_failed",
    "retries",
    "queue_drops",
    "random_losses",
    "interference_losses",
)


class Delivery(NamedTuple):
    """``frame`` reaches node ``node`` (lab id, n1 = 1) at received power ``rssi_dbm``."""

    at: float  # virtual time the reception ends
    node: int
    rssi_dbm: float
    frame: bytes


class TxStatus(NamedTuple):
    """The end of node ``node``'s unicast exchange to ``dst_mac``.

    ``ok`` False: the retry chain was exhausted (``frame`` is the frame that failed);
    True: delivered after ``retries`` retries (sent only when retries > 0; ``frame`` empty).
    """

    at: float
    node: int
    dst_mac: bytes
    retries: int
    ok: bool
    frame: bytes


MediumEvent = Delivery | TxStatus


class LinkView(Protocol):
    """What the shared code reads of a snapshot (the two-ray ``Snapshot`` or the
    realistic ``LinkBudget``): its time, and per 0-based node who receives it and how
    strongly (dBm)."""

    t: float
    dbm: list[list[float]]
    rx: list[list[int]]


class MacNode(Protocol):
    """What the shared code reads and writes of one node's MAC state."""

    state: int
    attached: bool
    overhear: bool
    drops: int
    busy_s: float


SnapT = TypeVar("SnapT", bound=LinkView)
NodeT = TypeVar("NodeT", bound=MacNode)


class MacBase(ABC, Generic[SnapT, NodeT]):
    """The inputs, outputs and snapshot cache common to both MACs (module docstring).

    A subclass sets ``nodes``, ``snapshot`` (from :meth:`_snap`), ``_snap_version`` and
    ``_counters`` in its constructor, after calling this one.
    """

    MODELLED_DROPS: tuple[str, ...]
    nodes: list[NodeT]
    snapshot: SnapT
    _snap_version: int
    _counters: dict[str, int | float]

    def __init__(
        self,
        world: World,
        rng: random.Random,
        *,
        queue_frames: int,
        retry_limit: int,
        loss: float,
        link_loss: dict[tuple[int, int], float] | None,
        refresh_s: float,
        overhear: bool,
    ) -> None:
        self.world = world
        self.n = world.n
        self.queue_frames = queue_frames
        self.retry_limit = retry_limit
        self.loss = loss
        # per-link loss overrides by 0-based pair (a < b)
        self.link_loss = {(min(a, b), max(a, b)): p for (a, b), p in (link_loss or {}).items()}
        self.overhear = overhear
        # How many nodes want overheard frames: the unicast hot path tests only this.
        self._overhearers = 0
        self.rng = rng
        self.refresh_s = refresh_s  # how stale positions may get for a moving world
        self._heap: list[tuple[Any, ...]] = []
        self._seq = 0
        self._events: deque[MediumEvent] = deque()
        # Hook for the ground-truth log: called with each fresh snapshot.
        self.on_snapshot: Callable[[SnapT], None] | None = None

    # --- what a subclass supplies -------------------------------------------------------

    @abstractmethod
    def _snap(self, t: float) -> SnapT:
        """Who hears whom at ``t``, computed afresh."""

    @abstractmethod
    def _enqueue(self, nd: NodeT, frame: bytes, now: float) -> bool:
        """Queue ``frame`` at ``nd`` at ``now``; False if its queue is full (the caller
        counts it)."""

    @abstractmethod
    def _drop_queued(self, nd: NodeT) -> None:
        """``nd`` was detached: drop its queued frames but the one on the air."""

    @abstractmethod
    def _contend(self, i: int, t: float) -> None:
        """Node ``i`` (0-based) starts contending for the medium at ``t``."""

    @abstractmethod
    def handle_timer(self, now: float) -> None:
        """Process every event due at or before ``now``, each at its own virtual time."""

    @abstractmethod
    def queue_length(self, node: int) -> int:
        """Frames waiting at node ``node`` (lab id)."""

    # --- topology -------------------------------------------------------------------

    def refresh(self, t: float, force: bool = False) -> SnapT:
        """Recompute who hears whom if the world moved (at most every ``refresh_s``)."""
        snap = self.snapshot
        if (
            force
            or self.world.version != self._snap_version
            or (self.world.mobile and t - snap.t >= self.refresh_s)
        ):
            self._snap_version = self.world.version
            snap = self.snapshot = self._snap(t)
            if self.on_snapshot is not None:
                self.on_snapshot(snap)
        return snap

    # --- inputs ---------------------------------------------------------------------

    def set_attached(self, node: int, attached: bool) -> None:
        """A detached node neither receives nor answers; its queued frames are dropped."""
        nd = self.nodes[node - 1]
        nd.attached = attached
        if not attached:
            self.set_overhear(node, False)
            self._drop_queued(nd)

    def set_overhear(self, node: int, on: bool) -> None:
        """Node ``node`` wants (or no longer wants) other nodes' unicasts it can hear.

        Ignored when the scenario turned overhearing off (``radio.overhear: false``).
        """
        nd = self.nodes[node - 1]
        on = bool(on) and self.overhear
        if on != nd.overhear:
            nd.overhear = on
            self._overhearers += 1 if on else -1

    def transmit(self, now: float, src: int, frame: bytes) -> bool:
        """Node ``src`` hands a frame to its MAC; False if its queue was full."""
        if self._heap and self._heap[0][0] <= now:
            self.handle_timer(now)
        c = self._counters
        c["frames_in"] += 1
        nd = self.nodes[src - 1]
        if not self._enqueue(nd, frame, now):
            nd.drops += 1
            c["queue_drops"] += 1
            return False
        if nd.state == IDLE:
            self._contend(src - 1, now)
        return True

    # --- outputs --------------------------------------------------------------------

    def next_event(self) -> MediumEvent | None:
        """The next output (:class:`Delivery` or :class:`TxStatus`), or None."""
        return self._events.popleft() if self._events else None

    # --- the model's random loss -----------------------------------------------------

    def _lossy(self, a: int, b: int) -> bool:
        """Does the scenario's random loss (per link, else global) drop ``a``->``b``?"""
        if not self.loss and not self.link_loss:
            return False
        p = self.link_loss.get((a, b) if a < b else (b, a), self.loss)
        return p > 0 and self.rng.random() < p

    # --- introspection --------------------------------------------------------------

    def neighbours(self, node: int, t: float) -> list[tuple[int, float]]:
        """Nodes that receive ``node`` now (a usable link, under a realistic profile), with
        the power they receive it at (dBm; the mean power under a realistic profile)."""
        snap = self.refresh(t)
        i = node - 1
        return [(j + 1, snap.dbm[i][j]) for j in snap.rx[i]]

    @property
    def counters(self) -> dict[str, int | float]:
        """What happened so far (frames in, deliveries, losses by cause, airtime)."""
        return self._counters

    def stats(self) -> dict:
        """The counters with the per-node queue drops, frames queued and busy time."""
        return {
            **self.counters,
            "queue_drops_per_node": {
                f"n{k + 1}": nd.drops for k, nd in enumerate(self.nodes) if nd.drops
            },
            "queued": sum(self.queue_length(k + 1) for k in range(self.n)),
            "busy_s_per_node": {
                f"n{k + 1}": round(nd.busy_s, 6) for k, nd in enumerate(self.nodes) if nd.busy_s
            },
        }
