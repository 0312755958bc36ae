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


def fq_codel_overload() -> str:
    """mac80211's FQ-CoDel queues, two senders offering more than the channel carries."""
    pos = [(0.0, 0.0), (40.0, 0.0), (80.0, 0.0)]
    m = _static(pos, B.with_(rate_mbps=2.0), seed=11, queue="fq_codel")
    flows = [(1, 2, 300), (3, 2, 200), (2, None, 10)]
    return trace(m, flows, 2.0, seed=8)


SCENARIOS = {
    "one_area": one_area,
    "chain_rts": chain_rts,
    "gray_zone_chain": gray_zone_chain,
    "moving_minstrel": moving_minstrel,
    "capture_and_offsets": capture_and_offsets,
    "overhear_attach_loss": overhear_attach_loss,
    "airtime_scaled": airtime_scaled,
    "fq_codel_overload": fq_codel_overload,
}

GOLDEN = {
    "one_area": "669ff90d8b4e9858a603eb92614f367f493c8ec966d23b88471d951464ee9890",
    "chain_rts": "9d8864b7d984747a9f8d67cf837e4001d339ccc863b73d6f927d6fc0a23aa7b9",
    "gray_zone_chain": "0bbf8d2ea3f41810854d7f877d7ca09489dd331d84b8f424c4b3d3b46ef02b92",
    "moving_minstrel": "e905e72267339c04aa21849b755527514b96058bb0ae0bc9a31d8b0f25feffce",
    "capture_and_offsets": "a5256dc9d9fdf540db236875066ddf65f5c0260c135a5e541129c54f7f92f74d",
    "overhear_attach_loss": "32f597d311d74e0dc5cf74b418df331124458a93872a4d2811fa42d8a8561951",
    "airtime_scaled": "00479ab0f89c27f0c5153b55cdd628ff6ca9aa414a2b280006ccb5b12f6091df",
    "fq_codel_overload": "a8d1567b9646857b72ae912a981abe4bdd700a01435e5c03f49e2f0f83745c78",
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_realistic_trace_unchanged(name):
    assert SCENARIOS[name]() == GOLDEN[name]


if __name__ == "__main__":
    for name, fn in SCENARIOS.items():
        print(f'    "{name}": "{fn()}",')
