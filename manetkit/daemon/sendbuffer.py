"""Packets waiting for a route (RFC 4728 section 4.2 "Send Buffer"; RFC 3561 6.3 buffering).

Per destination FIFO with a global size limit and a per-packet timeout (30 s default as
in Holland & Vaidya and RFC 4728's SendBufferTimeout). Release is in arrival order.
Drops are counted by reason: ``timeout``, ``full`` (all destinations together hold
``send_buffer_packets``), ``full-destination`` (this destination holds
``send_buffer_per_destination``: one unreachable destination cannot take the whole
buffer), ``no-route`` (discovery gave up). A full buffer refuses the arriving packet
(drop-tail: the older packets of a TCP window are the ones its receiver needs first).

TCP sent into a buffer keeps being retransmitted by the sender's kernel while the route
is missing (a SYN every 1-2 s, data at each RTO), and every copy would go out at
route-up, each a frame on every hop ahead of what the connection needs. So a TCP segment
that is the same as one already waiting (same connection, seq, ack, flags and length;
a SYN, a FIN or data: not a pure ACK, whose repeats are duplicate ACKs that mean
something to the sender) is dropped as ``duplicate``; and a RST drops the waiting
segments of its connection in its direction (``superseded``: the connection they belong
to is gone, e.g. a proxy leg that was replaced while the route was down).

Sans-I/O: the owner passes ``now`` and asks :meth:`next_expiry` for its timer.
"""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
from ipaddress import IPv4Address

from pydantic import BaseModel, ConfigDict, Field

from manetkit.daemon.wire import ipv4

_FIN, _SYN, _RST, _PSH = 0x01, 0x02, 0x04, 0x08

# (src, dst, sport, dport) and (seq, ack, flags without PSH, payload bytes)
TcpConn = tuple[bytes, bytes, int, int]
TcpId = tuple[TcpConn, tuple[int, int, int, int]]


def tcp_identity(packet: bytes) -> tuple[TcpId, bool, bool] | None:
    """(connection + segment identity, is a RST, may be deduplicated) of a TCP packet,
    else None. Pure ACKs (no SYN/FIN/RST, no payload) are never deduplicated."""
    t = ipv4.tcp_segment(packet)
    if t is None:
        return None
    ident = ((t.src, t.dst, t.sport, t.dport), (t.seq, t.ack, t.flags & ~_PSH, t.payload))
    return ident, bool(t.flags & _RST), bool(t.payload > 0 or t.flags & (_SYN | _FIN))


_Entry = tuple[float, bytes, "TcpId | None"]  # (expiry, packet, TCP identity)


class SendBufferSettings(BaseModel):
    """The send-buffer fields of the ``dsr:`` and ``aodv:`` config sections."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    send_buffer_packets: int = Field(
        64, ge=1, le=100_000, description="packets waiting for routes, all destinations"
    )
    send_buffer_per_destination: int = Field(
        64,
        ge=1,
        le=100_000,
        description="packets waiting for a route to one destination (the total bound applies too)",
    )
    send_buffer_timeout_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="how long a packet may wait for a route (RFC 4728 SendBufferTimeout)",
    )


class SendBuffer:
    def __init__(
        self, max_packets: int, timeout: float, per_destination: int | None = None
    ) -> None:
        """Limits from the engine config (:class:`SendBufferSettings`, the one default)."""
        self.max_packets = max_packets
        self.per_destination = per_destination if per_destination is not None else max_packets
        self.timeout = timeout
        self._queues: OrderedDict[IPv4Address, deque[_Entry]] = OrderedDict()
        self._count = 0
        self.drops: Counter[str] = Counter()
        self.dropped: list[tuple[str, IPv4Address, bytes]] = []  # drained by the engine

    def __len__(self) -> int:
        return self._count

    def destinations(self) -> list[IPv4Address]:
        return list(self._queues)

    def waiting(self, dst: IPv4Address) -> int:
        q = self._queues.get(dst)
        return len(q) if q else 0

    @classmethod
    def from_settings(cls, s: SendBufferSettings) -> SendBuffer:
        return cls(s.send_buffer_packets, s.send_buffer_timeout_s, s.send_buffer_per_destination)

    def add(self, now: float, dst: IPv4Address, packet: bytes) -> bool:
        """Queue a packet; False (and a ``full``/``full-destination`` drop) when the
        buffer, or this destination's share of it, is full. A TCP copy of a segment
        already waiting is dropped (``duplicate``) and True returned: it is queued."""
        tcp = tcp_identity(packet)
        q = self._queues.get(dst)
        if tcp is not None and q:
            ident, rst, dedup = tcp
            if rst:
                self._supersede(dst, q, ident[0])
            elif dedup and any(t == ident for _, _, t in q):
                self._drop("duplicate", dst, packet)
                return True
        if self._count >= self.max_packets:
            self._drop("full", dst, packet)
            return False
        q = self._queues.get(dst)
        if q is None:
            q = self._queues[dst] = deque()
        elif len(q) >= self.per_destination:
            self._drop("full-destination", dst, packet)
            return False
        q.append((now + self.timeout, packet, tcp[0] if tcp is not None else None))
        self._count += 1
        return True

    def _supersede(self, dst: IPv4Address, q: deque[_Entry], conn: TcpConn) -> None:
        for _ in range(len(q)):  # one pass, order kept
            e = q.popleft()
            if e[2] is not None and e[2][0] == conn:
                self._count -= 1
                self._drop("superseded", dst, e[1])
            else:
                q.append(e)

    def release(self, dst: IPv4Address) -> list[bytes]:
        """All packets for ``dst``, oldest first (a route to it has come)."""
        q = self._queues.pop(dst, None)
        if not q:
            return []
        self._count -= len(q)
        return [p for _, p, _ in q]

    def discard(self, dst: IPv4Address, reason: str = "no-route") -> int:
        """Drop everything for ``dst`` (route discovery gave up)."""
        q = self._queues.pop(dst, None)
        if not q:
            return 0
        self._count -= len(q)
        for _, p, _ in q:
            self._drop(reason, dst, p)
        return len(q)

    def expire(self, now: float) -> int:
        """Drop packets whose timeout has passed; returns how many."""
        n = 0
        for dst in list(self._queues):
            q = self._queues[dst]
            while q and q[0][0] <= now:
                _, p, _ = q.popleft()
                self._count -= 1
                self._drop("timeout", dst, p)
                n += 1
            if not q:
                del self._queues[dst]
        return n

    def next_expiry(self) -> float | None:
        return min((q[0][0] for q in self._queues.values() if q), default=None)

    def _drop(self, reason: str, dst: IPv4Address, packet: bytes) -> None:
        self.drops[reason] += 1
        self.dropped.append((reason, dst, packet))

    def take_dropped(self) -> list[tuple[str, IPv4Address, bytes]]:
        out, self.dropped = self.dropped, []
        return out
