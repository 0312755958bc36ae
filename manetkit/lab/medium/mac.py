"""Sans-I/O 802.11 DCF medium: who transmits when, who receives what.

Inputs: :meth:`Medium.transmit` (a node puts a frame on the air), :meth:`Medium.handle_timer`;
:meth:`Medium.get_timer` gives the next instant anything happens. Outputs are drained with
:meth:`Medium.next_event` after each call: :class:`Delivery` (a frame reaches a node) and
:class:`TxStatus` (the outcome of a unicast exchange), each stamped with the virtual time
``at`` it is due, so the shell can measure how late it hands them out.
Node numbers are the lab's ids (n1 = 1); internally 0-based indexes.

The model (IEEE 802.11 DCF, clause 10.3; ns-2's ``Mac802_11`` for the choices the
papers' simulations made):

- each node has a drop-tail interface queue (``queue_frames``, 50 as in ns-2's IFQ); with
  ``priqueue`` it is ns-2's PriQueue instead (queue/priqueue.cc): a routing-control frame
  (IP precedence 6-7, DSCP CS6/CS7: ``queues.is_network_control``) goes to the head of the
  queue, behind only the frame the MAC is already sending, and when that overfills the
  queue the frame at the tail is dropped;
- a node contends for its head frame with DIFS + a uniform backoff in [0, CW] slots,
  counted down only while no node within its carrier-sense range transmits (the backoff
  freezes and resumes after the next DIFS), so nodes within 550 m of each other never
  overlap; same-slot collisions of such nodes are not modelled (the tie goes to one);
- broadcast (group bit set in the destination MAC): sent once, no ACK, received by every
  node within reception range, each subject to the random loss;
- unicast: received if the destination is in range, attached, not lost at random and not
  hit by interference; each attempt costs data + SIFS + ACK; a failed attempt doubles CW
  (up to CWmax) and retries, up to ``retry_limit`` retries, then a tx-failure status
  carrying the frame. A destination MAC that is no lab radio's gets the same treatment,
  as a real MAC gets no ACK;
- overhearing (``radio.overhear``, on by default): a unicast that its destination
  received is also delivered, with its received power, to every other attached node in
  reception range of the sender that asked for it (:meth:`Medium.set_overhear`: its
  radio0 is promiscuous), each subject to the random loss, as a real 802.11 radio
  receives every frame on its channel and ns-2's promiscuous taps pass it up. Only the
  successful attempt is overheard (no duplicates from retries); overhearers send no ACK
  and change nothing in the exchange; hidden-terminal interference is not applied to
  them (a simplification). Nodes that did not ask cost nothing;
- RTS/CTS (``radio.rts_threshold``, off by default): a unicast whose MPDU is longer than
  the threshold also costs RTS + SIFS + CTS + SIFS per attempt; an attempt to an absent
  destination (out of range, link down, detached) costs only RTS + SIFS + CTS (no CTS
  comes, the data is not sent). One ``retry_limit`` counts both kinds of attempt (ns-2
  and 802.11 keep a short and a long retry count; with the defaults both give 7 tries
  before the link is declared broken, close enough here). The CTS's NAV is not modelled
  separately: every node that hears the receiver (250 m) is within 500 m of the sender,
  hence already within its 550 m carrier-sense range and deferring;
- interference (``radio.interference``, off by default): a reception fails if the
  receiver carrier-senses another transmission that overlaps it and either started
  first (the receiver had locked onto it, as ns-2's PHY does) or is not at least 10 dB
  weaker (ns-2's CPThresh capture). Only hidden terminals (beyond each other's carrier
  sense) can overlap. ACKs are not subject to interference (a simplification).
  Why off by default: simulating a TCP-like flow over static 200 m chains with this
  model gives T_i/T_1 = 1, 0.50, 0.34, 0.30, 0.28, 0.28, 0.27 without interference (the
  plateau from 4 hops of Holland & Vaidya fig. 1, who also state that links 1-2 and 4-5
  of a chain can be active at once) and 1, 0.50, 0.32, 0.25, 0.21, 0.19, 0.18 with it
  (still falling at 7 hops, closer to Li et al.'s 1/4..1/7 "capacity" results).

Accuracy: every start and end time is computed on a virtual schedule (exact floats from
the previous event), never from when the timer actually fired; a late wake-up only
delays when results are handed out, and all events already due are processed in one
call, so lateness never turns into lost airtime.
"""

