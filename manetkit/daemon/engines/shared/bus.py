"""TCP-BuS state shared by the DSR and AODV engines (Kim, Toh & Choi section IV), sans-I/O.

- Holds (IV-B/C): per TCP flow, the packets a node keeps instead of forwarding while a
  route is broken downstream: at the pivot (the node that detected the break) and at
  every node between it and the source once the ERDN has passed. Bounded: a full hold
  drops its oldest packet, and a hold older than ``hold_s`` is given up.
- Reliable notices (IV-D): every ERDN/ERSN a node transmits is retransmitted every
  ``rexmt_s`` until the next hop acknowledges it (BUS-ACK) or is overheard relaying it,
  at most ``max_rexmt`` times.
- Last_ACK: the latest TCP acknowledgement number a node forwarded for each flow, so a
  pivot can put the receiver's Last_ACK into its ERSN.

:class:`BusState` keeps the state and the clock arithmetic; :class:`Bus` is the part
of the mechanism both engines run the same way (holding forwarded packets, the
retransmission timer, acting on a notice's first copy). Each engine carries the notices
in its own messages (``dsr/bus.py``: DSR options; ``aodv/bus.py``: RERR extensions and
RREP-ACKs) and decides where a pivot repairs.

Bounded state (docs/security.md "Bounded state"): at most ``bus_max_flows`` holds (a new
flow's hold evicts the oldest, its packets dropped: ``holds-evicted``/``held-dropped``),
``MAX_NOTICES`` notices in flight (the one due first is given up: ``notices-evicted``),
``MAX_NOTICES`` remembered notice keys and ERSN idents (oldest first:
``seen-evicted``/``ersn-evicted``) and ``MAX_LAST_ACK`` Last_ACKs (cleared when over:
``last-ack-cleared``). Forged ERDNs with made-up flows therefore cannot grow memory.
"""

from __future__ import annotations

import struct
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from manetkit import events as ev
from manetkit.daemon.engines.base import Outbox
from manetkit.daemon.wire import ipv4
from manetkit.daemon.wire import manet_ext as mx

MAX_NOTICES = 1024
MAX_LAST_ACK = 4096

FlowKey = tuple[bytes, bytes, int, int]  # src, dst (packed), sport, dport: data direction
NoticeKey = tuple[int, int, IPv4Address]  # kind, ident, pivot


