"""The transmit queue of a Linux laptop's Wi-Fi: mac80211's FQ-CoDel (sans-I/O).

Since Linux 4.10 mac80211 queues every frame a TXQ-capable driver sends (ath9k, ath10k,
mt76, iwlwifi's mvm) in per-station, per-TID queues run by FQ-CoDel
(net/mac80211/tx.c, include/net/fq_impl.h, include/net/codel_impl.h; Hoeiland-Joergensen
et al., "Ending the Anomaly", USENIX ATC 2017), and the netdev above has no qdisc of
its own. So a laptop's Wi-Fi does not build the multi-second standing queue of a
50-frame drop-tail FIFO (ns-2's IFQ) under a greedy TCP sender: CoDel drops at the head
once a flow's frames have waited more than ``target`` for a whole ``interval``.

This module is that queue for one transmitter and one access category, driven by the
medium's clock:

- flows by the kernel's flow hash inputs (``skb_get_hash``: IPv4/IPv6 addresses,
  protocol and TCP/UDP ports; any other frame, ARP or manetkit's own ethertype, by its
  ethertype alone, which is as far as the flow dissector reads it) hashed into 4096
  buckets (``fq_init``; CRC-32 here, so a run is reproducible), each a sub-queue that
  keeps its CoDel state while idle, as the kernel's do;
- deficit round robin between flows with new flows served first (RFC 8290 section 4.1;
  quantum 300 bytes, ``fq_init``);
- CoDel per flow (RFC 8289 section 5; target 20 ms and interval 100 ms, mac80211's
  per-station ``cparams``): a frame's sojourn is measured when the MAC takes it to send,
  and while it stays above target for an interval, the flow drops at the head with
  the control law ``interval / sqrt(count)``. ECN marking is not modelled: Linux TCP
  does not ask for ECN unless ``net.ipv4.tcp_ecn = 1`` (the default 2 only answers);
- a limit on the frames of all flows (mac80211's ``fq.limit``, 8192): when it is
  reached the head of the longest flow is dropped to make room (``fq_tin_enqueue``).

The MAC keeps the frame it is sending (its retries) as the queue's current frame: it
counts in the queue until :meth:`pop` and is never dropped from under the MAC.
"""

from __future__ import annotations

import math
import zlib
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CodelParams:
    """FQ-CoDel's parameters, mac80211's defaults (net/mac80211/sta_info.c, main.c)."""

    target_s: float = 0.020
    interval_s: float = 0.100
    quantum: int = 300
    limit: int = 8192
    # CoDel does not drop while the flow's backlog behind the frame is at most this
    # (RFC 8289 section 5.4 suggests one MTU; mac80211 leaves its cparams.mtu at 0: it
    # never drops a flow's last frame).
    mtu: int = 0
    buckets: int = 4096


def flow_key(frame: bytes) -> bytes:
    """What the kernel's flow hash of ``frame`` covers (Ethernet frame in)."""
    if len(frame) < 14:
        return frame[12:14]
    ethertype = frame[12:14]
    if ethertype == b"\x08\x00" and len(frame) >= 34 and frame[14] >> 4 == 4:
        ihl = (frame[14] & 0x0F) * 4
        proto = frame[23]
        key = ethertype + frame[23:24] + frame[26:34]
        fragment = int.from_bytes(frame[20:22], "big") & 0x3FFF
        if proto in (6, 17) and not fragment:
            key += frame[14 + ihl : 18 + ihl]
        return key
    if ethertype == b"\x86\xdd" and len(frame) >= 54:
        proto = frame[20]
        key = ethertype + frame[20:21] + frame[22:54]
        if proto in (6, 17):
            key += frame[54:58]
        return key
    return ethertype


class _Flow:
    __slots__ = ("frames", "backlog", "deficit", "dropping", "count", "lastcount",
                 "first_above", "drop_next", "listed")  # fmt: skip

    def __init__(self) -> None:
        self.frames: deque[tuple[float, bytes]] = deque()
        self.backlog = 0  # bytes
        self.deficit = 0
        self.dropping = False
        self.count = 0
        self.lastcount = 0
        self.first_above = 0.0  # 0: not above target
        self.drop_next = 0.0
        self.listed = False  # on the new or the old list


