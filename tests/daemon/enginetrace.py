"""Full output traces of seeded multi-node engine runs, for behaviour-preservation checks.

A scenario moves ten nodes over a 700 m x 450 m field (straight lines, bouncing off the
edges) for 40 s of fake time; two nodes are linked while they are within the two-ray
ground model's range. Link changes reach the engines the ways the daemon's link
sensing delivers them: some as ``LinkUp``/``LinkDown``, others only as the 802.11
``TxFailed`` of the next unicast frame; every linked pair feeds ``SignalSample``s
(Atra's RFP). A seeded 3 % of frames are lost on the air. Two UDP flows and two TCP flows
(each data segment answered by a pure ACK, which SRP pins and TCP-BuS reads) run
throughout; the ELFN probe (``rediscover``) and a malformed frame come in on the way.

The trace is every output of every engine, in order, with its time: frames sent (their
bytes), deliveries, events, drops, and the timer each engine asks for after every
input, plus each engine's ``status()`` every 10 s. ``tests/daemon/test_engine_traces.py``
holds the traces' SHA-256 as recorded before the engines were recomposed from
components; a refactoring that changes any output changes the hash.

    python3 -m tests.daemon.enginetrace            # print every case's hash
    python3 -m tests.daemon.enginetrace DIR        # and write the traces to DIR
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import struct
import sys
from collections.abc import Callable
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

from manetkit.daemon.engines.aodv import AodvConfig, AodvEngine
from manetkit.daemon.engines.atra import AtraConfig
from manetkit.daemon.engines.base import SignalSample
from manetkit.daemon.engines.dsr import DsrConfig, DsrEngine
from manetkit.daemon.engines.linkquality.config import LinkQualityConfig, VetoConfig
from manetkit.daemon.engines.smr import SmrConfig, SmrEngine
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.wire import ipv4
from manetkit.events import fields_of, name_of
from manetkit.lab.medium.propagation import TwoRayGround
from tests.daemon.enginesim import Sim

N = 10
DURATION = 40.0
STEP = 0.25  # s between mobility updates
MODEL = TwoRayGround()
RANGE = MODEL.range_m()
FIELD = (700.0, 450.0)


def addr(i: int) -> IPv4Address:
    return IPv4Address(f"10.42.0.{i}")


def record(out: Any) -> str:
    """One output as a line, independent of the output classes' names."""
    if hasattr(out, "event"):
        return f"notify {name_of(out.event)} {json.dumps(fields_of(out.event), sort_keys=True)}"
    if hasattr(out, "next_hop"):
        return f"send {out.next_hop} {out.packet.hex()}"
    if hasattr(out, "reason"):
        return f"drop {out.reason} {out.packet.hex()}"
    return f"deliver {out.packet.hex()}"


class TraceSim(Sim):
    """:class:`Sim` that records every output and timer; TCP receivers answer with ACKs."""

    def __init__(self, engines: dict[IPv4Address, Any], **kw: Any) -> None:
        super().__init__(engines, **kw)
        self.trace: list[str] = []
        self.acks = True

    def _drain(self, node: IPv4Address) -> None:
        eng = self.engines[node]
        while (a := eng.next_event()) is not None:
            self.trace.append(f"{self.now:.6f} {node} {record(a)}")
            if hasattr(a, "event"):
                self.notified[node].append(a)
            elif hasattr(a, "next_hop"):
                self._transmit(node, a)
            elif hasattr(a, "reason"):
                self.dropped[node].append(a)
            else:
                self.delivered[node].append(a.packet)
                self._answer(node, a.packet)
        self.trace.append(f"{self.now:.6f} {node} timer {eng.get_timer()}")

    def _answer(self, node: IPv4Address, packet: bytes) -> None:
        """A TCP data segment delivered: its receiver sends a pure ACK 2 ms later."""
        if not self.acks or packet[ipv4.PROTOCOL] != ipv4.PROTO_TCP:
            return
        ihl = (packet[0] & 0x0F) * 4
        sport, dport, seq = struct.unpack_from("!HHI", packet, ihl)
        payload = len(packet) - ihl - 20
        if payload <= 0:
            return
        src = IPv4Address(packet[ipv4.SRC])
        ack = tcp(node, src, dport, sport, 1, seq + payload, b"")
        self._at(self.now + 0.002, lambda: self.send(node, ack))

    def status_all(self) -> None:
        for node in sorted(self.engines):
            st = self.engines[node].status()
            self.trace.append(f"{self.now:.6f} {node} status {json.dumps(st, sort_keys=True)}")