from __future__ import annotations

import heapq
import random
from collections import deque

from manetkit.lab.medium.airtime import Airtime
from manetkit.lab.medium.macbase import CONTEND, COUNTERS, IDLE, TX, Delivery, MacBase, TxStatus
from manetkit.lab.medium.mobility import World
from manetkit.lab.medium.propagation import TwoRayGround
from manetkit.lab.medium.protocol import mac_node
from manetkit.lab.medium.queues import is_network_control
from manetkit.lab.medium.topology import Snapshot

_END, _START = 0, 1  # at equal times a transmission ends before another starts
CAPTURE_RATIO = 10.0  # 10 dB, ns-2's CPThresh_
_BROADCAST = -1
_NOBODY = -2


class _Node:
    __slots__ = (
        "queue",
        "state",
        "cw",
        "backoff",
        "count_from",
        "gen",
        "retries",
        "busy_until",
        "tx",
        "attached",
        "drops",
        "sent",
        "received",
        "busy_s",
        "overhear",
    )

    def __init__(self, cw: int):
        self.queue: deque[bytes] = deque()
        self.state = IDLE
        self.cw = cw
        self.backoff = 0
        self.count_from = 0.0  # when the backoff countdown (re)starts
        self.gen = 0  # invalidates scheduled starts when the countdown is frozen
        self.retries = 0
        self.busy_until = 0.0  # end of the last transmission this node carrier-senses
        self.tx: _Tx | None = None
        self.attached = True
        self.drops = 0
        self.sent = 0
        self.received = 0
        self.busy_s = 0.0
        self.overhear = False  # its radio asked for other nodes' unicasts (promiscuous)


class _Tx:
    __slots__ = ("src", "start", "end", "dst", "frame", "receivers", "lost")

    def __init__(
        self, src: int, start: float, end: float, dst: int, frame: bytes, receivers: list[int]
    ):
        self.src = src
        self.start = start
        self.end = end
        self.dst = dst
        self.frame = frame
        self.receivers = receivers
        self.lost: set[int] | None = None


