"""Helpers shared by the DSR engine tests: node addresses, packets, a DSR network."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from ipaddress import IPv4Address

from manetkit.daemon.engines.dsr import DsrConfig, DsrEngine
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.wire import dsr, ipv4
from tests.daemon.enginesim import Sim


def A(i: int) -> IPv4Address:
    return IPv4Address(f"10.42.0.{i}")


def udp_packet(
    src: IPv4Address, dst: IPv4Address, payload: bytes = b"hello", ident: int = 0
) -> bytes:
    return ipv4.build(
        src, dst, ipv4.PROTO_UDP, ipv4.udp(5000, 6000, payload, src, dst), ident=ident
    )


def tcp_packet(src: IPv4Address, dst: IPv4Address, sport: int, dport: int, seq: int) -> bytes:
    """A bare TCP segment (ACK flag, no payload) inside IPv4."""
    seg = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x10, 65535, 0, 0)
    return ipv4.build(src, dst, ipv4.PROTO_TCP, seg)


def dsr_net(
    n: int | Iterable[int],
    links: Iterable[tuple[int, int]],
    promiscuous: bool = False,
    **cfg,
) -> Sim:
    ids = range(1, n + 1) if isinstance(n, int) else n
    engines = {A(i): DsrEngine(A(i), DsrConfig(seed=i, **cfg), NeighbourTable()) for i in ids}
    return Sim(engines, [(A(a), A(b)) for a, b in links], promiscuous=promiscuous)


def chain_links(n: int) -> list[tuple[int, int]]:
    return [(i, i + 1) for i in range(1, n)]


def options(packet: bytes) -> list:
    _, hdr = dsr.parse(packet)
    return [p.option for p in hdr.options]


def first(packet: bytes, kind: type):
    return next((o for o in options(packet) if isinstance(o, kind)), None)


def paths(sim: Sim, node: int) -> list[tuple[int, ...]]:
    eng = sim.engines[A(node)]
    return sorted(tuple(int(str(a).rsplit(".", 1)[1]) for a in e.path) for e in eng.cache.entries())


def uses_link(path: tuple[int, ...], a: int, b: int) -> bool:
    return any({x, y} == {a, b} for x, y in zip(path, path[1:], strict=False))


def after_hops(packet: bytes, hops: int) -> bytes:
    """``packet`` as it arrives after ``hops`` hops: each forwarder decrements TTL."""
    buf = bytearray(packet)
    for _ in range(hops - 1):
        ipv4.decrement_ttl(buf)
    return bytes(buf)
