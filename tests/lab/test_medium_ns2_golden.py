"""The ns2 profile stays bit-for-bit what it was: seeded traces of the sans-I/O MAC,
hashed over the full output sequence (every Delivery and TxStatus with its virtual time,
every accepted or refused transmit) and the final counters.

The hashes were recorded from the MAC before the realistic profiles existed; a change
to ``lab/medium/mac.py``, ``airtime.py``, ``propagation.py``, ``topology.py`` or
``mobility.py`` that alters any of them changes what the papers' reproductions measured.
If such a change is intended, it is a change of the ns2 profile: say so in docs/medium.md
and re-record (``python -m tests.lab.test_medium_ns2_golden``).
"""

from __future__ import annotations

import hashlib
import random

import pytest

from manetkit.lab.medium.airtime import Airtime
from manetkit.lab.medium.mac import Delivery, Medium
from manetkit.lab.medium.mobility import RandomWaypoint, Static, World
from manetkit.lab.medium.protocol import BROADCAST_MAC, node_mac


def _frame(rng: random.Random, src: int, dst: int | None) -> bytes:
    d = BROADCAST_MAC if dst is None else node_mac(dst)
    size = rng.choice((60, 98, 590, 1078, 1514))
    body = rng.randbytes(size - 14)
    return d + node_mac(src) + b"\x88\xb5" + body


def trace(m: Medium, flows, until: float, seed: int, actions=()) -> str:
    """Drive ``m`` with Poisson arrivals per flow ``(src, dst|None, frames_per_s)`` until
    ``until``; ``actions``: ``(t, callable(m, t))`` applied at fake time t. Returns the
    sha256 of the whole output sequence."""
    rng = random.Random(seed)
    h = hashlib.sha256()
    arrivals = [(rng.expovariate(rate), k) for k, (_, _, rate) in enumerate(flows)]
    pending = sorted(actions, key=lambda a: a[0])
    t = 0.0
    while True:
        nxt_arrival = min(arrivals)[0] if arrivals else float("inf")
        nxt_action = pending[0][0] if pending else float("inf")
        nxt_timer = m.get_timer()
        nxt_timer = float("inf") if nxt_timer is None else nxt_timer
        t = min(nxt_arrival, nxt_action, nxt_timer)
        if t > until:
            break
        if t == nxt_action:
            _, act = pending.pop(0)
            act(m, t)
            h.update(f"A{t!r}".encode())
        elif t == nxt_arrival:
            k = min(range(len(arrivals)), key=lambda i: arrivals[i])
            src, dst, rate = flows[k]
            ok = m.transmit(t, src, _frame(rng, src, dst))
            h.update(f"T{t!r}:{src}:{ok}".encode())
            arrivals[k] = (t + rng.expovariate(rate), k)
        else:
            m.handle_timer(t)
        while (ev := m.next_event()) is not None:
            if type(ev) is Delivery:
                h.update(f"D{ev.at!r}:{ev.node}:{ev.rssi_dbm!r}:".encode())
            else:
                h.update(f"S{ev.at!r}:{ev.node}:{ev.dst_mac.hex()}:{ev.retries}:{ev.ok}:".encode())
            h.update(hashlib.sha256(ev.frame).digest())
    h.update(repr(sorted(m.stats().items())).encode())
    return h.hexdigest()


def _static(pos, rate=2.0, rts=2347, short=False, **kw) -> Medium:
    return Medium(World(Static(pos), len(pos)), Airtime(rate, None, short, rts), **kw)


def chain_flows() -> str:
    pos = [(200.0 * i, 0.0) for i in range(6)]
    m = _static(pos, seed=3)
    flows = [(1, 2, 60), (2, 3, 60), (3, 4, 60), (5, 4, 40), (6, 5, 40), (4, 3, 30)]
    return trace(m, flows, 6.0, seed=1)


