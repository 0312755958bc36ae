"""AODV on the shared in-process simulator (``enginesim``): builders and checks.

``network(n, links)`` wires AodvEngines with a fake clock; ``data(src, dst, i)`` is a
UDP packet whose payload carries ``i`` so tests can check order and count copies;
``loop_free(sim)`` checks RFC 3561's loop-freedom invariant along every next-hop chain.
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address

from manetkit.daemon.engines.aodv import AodvConfig, AodvEngine
from manetkit.daemon.engines.aodv.routetable import VALID, seq_newer
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemon.wire import aodv, ipv4
from tests.daemon.enginesim import Sim, chain

__all__ = ["Sim", "chain", "network", "data", "payload_id", "control", "loop_free", "addr"]


def addr(i: int) -> IPv4Address:
    return IPv4Address(f"10.42.0.{i}")


def network(
    nodes: Iterable[IPv4Address],
    links: Iterable[tuple[IPv4Address, IPv4Address]],
    config: AodvConfig | None = None,
    **overrides,
) -> Sim:
    cfg = config or AodvConfig(**({"hellos": False} | overrides))
    engines = {a: AodvEngine(a, cfg, NeighbourTable()) for a in nodes}
    return Sim(engines, links)


def data(src: IPv4Address, dst: IPv4Address, i: int, ttl: int = 64) -> bytes:
    body = ipv4.udp(40000, 9, i.to_bytes(4, "big") + b"x" * 28, src, dst)
    return ipv4.build(src, dst, ipv4.PROTO_UDP, body, ttl=ttl, ident=i & 0xFFFF)


def payload_id(packet: bytes) -> int:
    return int.from_bytes(packet[28:32], "big")


def control(sim: Sim, sender: IPv4Address | None = None) -> list[tuple[object, aodv.Message]]:
    """(frame, parsed message) of every AODV control frame sent (by ``sender``)."""
    out = []
    for f in sim.frames:
        if (sender is None or f.sender == sender) and aodv.is_control(f.packet):
            out.append((f, aodv.parse_control(f.packet)[1]))
    return out


def loop_free(sim: Sim) -> list[str]:
    """Violations of AODV's invariant (RFC 3561 6.1, Perkins & Royer): following valid
    next hops towards a destination, (dest seq, -hops) strictly increases, so no chain
    of next hops can close a loop. Returns a list of problems (empty = loop free)."""
    problems = []
    for a, eng in sim.engines.items():
        for r in eng.route_table:
            if r.state is not VALID or r.next_hop == r.dst:
                continue
            nxt = sim.engines.get(r.next_hop)
            if nxt is None:
                continue
            n = nxt.route(r.dst)
            if n is None or n.state is not VALID or not (r.valid_seq and n.valid_seq):
                continue
            if seq_newer(r.seq, n.seq) or (r.seq == n.seq and n.hops >= r.hops):
                problems.append(
                    f"{a}->{r.dst} via {r.next_hop} (seq {r.seq}, {r.hops} hops) but "
                    f"{r.next_hop} has seq {n.seq}, {n.hops} hops"
                )
    # And no valid next-hop chain returns to a node it has visited.
    for a, eng in sim.engines.items():
        for r in eng.route_table:
            if r.state is not VALID:
                continue
            seen, at = {a}, a
            while at != r.dst:
                e = sim.engines.get(at)
                rr = e.route(r.dst) if e is not None else None
                if rr is None or rr.state is not VALID:
                    break
                at = rr.next_hop
                if at in seen:
                    problems.append(f"loop towards {r.dst} through {sorted(seen)}")
                    break
                seen.add(at)
    return problems