class BusSettings(BaseModel):
    """The ``bus*`` fields of the ``dsr:`` and ``aodv:`` config sections."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bus: bool = Field(False, description="TCP-BuS: ERDN/ERSN, holding and local repair")
    bus_rexmt_ms: float = Field(
        200.0, gt=0, le=10_000, description="ERDN/ERSN retransmission interval until acked"
    )
    bus_max_rexmt: int = Field(10, ge=0, le=100, description="ERDN/ERSN retransmissions at most")
    bus_hold_packets: int = Field(
        64, ge=1, le=100_000, description="packets held per flow while a route is broken"
    )
    bus_hold_s: float = Field(
        30.0, gt=0, le=3600, description="a hold not released by an ERSN this long is dropped"
    )
    bus_max_flows: int = Field(
        256, ge=1, le=100_000, description="flows held at once; a new one evicts the oldest hold"
    )


def tcp_fields(packet: bytes | bytearray, ip_proto: int, off: int) -> tuple[int, ...] | None:
    """(sport, dport, seq, ack, flags) of the TCP header at ``off``, or None."""
    if ip_proto != ipv4.PROTO_TCP or len(packet) < off + 14:
        return None
    sport, dport, seq, ack = struct.unpack_from("!HHII", packet, off)
    return sport, dport, seq, ack, packet[off + 13]


@dataclass(slots=True)
class Hold:
    """The packets of one flow a node keeps back, in arrival order."""

    since: float
    pivot: bool
    packets: deque = field(default_factory=deque)
    upstream: tuple[IPv4Address, ...] = ()  # pivot only: the path source..pivot
    head_seq: int = 0


@dataclass(slots=True)
class NoticeOutcome:
    """What one ERDN/ERSN (first copy) means for this node.

    ``relay``: pass it on towards the flow's source; ``event``: the source's Erdn/Ersn
    for its event socket; ``released``: held packets to send on now (ERSN).
    """

    relay: bool
    event: ev.Erdn | ev.Ersn | None = None
    released: list = field(default_factory=list)


@dataclass(slots=True)
class _Pending:
    next_hop: IPv4Address
    packet: bytes
    due: float
    flow: FlowKey | None = None
    tries: int = 0


class BusState:
    """Holds, reliable notices in flight and Last_ACKs for one node."""

    def __init__(self, s: BusSettings) -> None:
        self.settings = s
        self.rexmt = s.bus_rexmt_ms / 1000
        self.holds: dict[FlowKey, Hold] = {}
        self.pending: dict[NoticeKey, _Pending] = {}
        self.seen: dict[NoticeKey, float] = {}  # notices handled here (duplicates: ack only)
        self.last_ack: dict[FlowKey, int] = {}
        # (flow, pivot) -> ident of the latest ERSN seen: an ERDN from that pivot with
        # an older ident (a late retransmission) must not hold the flow again.
        self.ersn_ident: dict[tuple[FlowKey, IPv4Address], int] = {}
        self.counters: Counter[str] = Counter()
        self._ident = 0

    def next_ident(self) -> int:
        self._ident = (self._ident + 1) & 0xFFFF
        return self._ident

    # -- holds
    def start(self, now: float, key: FlowKey, pivot: bool = False) -> Hold:
        h = self.holds.get(key)
        if h is None:
            if len(self.holds) >= self.settings.bus_max_flows:
                old = min(self.holds, key=lambda k: self.holds[k].since)
                self.counters["holds-evicted"] += 1
                self.counters["held-dropped"] += len(self.holds.pop(old).packets)
            h = self.holds[key] = Hold(now, pivot)
            self.counters["holds"] += 1
        elif pivot:
            h.pivot = True
        return h

    def hold(self, key: FlowKey, item: object) -> object | None:
        """Keep ``item``; returns the oldest item dropped when the hold is full."""
        h = self.holds[key]
        h.packets.append(item)
        self.counters["held"] += 1
        if len(h.packets) > self.settings.bus_hold_packets:
            self.counters["hold-full"] += 1
            return h.packets.popleft()
        return None

    def release(self, key: FlowKey) -> list:
        h = self.holds.pop(key, None)
        if h is None:
            return []
        self.counters["released"] += len(h.packets)
        return list(h.packets)

    def expired(self, now: float) -> list:
        """Items of holds older than ``bus_hold_s`` (given up; the caller drops them)."""
        out: list = []
        for key in [k for k, h in self.holds.items() if now - h.since >= self.settings.bus_hold_s]:
            out += self.holds.pop(key).packets
            self.counters["holds-expired"] += 1
        return out

    # -- reliable notices
    def sent(
        self,
        now: float,
        key: NoticeKey,
        next_hop: IPv4Address,
        packet: bytes,
        flow: FlowKey | None = None,
    ) -> None:
        """``packet`` (an ERDN/ERSN) just went to ``next_hop``: retransmit until acked."""
        if key not in self.pending and len(self.pending) >= MAX_NOTICES:
            del self.pending[min(self.pending, key=lambda k: self.pending[k].due)]
            self.counters["notices-evicted"] += 1
        self.pending[key] = _Pending(next_hop, packet, now + self.rexmt, flow)

    def ersn(self, flow: FlowKey, pivot: IPv4Address, ident: int) -> None:
        """An ERSN for ``flow`` from ``pivot``: it supersedes that pivot's ERDNs."""
        if (flow, pivot) not in self.ersn_ident and len(self.ersn_ident) >= MAX_NOTICES:
            del self.ersn_ident[next(iter(self.ersn_ident))]
            self.counters["ersn-evicted"] += 1
        self.ersn_ident[(flow, pivot)] = ident
        for key, p in list(self.pending.items()):
            if key[0] == 1 and key[2] == pivot and p.flow == flow:
                del self.pending[key]
                self.counters["erdn-superseded"] += 1

    def stale_erdn(self, flow: FlowKey, pivot: IPv4Address, ident: int) -> bool:
        """An ERDN older than an ERSN already seen from the same pivot (16-bit idents)."""
        last = self.ersn_ident.get((flow, pivot))
        return last is not None and 0 < ((last - ident) & 0xFFFF) < 0x8000

    def acked(self, key: NoticeKey, by: IPv4Address | None = None) -> bool:
        p = self.pending.get(key)
        if p is None or (by is not None and by != p.next_hop):
            return False
        del self.pending[key]
        self.counters["acked"] += 1
        return True

    def due(self, now: float) -> list[tuple[IPv4Address, bytes]]:
        """Retransmissions due now; notices out of tries are given up."""
        out = []
        for key, p in list(self.pending.items()):
            if p.due > now:
                continue
            if p.tries >= self.settings.bus_max_rexmt:
                del self.pending[key]
                self.counters["notices-given-up"] += 1
                continue
            p.tries += 1
            p.due = now + self.rexmt
            self.counters["retransmitted"] += 1
            out.append((p.next_hop, p.packet))
        if len(self.seen) > 256:
            self.seen = {k: t for k, t in self.seen.items() if now - t < 60}
        return out

    def next_timer(self) -> float | None:
        t = min((p.due for p in self.pending.values()), default=None)
        if self.holds:
            h = min(h.since for h in self.holds.values()) + self.settings.bus_hold_s
            t = h if t is None else min(t, h)
        return t

    def first_time(self, now: float, key: NoticeKey) -> bool:
        """True the first time this node handles the notice ``key``."""
        if key in self.seen:
            self.counters["duplicates"] += 1
            return False
        if len(self.seen) >= MAX_NOTICES:
            del self.seen[next(iter(self.seen))]
            self.counters["seen-evicted"] += 1
        self.seen[key] = now
        return True

    # -- what the engines share (DSR and AODV carry the notices differently)
    def pivot_keys(self, dst: bytes) -> list[FlowKey]:
        """The flows this node holds as the pivot of a break towards ``dst`` (packed)."""
        return [k for k, h in self.holds.items() if h.pivot and k[1] == dst]

    def on_notice(self, now: float, n: mx.Notice, me: IPv4Address, holding: bool) -> NoticeOutcome:
        """The first copy of an ERDN/ERSN at this node (Kim, Toh & Choi IV-B/C).

        At the flow's source the notice becomes an event and goes no further. A node on
        the way starts holding the flow on an ERDN (when ``holding``: BuS is on here) and
        releases it on an ERSN; a stale ERDN (overtaken by its pivot's ERSN) is dropped.
        """
        f = n.flow
        key = flow_key(f)
        source = f.src == me
        common = {"dst": str(f.dst), "src": str(f.src), "sport": f.sport, "dport": f.dport}
        if n.kind == mx.KIND_ERDN:
            self.counters["erdn-received"] += 1
            if self.stale_erdn(key, n.pivot, n.ident):
                self.counters["erdn-stale"] += 1
                return NoticeOutcome(relay=False)
            if source:
                return NoticeOutcome(False, ev.Erdn(**common, seq=f.seq, pivot=str(n.pivot)))
            if holding:
                self.start(now, key)
            return NoticeOutcome(relay=True)
        self.counters["ersn-received"] += 1
        self.ersn(key, n.pivot, n.ident)
        released = self.release(key)
        if source:
            return NoticeOutcome(
                False, ev.Ersn(**common, last_ack=f.seq, pivot=str(n.pivot)), released
            )
        return NoticeOutcome(True, None, released)

    def ersn_for(self, key: FlowKey, dst: IPv4Address, me: IPv4Address) -> mx.Notice:
        """The ERSN this pivot sends for held flow ``key`` once the route to ``dst`` is
        repaired (IV-C): the receiver's Last_ACK when a forwarded ACK told us, else the
        sequence number at the head of the queue."""
        h = self.holds[key]
        last_ack = self.last_ack.get(key)
        flow = mx.Flow(
            IPv4Address(key[0]), dst, key[2], key[3],
            h.head_seq if last_ack is None else last_ack,
            flags=0 if last_ack is None else mx.FLAG_LAST_ACK_KNOWN,
        )  # fmt: skip
        n = mx.Notice(mx.KIND_ERSN, self.next_ident(), me, flow)
        self.ersn(key, me, n.ident)
        self.counters["ersn-sent"] += 1
        return n

    # -- Last_ACK
    def observe(self, src: bytes, dst: bytes, tcp: tuple[int, ...] | None) -> None:
        """A forwarded TCP segment src->dst: its ACK number is the Last_ACK of the
        reverse flow (dst->src data)."""
        if tcp is not None and tcp[4] & 0x10:
            if len(self.last_ack) >= MAX_LAST_ACK:
                self.last_ack.clear()
                self.counters["last-ack-cleared"] += 1
            self.last_ack[(dst, src, tcp[1], tcp[0])] = tcp[3]

    def bounds(self) -> dict[str, dict[str, int]]:
        """The BuS tables: entries, bound, evictions (docs/security.md)."""
        c = self.counters
        return {
            "bus_holds": {
                "size": len(self.holds), "limit": self.settings.bus_max_flows,
                "evicted": c["holds-evicted"],
            },
            "bus_held_packets": {
                "size": sum(len(h.packets) for h in self.holds.values()),
                "limit": self.settings.bus_max_flows * self.settings.bus_hold_packets,
                "evicted": c["hold-full"] + c["held-dropped"],
            },
            "bus_pending": {
                "size": len(self.pending), "limit": MAX_NOTICES, "evicted": c["notices-evicted"]
            },
            "bus_seen": {"size": len(self.seen), "limit": MAX_NOTICES, "evicted": c["seen-evicted"]},
            "bus_ersn": {
                "size": len(self.ersn_ident), "limit": MAX_NOTICES, "evicted": c["ersn-evicted"]
            },
            "bus_last_ack": {
                "size": len(self.last_ack), "limit": MAX_LAST_ACK,
                "evicted": c["last-ack-cleared"],
            },
        }  # fmt: skip

    def status(self) -> dict:
        return {
            "holds": len(self.holds),
            "held_packets": sum(len(h.packets) for h in self.holds.values()),
            "pending_notices": len(self.pending),
            "counters": dict(self.counters),
        }