def broadcast_grid() -> str:
    pos = [(200.0 * (i % 3), 200.0 * (i // 3)) for i in range(9)]
    m = _static(pos, rate=11.0, seed=4)
    flows = [(i, None, 25) for i in range(1, 10)] + [(5, 1, 50), (9, 2, 50)]
    return trace(m, flows, 5.0, seed=2)


def hidden_terminals_interference() -> str:
    pos = [(0.0, 0.0), (240.0, 0.0), (480.0, 0.0), (720.0, 0.0), (240.0, 200.0)]
    m = _static(pos, seed=5, interference=True)
    flows = [(1, 2, 120), (3, 2, 120), (4, 3, 80), (5, None, 20)]
    return trace(m, flows, 6.0, seed=3)


def rts_cts_chain() -> str:
    pos = [(200.0 * i, 0.0) for i in range(5)]
    m = _static(pos, rts=0, seed=6, interference=True)
    flows = [(1, 2, 80), (4, 5, 80), (3, 2, 40), (2, 1, 30), (5, None, 10)]
    return trace(m, flows, 6.0, seed=4)


def moving_nodes() -> str:
    n = 12
    world = World(RandomWaypoint(n, (1000.0, 300.0), 10.0, 0.0, "holland", 7), n)
    m = Medium(world, Airtime(11.0, None, False, 0), seed=7, interference=True)
    flows = [(1, 2, 50), (3, 4, 50), (5, 6, 50), (7, None, 10), (8, None, 10), (9, 10, 30)]
    moves = [
        (2.0, lambda m, t: m.world.move(3, 900.0, 250.0, t, 20.0)),
        (3.0, lambda m, t: m.world.set_link(0, 1, "down")),
        (5.0, lambda m, t: m.world.set_link(0, 1, "up")),
        (6.0, lambda m, t: m.world.set_link(0, 1, "auto")),
        (6.5, lambda m, t: m.world.move(5, 10.0, 10.0, t, None)),
    ]
    return trace(m, flows, 8.0, seed=5, actions=moves)


def random_loss() -> str:
    pos = [(0.0, 0.0), (150.0, 0.0), (0.0, 150.0), (150.0, 150.0)]
    m = _static(
        pos, rate=54.0, seed=8, loss=0.2, link_loss={(0, 1): 0.6, (2, 3): 0.0}, retry_limit=5
    )
    flows = [(1, 2, 200), (3, 4, 200), (2, None, 40), (4, 1, 100)]
    return trace(m, flows, 4.0, seed=6)


def overhearing_and_attach() -> str:
    pos = [(0.0, 0.0), (200.0, 0.0), (100.0, 100.0), (0.0, 600.0), (100.0, -50.0)]
    m = _static(pos, rate=5.5, short=True, seed=9, queue_frames=8)
    m.set_overhear(3, True)
    m.set_overhear(5, True)
    flows = [(1, 2, 150), (2, 1, 100), (4, 1, 20), (5, None, 20), (1, 9, 5)]
    acts = [
        (1.0, lambda m, t: m.set_overhear(3, False)),
        (1.5, lambda m, t: m.set_attached(2, False)),
        (2.5, lambda m, t: m.set_attached(2, True)),
        (3.0, lambda m, t: m.set_overhear(3, True)),
    ]
    return trace(m, flows, 5.0, seed=7, actions=acts)


def airtime_scaled() -> str:
    pos = [(100.0 * i, 0.0) for i in range(4)]
    m = _static(pos, rate=24.0, seed=10, airtime_scale=1e-3)
    flows = [(1, 2, 2000), (3, 4, 2000), (2, None, 500)]
    return trace(m, flows, 0.5, seed=8)


SCENARIOS = {
    "chain_flows": chain_flows,
    "broadcast_grid": broadcast_grid,
    "hidden_terminals_interference": hidden_terminals_interference,
    "rts_cts_chain": rts_cts_chain,
    "moving_nodes": moving_nodes,
    "random_loss": random_loss,
    "overhearing_and_attach": overhearing_and_attach,
    "airtime_scaled": airtime_scaled,
}

GOLDEN = {
    "chain_flows": "26c51f29e0420557afd881bb408f47691a17fa7ebdadb748d1eeee1d286a1a3b",
    "broadcast_grid": "65f3b2918f87b51f69ad57ca9a24c5e2dae52f6529ff511b4553b659a2781870",
    "hidden_terminals_interference": "eaec801c4e4d7321e42206bd9eb287ff804257b8eb490adfa32aaf342017575c",
    "rts_cts_chain": "6ab9df52837f0b591d018df0399ba9450a89bf77c27f0b6d013497ab0a041596",
    "moving_nodes": "1ab60f4c5c33eaf988b9081b648c06709c88bc995aeb1cf8a77e5a046daef3c4",
    "random_loss": "5b5ef5a201ac29a699262900c71983ec51aa4b711e22077ce885ff37806b10ed",
    "overhearing_and_attach": "5bdf936f6c897a3efa63823656f925bbd68a82855ab8b7c91a4853ec23324cf9",
    "airtime_scaled": "9cd47c54521c4960daa623cf7e42b849f5630adee14a5917be6129a152a580ef",
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_ns2_trace_unchanged(name):
    assert SCENARIOS[name]() == GOLDEN[name]


if __name__ == "__main__":
    for name, fn in SCENARIOS.items():
        print(f'    "{name}": "{fn()}",')