class Medium(MacBase[Snapshot, _Node]):
    """The shared channel of one lab (see the module docstring for the model)."""

    # Counters of frames lost by the model's own decision (lab/fidelity.py).
    MODELLED_DROPS = ("queue_drops", "random_losses", "interference_losses")

    def __init__(
        self,
        world: World,
        airtime: Airtime | None = None,
        propagation: TwoRayGround | None = None,
        *,
        queue_frames: int = 50,
        retry_limit: int = 7,
        loss: float = 0.0,
        link_loss: dict[tuple[int, int], float] | None = None,
        interference: bool = False,
        seed: int = 1,
        refresh_s: float = 0.05,
        airtime_scale: float = 1.0,
        overhear: bool = True,
        priqueue: bool = False,
    ):
        super().__init__(
            world,
            random.Random(f"manetkit-mac:{seed}"),
            queue_frames=queue_frames,
            retry_limit=retry_limit,
            loss=loss,
            link_loss=link_loss,
            refresh_s=refresh_s,
            overhear=overhear,
        )
        self.airtime = airtime or Airtime()
        self.prop = propagation or TwoRayGround()
        self.interference = interference
        self.priqueue = priqueue

        # airtime_scale < 1 shrinks every duration (slots, frames): only ``bench medium``
        # uses it, to measure the relay's own capacity with the 802.11 timing out of the way.
        if not airtime_scale > 0:
            raise ValueError("airtime_scale must be > 0")
        us = 1e-6 * airtime_scale
        phy = self.airtime.phy
        self._us = us
        self.slot = phy.slot_us * us
        self.difs = phy.difs_us * us
        self.cw_min, self.cw_max = phy.cw_min, phy.cw_max
        # per Ethernet frame length: (broadcast, unicast attempt, unicast with no CTS/ACK)
        self._durations: dict[int, tuple[float, float, float]] = {}

        self.nodes = [_Node(self.cw_min) for _ in range(self.n)]
        self._active: list[_Tx] = []
        self.snapshot = self._snap(0.0)
        self._snap_version = world.version

        self._counters = {**dict.fromkeys(COUNTERS, 0), "overheard": 0, "airtime_s": 0.0}

    # --- what the shared inputs ask of this MAC (macbase.py) -------------------------

    def _snap(self, t: float) -> Snapshot:
        return Snapshot(t, self.world.positions(t), self.prop, self.world.links)

    def _drop_queued(self, nd: _Node) -> None:
        head = nd.queue[0] if nd.state == TX and nd.queue else None
        nd.queue.clear()
        if head is not None:
            nd.queue.append(head)
        elif nd.state == CONTEND:
            nd.state = IDLE  # nothing left to contend for
            nd.gen += 1  # its scheduled start is void

    def _enqueue(self, nd: _Node, frame: bytes, now: float) -> bool:
        """The interface queue: drop-tail, or ns-2's PriQueue with ``priqueue``."""
        if self.priqueue and is_network_control(frame):
            self._enqueue_head(nd, frame)
            return True
        if len(nd.queue) >= self.queue_frames:
            return False
        nd.queue.append(frame)
        return True

    def _enqueue_head(self, nd: _Node, frame: bytes) -> None:
        """ns-2 PriQueue::recvHighPriority: the head of the queue (behind the frame in the
        MAC), then drop the tail when the queue is over its limit."""
        q = nd.queue
        q.insert(1 if nd.state != IDLE else 0, frame)
        if len(q) > self.queue_frames:
            q.pop()
            nd.drops += 1
            self._counters["queue_drops"] += 1

    def handle_timer(self, now: float) -> None:
        """Process every event due at or before ``now``, each at its own virtual time."""
        heap = self._heap
        nodes = self.nodes
        while heap and heap[0][0] <= now:
            t, kind, _, i, gen = heapq.heappop(heap)
            if gen != nodes[i].gen:
                continue  # a start superseded by a frozen backoff
            if kind == _END:
                self._end(i, t)
            else:
                self._start(i, t)

    def get_timer(self) -> float | None:
        heap = self._heap
        nodes = self.nodes
        while heap and heap[0][4] != nodes[heap[0][3]].gen:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    # --- the DCF --------------------------------------------------------------------

    def _push(self, t: float, kind: int, i: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, i, self.nodes[i].gen))

    def _contend(self, i: int, t: float) -> None:
        nd = self.nodes[i]
        nd.state = CONTEND
        nd.backoff = self.rng.randint(0, nd.cw)
        nd.count_from = max(t, nd.busy_until) + self.difs
        nd.gen += 1
        self._push(nd.count_from + nd.backoff * self.slot, _START, i)

    def _durations_of(self, length: int) -> tuple[float, float, float]:
        d = self._durations.get(length)
        if d is None:
            a, us = self.airtime, self._us
            unicast = a.unicast_us(length) * us
            # Without RTS a sender cannot tell an absent receiver before the ACK timeout;
            # with RTS it gives up after the missing CTS.
            absent = a.rts_cts_us() * us if a.uses_rts(length) else unicast
            d = self._durations[length] = (a.data_us(length) * us, unicast, absent)
        return d

    def _start(self, i: int, t: float) -> None:
        snap = self.refresh(t)
        nd = self.nodes[i]
        frame = nd.queue[0]
        if frame[0] & 1:
            dst = _BROADCAST
            receivers = list(snap.rx[i])
        else:
            d = mac_node(frame[:6])
            if d is not None and 1 <= d <= self.n:
                dst = d - 1
                receivers = [dst] if dst in snap.rx_sets[i] else []
            else:
                dst, receivers = _NOBODY, []
        d = self._durations_of(len(frame))
        if dst == _BROADCAST:
            end = t + d[0]
        elif receivers and self.nodes[dst].attached:
            end = t + d[1]
        else:
            end = t + d[2]
        tx = _Tx(i, t, end, dst, frame, receivers)
        if self.interference and self._active:
            self._interfere(tx, snap)
        nd.state = TX
        nd.tx = tx
        self._active.append(tx)
        c = self._counters
        c["transmissions"] += 1
        c["airtime_s"] += end - t
        nd.busy_s += end - t
        # Everyone within carrier-sense range defers: freeze their backoff countdowns.
        slot, difs, nodes = self.slot, self.difs, self.nodes
        for j in snap.cs[i]:
            m = nodes[j]
            if end > m.busy_until:
                m.busy_until = end
            if m.state == CONTEND:
                if t > m.count_from:
                    m.backoff = max(0, m.backoff - int((t - m.count_from) / slot + 1e-6))
                m.count_from = m.busy_until + difs
                m.gen += 1
                self._push(m.count_from + m.backoff * slot, _START, j)
        self._push(end, _END, i)

    def _interfere(self, tx: _Tx, snap: Snapshot) -> None:
        """Hidden-terminal overlap between ``tx`` and transmissions already on the air."""
        p = snap.power_w
        cs_thr = self.prop.cs_threshold_w
        src = tx.src
        for a in self._active:
            # Receivers of ``a`` hit by the new signal (or transmitting it themselves).
            for r in a.receivers:
                pr = p[src][r]
                if r == src or (pr >= cs_thr and p[a.src][r] < CAPTURE_RATIO * pr):
                    if a.lost is None:
                        a.lost = set()
                    a.lost.add(r)
        # Receivers of ``tx`` that are transmitting or already locked onto another frame.
        if tx.receivers:
            keep = []
            for r in tx.receivers:
                if any(a.src == r or p[a.src][r] >= cs_thr for a in self._active):
                    if tx.lost is None:
                        tx.lost = set()
                    tx.lost.add(r)
                keep.append(r)
            tx.receivers = keep

    def _end(self, i: int, t: float) -> None:
        nd = self.nodes[i]
        tx = nd.tx
        assert tx is not None
        nd.tx = None
        self._active.remove(tx)
        nodes = self.nodes
        c = self._counters
        snap = self.snapshot
        lost = tx.lost
        frame = tx.frame
        if tx.dst == _BROADCAST:
            c["broadcast"] += 1
            for r in tx.receivers:
                if lost is not None and r in lost:
                    c["interference_losses"] += 1
                    continue
                if not nodes[r].attached:
                    continue
                if self._lossy(i, r):
                    c["random_losses"] += 1
                    continue
                self._events.append(Delivery(t, r + 1, snap.dbm[i][r], frame))
                nodes[r].received += 1
                c["delivered"] += 1
            self._done(i, t)
            return
        dst = tx.dst
        ok = False
        if tx.receivers and nodes[dst].attached:
            if lost is not None and dst in lost:
                c["interference_losses"] += 1
            elif self._lossy(i, dst):
                c["random_losses"] += 1
            else:
                ok = True
        if ok:
            self._events.append(Delivery(t, dst + 1, snap.dbm[i][dst], frame))
            nodes[dst].received += 1
            c["delivered"] += 1
            c["unicast_ok"] += 1
            if self._overhearers:
                self._overheard(t, i, dst, frame, snap)
            if nd.retries:
                self._events.append(TxStatus(t, i + 1, frame[:6], nd.retries, True, b""))
            self._done(i, t)
            return
        if nd.retries >= self.retry_limit:
            c["unicast_failed"] += 1
            self._events.append(TxStatus(t, i + 1, frame[:6], nd.retries, False, frame))
            self._done(i, t)
            return
        nd.retries += 1
        c["retries"] += 1
        nd.cw = min(2 * nd.cw + 1, self.cw_max)
        self._contend(i, t)

    def _overheard(self, t: float, i: int, dst: int, frame: bytes, snap: Snapshot) -> None:
        """Hand ``i``'s unicast to ``dst`` to the other listeners in range that want it."""
        nodes = self.nodes
        c = self._counters
        dbm = snap.dbm[i]
        for r in snap.rx[i]:
            m = nodes[r]
            if r == dst or not m.overhear or not m.attached:
                continue
            if self._lossy(i, r):
                c["random_losses"] += 1
                continue
            self._events.append(Delivery(t, r + 1, dbm[r], frame))
            c["overheard"] += 1

    def _done(self, i: int, t: float) -> None:
        nd = self.nodes[i]
        nd.queue.popleft()
        nd.sent += 1
        nd.retries = 0
        nd.cw = self.cw_min
        if nd.queue:
            self._contend(i, t)
        else:
            nd.state = IDLE

    # --- introspection --------------------------------------------------------------

    def queue_length(self, node: int) -> int:
        return len(self.nodes[node - 1].queue)

    def link_table(self, t: float, cs: bool = False) -> dict:
        """Every link at once (the control command ``links``, ``linktable.py``)."""
        from manetkit.lab.medium.linktable import link_table

        return link_table(self.refresh(t), self.prop, cs)

    def link_rule(self) -> str:
        """The ground truth's notion of a link, in words (written into its log)."""
        p = self.prop
        return f"ns2 two-ray ground: received power >= {p.rx_threshold_w:g} W ({p.range_m():.0f} m)"
