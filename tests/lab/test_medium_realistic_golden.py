"""The realistic MAC's results are pinned: seeded traces of the sans-I/O
:class:`RealisticMedium`, hashed over the full output sequence (every Delivery and
TxStatus with its virtual time, every accepted or refused transmit) and the final
counters, as the ns2 profile's are (``test_medium_ns2_golden.py``).

A speed-up of the MAC must leave every hash as it is. A change of the model (a new rule,
a corrected parameter) changes them: say what changed in docs/medium.md and re-record
(``python -m tests.lab.test_medium_realistic_golden``).
"""

from __future__ import annotations

import pytest

from manetkit.lab.medium.mobility import RandomWaypoint, Static, World
from manetkit.lab.medium.profiles import NodeOffset, profile_defaults
from manetkit.lab.medium.realistic import RealisticMedium
from tests.lab.test_medium_ns2_golden import trace

B = profile_defaults("outdoor", "802.11b")
G = profile_defaults("outdoor", "802.11g")
INDOOR_G = profile_defaults("indoor", "802.11g")


def _static(pos, profile, **kw) -> RealisticMedium:
    return RealisticMedium(World(Static(pos), len(pos)), profile, **kw)


def one_area() -> str:
    """Ten nodes within 20 m at 11 Mbit/s, shadowing and fading: collisions, retries."""
    pos = [(10.0 * (k % 4), 7.0 * (k // 4)) for k in range(10)]
    m = _static(pos, B, seed=3)
    flows = [(k, k % 10 + 1, 120) for k in range(1, 11)] + [(3, None, 20), (8, None, 20)]
    return trace(m, flows, 1.5, seed=1)


def chain_rts() -> str:
    """A 100 m chain with RTS/CTS on every unicast: NAVs, hidden terminals, both ways."""
    pos = [(100.0 * i, 0.0) for i in range(6)]
    m = _static(pos, B, seed=4, rts_threshold=0)
    flows = [(1, 2, 80), (2, 3, 80), (3, 4, 60), (6, 5, 60), (5, 4, 40), (4, None, 10)]
    return trace(m, flows, 2.0, seed=2)


def gray_zone_chain() -> str:
    """Hops of 180 m: broadcasts get through, 11 Mbit/s unicasts mostly fail."""
    pos = [(180.0 * i, 0.0) for i in range(4)]
    m = _static(pos, B.with_(shadowing_sigma_db=0.0), seed=5)
    flows = [(1, 2, 60), (2, 3, 60), (4, 3, 40), (1, None, 30), (3, None, 30)]
    return trace(m, flows, 2.0, seed=3)


def moving_minstrel() -> str:
    """Indoor 802.11g under Minstrel, nodes walking, links forced down and up."""
    n = 12
    world = World(RandomWaypoint(n, (120.0, 60.0), 3.0, 0.0, "holland", 7), n)
    m = RealisticMedium(world, INDOOR_G.with_(rate_control="minstrel"), seed=7)
    flows = [(1, 2, 150), (3, 4, 150), (5, 6, 100), (7, None, 20), (8, None, 20), (9, 10, 80)]
    moves = [
        (0.5, lambda m, t: m.world.move(3, 100.0, 50.0, t, 5.0)),
        (0.8, lambda m, t: m.world.set_link(0, 1, "down")),
        (1.2, lambda m, t: m.world.set_link(0, 1, "up")),
        (1.6, lambda m, t: m.world.set_link(0, 1, "auto")),
        (1.8, lambda m, t: m.world.move(5, 10.0, 10.0, t, None)),
    ]
    return trace(m, flows, 2.5, seed=4, actions=moves)


def capture_and_offsets() -> str:
    """802.11g with message-in-message capture, asymmetric nodes, hidden terminals."""
    pos = [(0.0, 0.0), (60.0, 0.0), (120.0, 0.0), (60.0, 25.0), (200.0, 0.0), (15.0, 40.0)]
    prof = G.with_(
        capture_threshold_db=10.0,
        node_offsets={0: NodeOffset(tx_power_db=4.0), 2: NodeOffset(noise_figure_db=5.0)},
    )
    m = _static(pos, prof, seed=8)
    flows = [(1, 2, 300), (3, 2, 300), (4, 2, 200), (5, 3, 150), (6, None, 40), (2, 6, 100)]
    return trace(m, flows, 1.5, seed=5)


def overhear_attach_loss() -> str:
    """Overhearers, detach and re-attach, random and per-link loss, short preamble,
    short queues, DCF (no WMM), a fresh fading draw for every frame."""
    pos = [(0.0, 0.0), (60.0, 0.0), (30.0, 30.0), (0.0, 400.0), (40.0, -20.0)]
    prof = B.with_(wmm=False, coherence_time_s=0.0, rate_mbps=5.5)
    m = _static(
        pos,
        prof,
        seed=9,
        queue_frames=8,
        short_preamble=True,
        loss=0.1,
        link_loss={(0, 1): 0.3},
        retry_limit=4,
    )
    m.set_overhear(3, True)
    m.set_overhear(5, True)
    flows = [(1, 2, 150), (2, 1, 100), (4, 1, 20), (5, None, 20), (1, 9, 5)]
    acts = [
        (0.5, lambda m, t: m.set_overhear(3, False)),
        (0.8, lambda m, t: m.set_attached(2, False)),
        (1.2, lambda m, t: m.set_attached(2, True)),
        (1.5, lambda m, t: m.set_overhear(3, True)),
    ]
    return trace(m, flows, 2.0, seed=6, actions=acts)


def airtime_scaled() -> str:
    """The bench's capacity set-up: every 802.11 duration scaled down, 54 Mbit/s."""
    pos = [(10.0 * i, 0.0) for i in range(4)]
    m = _static(pos, G, seed=10, airtime_scale=1e-3)
    flows = [(1, 2, 4000), (3, 4, 4000), (2, None, 500)]
    return trace(m, flows, 0.3, seed=7)


SCENARIOS = {
    "one_area": one_area,
    "chain_rts": chain_rts,
    "gray_zone_chain": gray_zone_chain,
    "moving_minstrel": moving_minstrel,
    "capture_and_offsets": capture_and_offsets,
    "overhear_attach_loss": overhear_attach_loss,
    "airtime_scaled": airtime_scaled,
}

GOLDEN = {
    "one_area": "644af04d489c1fee56adf3063b5fede2fafcb849f7763d8a6ad3c3399185dec6",
    "chain_rts": "49582fb33dd23ca28720ea5eab1fd2c8b6d3818eeaa0a2bc63b6129654656528",
    "gray_zone_chain": "266c93974504e8b9f8309081f5b7e65ad8efcbb4643fe8aab7fa49bbb2a2f0e7",
    "moving_minstrel": "7f62b8de0c62a0ba1220b95478f4571ae1338b207df12b9f580d9bfdde4b8e79",
    "capture_and_offsets": "83b67fb79d5762015c122e8430510ab7cc91368cd324320373f4ebe127578db7",
    "overhear_attach_loss": "4b622cf469dde96e3425dbbf654a7e23a8e63036bf1fb8d31195bad79919f1ef",
    "airtime_scaled": "3227c6df7ea23c942a9ca011a8a4b2e35b97f5f0bd885d0ab03d3911ca26963e",
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_realistic_trace_unchanged(name):
    assert SCENARIOS[name]() == GOLDEN[name]


if __name__ == "__main__":
    for name, fn in SCENARIOS.items():
        print(f'    "{name}": "{fn()}",')