def tcp(
    src: IPv4Address,
    dst: IPv4Address,
    sport: int,
    dport: int,
    seq: int,
    ack: int,
    payload: bytes,
) -> bytes:
    seg = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, 0x18 if payload else 0x10,
                      65535, 0, 0)  # fmt: skip
    return ipv4.build(src, dst, ipv4.PROTO_TCP, seg + payload, ident=seq & 0xFFFF)


def udp(src: IPv4Address, dst: IPv4Address, i: int) -> bytes:
    body = ipv4.udp(5000, 6000, struct.pack("!I", i) + b"u" * 60, src, dst)
    return ipv4.build(src, dst, ipv4.PROTO_UDP, body, ident=i & 0xFFFF)


class Field:
    """Deterministic straight-line motion with reflection at the edges."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.start = {
            i: (rng.uniform(0, FIELD[0]), rng.uniform(0, FIELD[1])) for i in range(1, N + 1)
        }
        self.vel = {
            i: (rng.uniform(-12, 12), rng.uniform(-8, 8)) if i % 3 else (0.0, 0.0)
            for i in range(1, N + 1)
        }

    def pos(self, i: int, t: float) -> tuple[float, float]:
        out = []
        for k in (0, 1):
            span = FIELD[k]
            x = (self.start[i][k] + self.vel[i][k] * t) % (2 * span)
            out.append(x if x <= span else 2 * span - x)
        return out[0], out[1]

    def dist(self, a: int, b: int, t: float) -> float:
        pa, pb = self.pos(a, t), self.pos(b, t)
        return max(math.hypot(pa[0] - pb[0], pa[1] - pb[1]), 1.0)


FLOWS_UDP = ((1, 10, 0.2), (5, 8, 0.3))  # (src, dst, period s)
FLOWS_TCP = ((2, 9, 0.1, 40001), (3, 7, 0.15, 40002))


def run(
    make: Callable[[IPv4Address], Any],
    seed: int = 7,
    promiscuous: bool = False,
    signals: bool = True,
) -> list[str]:
    """The scenario above with the engines ``make`` builds; the trace lines."""
    nodes = {addr(i): make(addr(i)) for i in range(1, N + 1)}
    field = Field(seed)
    sim = TraceSim(nodes, promiscuous=promiscuous)
    loss = random.Random(seed * 1000 + 1)
    sim.frame_filter = lambda f: loss.random() >= 0.03
    up: set[tuple[int, int]] = set()
    pairs = [(a, b) for a in range(1, N + 1) for b in range(a + 1, N + 1)]
    for a, b in pairs:
        if field.dist(a, b, 0.0) <= RANGE:
            sim.link(addr(a), addr(b))
            up.add((a, b))
    counters = {f: 0 for f in (*FLOWS_UDP, *FLOWS_TCP)}
    due = {f: 0.5 + 0.01 * k for k, f in enumerate((*FLOWS_UDP, *FLOWS_TCP))}
    t = 0.0
    step = 0
    while t < DURATION:
        # Traffic up to the next mobility step, in time order.
        nxt = round(t + STEP, 6)
        while True:
            f, when = min(due.items(), key=lambda kv: kv[1])
            if when >= nxt:
                break
            sim.run(until=when)
            counters[f] += 1
            i = counters[f]
            if len(f) == 3:
                sim.send(addr(f[0]), udp(addr(f[0]), addr(f[1]), i))
            else:
                src, dst, _, port = f
                sim.send(addr(src), tcp(addr(src), addr(dst), port, 80, 1000 * i, 1, b"d" * 200))
            due[f] = round(when + f[2], 6)
        sim.run(until=nxt)
        t = nxt
        step += 1
        # Mobility: links appear and disappear.
        for a, b in pairs:
            near = field.dist(a, b, t) <= RANGE
            if near and (a, b) not in up:
                up.add((a, b))
                sim.link(addr(a), addr(b), notify=(a + b) % 3 != 0)
            elif not near and (a, b) in up:
                up.discard((a, b))
                sim.unlink(addr(a), addr(b), notify=(a + b) % 2 == 0)
        if signals and step % 2 == 0:
            for a, b in sorted(up):
                dbm = MODEL.rx_power_dbm(field.dist(a, b, t))
                sim.link_event(addr(a), SignalSample(addr(b), dbm, t))
                sim.link_event(addr(b), SignalSample(addr(a), dbm, t))
        if step == 40:
            sim.inject(addr(4), b"\x45\x00\x00\x30" + bytes(44))  # malformed
        if step % 24 == 0:
            for src, dst, *_ in (*FLOWS_UDP, *FLOWS_TCP):
                sim.rediscover(addr(src), addr(dst))
        if step % 40 == 0:
            sim.status_all()
    sim.run(until=DURATION + 2.0)
    sim.status_all()
    return sim.trace


# The hashes were recorded with the false-failure veto off (it was then off by default):
# the cases keep it off, so they still guard the protocols' own rules.
NO_VETO = LinkQualityConfig(veto=VetoConfig(enabled=False))


def _dsr(**cfg: Any) -> Callable[[IPv4Address], Any]:
    cfg.setdefault("link_quality", NO_VETO)

    def make(a: IPv4Address) -> Any:
        return DsrEngine(a, DsrConfig(seed=int(a) & 0xFF, **cfg), NeighbourTable())

    return make


def _smr(**cfg: Any) -> Callable[[IPv4Address], Any]:
    cfg.setdefault("link_quality", NO_VETO)

    def make(a: IPv4Address) -> Any:
        return SmrEngine(a, SmrConfig(seed=int(a) & 0xFF, **cfg), NeighbourTable())

    return make


def _aodv(**cfg: Any) -> Callable[[IPv4Address], Any]:
    cfg.setdefault("link_quality", NO_VETO)

    def make(a: IPv4Address) -> Any:
        return AodvEngine(a, AodvConfig(**cfg), NeighbourTable())

    return make


ATRA = AtraConfig(rfp=True, pre=True, srp=True)

CASES: dict[str, Callable[[], list[str]]] = {
    "dsr": lambda: run(_dsr(), promiscuous=True),
    "dsr-options": lambda: run(
        _dsr(cache_replies=True, rediscover_on_break=True, target_replies="first",
             salvage=True, broken_link_hold_s=1.0),
        promiscuous=True, seed=11,
    ),
    "dsr-no-grat": lambda: run(_dsr(gratuitous_replies=False, salvage=False), seed=5),
    "dsr-bus": lambda: run(_dsr(bus=True), promiscuous=True, seed=3),
    "dsr-atra": lambda: run(_dsr(atra=ATRA), promiscuous=True),
    "dsr-atra-rfp": lambda: run(_dsr(atra=AtraConfig(rfp=True)), promiscuous=True, seed=13),
    "dsr-atra-bus": lambda: run(_dsr(atra=ATRA, bus=True), promiscuous=True, seed=3),
    "smr-backup1": lambda: run(_smr(), promiscuous=True),
    "smr-backup2": lambda: run(_smr(mode="backup2", max_path_age_s=4.0), promiscuous=True),
    "smr-concurrent": lambda: run(_smr(mode="concurrent", paths=3), promiscuous=True, seed=11),
    "smr-any-broken": lambda: run(
        _smr(rediscover="any-broken", after_all_broken="cache", bus=True), seed=3
    ),
    "smr-atra": lambda: run(_smr(atra=ATRA), promiscuous=True, seed=13),
    "aodv": lambda: run(_aodv()),
    "aodv-options": lambda: run(
        _aodv(rrep_ack=True, gratuitous_rrep=True, local_repair=False, hello_interval_ms=500),
        seed=11,
    ),
    "aodv-dest-only": lambda: run(_aodv(destination_only=True, hellos=False), seed=5),
    "aodv-bus": lambda: run(_aodv(bus=True), seed=3),
    "aodv-atra": lambda: run(_aodv(atra=AtraConfig(rfp=True)), seed=13),
    "aodv-atra-bus": lambda: run(_aodv(atra=ATRA, bus=True), seed=3),
    # The defaults, the veto on (recorded when it became the default).
    "dsr-defaults": lambda: run(_dsr(link_quality=LinkQualityConfig()), promiscuous=True),
    "aodv-defaults": lambda: run(_aodv(link_quality=LinkQualityConfig())),
}  # fmt: skip


def digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    for name, case in CASES.items():
        lines = case()
        if out is not None:
            (out / f"{name}.txt").write_text("\n".join(lines) + "\n")
        print(f'    "{name}": "{digest(lines)}",  # {len(lines)} lines')


if __name__ == "__main__":
    main(sys.argv[1:])