def flow_key(f: mx.Flow) -> FlowKey:
    """The dict key of a flow (data direction)."""
    return f.src.packed, f.dst.packed, f.sport, f.dport


def flow_from_fields(fields: dict[str, Any]) -> mx.Flow:
    """The ELFN notice of a failed packet (ports and sequence 0 when not TCP)."""
    return mx.Flow(
        IPv4Address(fields["src"]),
        IPv4Address(fields["dst"]),
        fields.get("sport", 0),
        fields.get("dport", 0),
        fields.get("seq", 0),
        fields["proto"],
    )


class Bus:
    """TCP-BuS at one node: the state, and what the DSR and AODV engines do with it alike.

    The state always exists (notices are understood and acknowledged with ``bus`` off);
    holding and pivot repair only with ``bus`` on (:attr:`on`).
    """

    def __init__(self, settings: BusSettings, out: Outbox) -> None:
        self.state = BusState(settings)
        self.on = settings.bus
        self.out = out

    def hold(self, key: FlowKey, packet: bytes) -> None:
        """Keep ``packet`` in ``key``'s hold; a full hold drops its oldest packet."""
        old = self.state.hold(key, packet)
        if old is not None:
            self.out.drop("bus-hold-full", old)  # type: ignore[arg-type]

    def forwarding(
        self, packet: bytes, proto: int, tcp_at: int, held: bytes, pivot_holds: bool
    ) -> bool:
        """A packet about to be forwarded (bus on): note its ACK number for Last_ACK, and
        keep ``held`` (the packet as it is to be kept) if its flow is held here (Kim,
        Toh & Choi IV-C). ``pivot_holds``: a flow held as the pivot keeps its packets
        here too (DSR; AODV's pivot buffers them for its local repair instead)."""
        tcp = tcp_fields(packet, proto, tcp_at)
        if tcp is None:
            return False
        st = self.state
        st.observe(packet[ipv4.SRC], packet[ipv4.DST], tcp)
        if not st.holds:
            return False
        key = (packet[ipv4.SRC], packet[ipv4.DST], tcp[0], tcp[1])
        h = st.holds.get(key)
        if h is None or (h.pivot and not pivot_holds):
            return False
        self.hold(key, held)
        return True

    def first_copy(
        self, now: float, n: mx.Notice, me: IPv4Address, resend: Callable[[float, bytes], None]
    ) -> NoticeOutcome:
        """The first copy of ERDN/ERSN ``n`` at this node (:meth:`BusState.on_notice`):
        its event (at the flow's source) goes out and the packets it releases are sent
        on with ``resend``; the outcome says whether to relay it."""
        got = self.state.on_notice(now, n, me, self.on)
        if got.event is not None:
            self.out.notify(got.event)
        for pkt in got.released:
            resend(now, pkt)
        return got

    def handle_timer(self, now: float) -> None:
        """Retransmit the notices due; give up holds older than ``bus_hold_s``."""
        st = self.state
        if st.pending or st.holds:
            for nh, pkt in st.due(now):
                self.out.send(nh, pkt)
            for pkt in st.expired(now):
                self.out.drop("bus-hold-timeout", pkt)

    def get_timer(self) -> float | None:
        return self.state.next_timer()