class FqCodelQueue:
    """One transmitter's FQ-CoDel queue for one access category (module docstring)."""

    def __init__(self, params: CodelParams | None = None) -> None:
        self.p = params or CodelParams()
        self._flows: dict[int, _Flow] = {}  # by bucket, created when first used
        self._new: deque[_Flow] = deque()
        self._old: deque[_Flow] = deque()
        self._n = 0  # frames in flows
        self._current: bytes | None = None
        self.codel_drops = 0
        self.overlimit_drops = 0

    def __len__(self) -> int:
        return self._n + (self._current is not None)

    def __bool__(self) -> bool:
        return self._n > 0 or self._current is not None

    def push(self, frame: bytes, now: float) -> bool:
        """Queue ``frame``: always taken (over the limit the longest flow loses its head,
        counted in ``overlimit_drops``)."""
        bucket = zlib.crc32(flow_key(frame)) % self.p.buckets
        flow = self._flows.get(bucket)
        if flow is None:
            flow = self._flows[bucket] = _Flow()
        if not flow.listed:
            flow.listed = True
            flow.deficit = self.p.quantum
            self._new.append(flow)
        flow.frames.append((now, frame))
        flow.backlog += len(frame)
        self._n += 1
        if self._n > self.p.limit:
            fattest = max(self._flows.values(), key=lambda f: f.backlog)
            _, dropped = fattest.frames.popleft()
            fattest.backlog -= len(dropped)
            self._n -= 1
            self.overlimit_drops += 1
        return True

    def head(self, now: float) -> bytes | None:
        """The frame the MAC sends next: the current one, or the next one FQ picks and
        CoDel lets through (frames CoDel drops on the way are counted, not returned)."""
        if self._current is None:
            self._current = self._dequeue(now)
        return self._current

    def pop(self) -> None:
        """The MAC is done with the current frame (sent or given up)."""
        self._current = None

    def clear(self, keep_current: bool) -> None:
        """Drop every queued frame, and the current one unless ``keep_current`` (the MAC
        is sending it): the node detached."""
        if not keep_current:
            self._current = None
        for flow in self._flows.values():
            flow.frames.clear()
            flow.backlog = 0
            flow.listed = False
        self._new.clear()
        self._old.clear()
        self._n = 0

    # --- RFC 8290 section 4.2: the scheduler ---------------------------------------

    def _dequeue(self, now: float) -> bytes | None:
        while True:
            if self._new:
                flows, flow = self._new, self._new[0]
            elif self._old:
                flows, flow = self._old, self._old[0]
            else:
                return None
            if flow.deficit <= 0:
                flow.deficit += self.p.quantum
                flows.popleft()
                self._old.append(flow)
                continue
            frame = self._codel(flow, now)
            if frame is None:
                flows.popleft()
                if flows is self._new and self._old:
                    self._old.append(flow)  # an emptied new flow goes behind the old ones
                else:
                    flow.listed = False  # idle; its CoDel state stays
                continue
            flow.deficit -= len(frame)
            return frame

    # --- RFC 8289 section 5: CoDel, per flow ----------------------------------------

    def _take(self, flow: _Flow, now: float) -> tuple[bytes | None, bool]:
        """The flow's head and whether CoDel may drop it (``dodequeue``)."""
        if not flow.frames:
            flow.first_above = 0.0
            return None, False
        t_in, frame = flow.frames.popleft()
        flow.backlog -= len(frame)
        self._n -= 1
        if now - t_in < self.p.target_s or flow.backlog <= self.p.mtu:
            flow.first_above = 0.0
            return frame, False
        if flow.first_above == 0.0:
            flow.first_above = now + self.p.interval_s
            return frame, False
        return frame, now >= flow.first_above

    def _law(self, t: float, count: int) -> float:
        return t + self.p.interval_s / math.sqrt(count)

    def _codel(self, flow: _Flow, now: float) -> bytes | None:
        frame, ok = self._take(flow, now)
        if frame is None:
            flow.dropping = False
            return None
        if flow.dropping:
            if not ok:
                flow.dropping = False
            while flow.dropping and now >= flow.drop_next:
                self.codel_drops += 1
                flow.count += 1
                frame, ok = self._take(flow, now)
                if frame is None:
                    flow.dropping = False
                    return None
                if not ok:
                    flow.dropping = False
                else:
                    flow.drop_next = self._law(flow.drop_next, flow.count)
        elif ok:
            self.codel_drops += 1
            frame, _ = self._take(flow, now)
            flow.dropping = True
            delta = flow.count - flow.lastcount
            recent = now - flow.drop_next < 16 * self.p.interval_s
            flow.count = delta if delta > 1 and recent else 1
            flow.lastcount = flow.count
            flow.drop_next = self._law(now, flow.count)
        return frame


class DropTailQueue:
    """A FIFO of at most ``limit`` frames that refuses the newest when full (ns-2's IFQ
    and the lab's default): :class:`FqCodelQueue`'s interface, so the MAC drives either."""

    __slots__ = ("_q", "limit", "codel_drops", "overlimit_drops")

    def __init__(self, limit: int) -> None:
        self._q: deque[bytes] = deque()
        self.limit = limit
        self.codel_drops = 0
        self.overlimit_drops = 0

    def __len__(self) -> int:
        return len(self._q)

    def __bool__(self) -> bool:
        return bool(self._q)

    def push(self, frame: bytes, now: float) -> bool:
        if len(self._q) >= self.limit:
            return False
        self._q.append(frame)
        return True

    def head(self, now: float) -> bytes | None:
        return self._q[0] if self._q else None

    def pop(self) -> None:
        if self._q:
            self._q.popleft()

    def clear(self, keep_current: bool) -> None:
        """Drop every queued frame, and the head unless ``keep_current`` (the MAC is
        sending it)."""
        head = self._q[0] if self._q and keep_current else None
        self._q.clear()
        if head is not None:
            self._q.append(head)


TxQueue = DropTailQueue | FqCodelQueue
