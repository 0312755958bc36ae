"""The one place a scenario (:mod:`manetkit.lab.scenario`) becomes a medium.

The medium's modules (``lab/medium/``: MAC, mobility, propagation, airtime) know nothing
of scenario files; the scenario knows nothing of how the medium is assembled. This module
joins them: the medium process (``lab/medium/server.py``) and the ground-truth tools call
it, nothing else builds a :class:`~manetkit.lab.medium.mac.Medium` from a scenario.
"""

from __future__ import annotations

from typing import Any

from manetkit.lab.medium.airtime import Airtime
from manetkit.lab.medium.channel import Channel, LinkBudget
from manetkit.lab.medium.fqcodel import CodelParams
from manetkit.lab.medium.groundtruth import GroundTruthLog, snapshot_edges
from manetkit.lab.medium.mac import Medium
from manetkit.lab.medium.mobility import (
    MobilityModel,
    RandomWaypoint,
    Static,
    Trajectories,
    World,
)
from manetkit.lab.medium.profiles import PhyProfile
from manetkit.lab.medium.propagation import TwoRayGround
from manetkit.lab.medium.realistic import RealisticMedium
from manetkit.lab.medium.setdest import load_setdest
from manetkit.lab.medium.topology import Snapshot
from manetkit.lab.scenario import RandomWaypointMobility, Scenario, SetdestMobility


def world_from_scenario(scenario: Scenario) -> World:
    """The world (node motion, forced links) a scenario describes."""
    mob = scenario.mobility
    n = scenario.nodes
    if isinstance(mob, RandomWaypointMobility):
        model: MobilityModel = RandomWaypoint(
            n,
            (scenario.area.x, scenario.area.y),
            mob.speed,
            mob.pause_s,
            mob.speed_dist,
            scenario.seed,
        )
    elif isinstance(mob, SetdestMobility):
        trace = load_setdest(scenario.setdest_path(), n, mob.base)
        model = Trajectories.from_setdest(trace, n)
    else:
        model = Static(scenario.static_positions())
    return World(model, n)


def propagation_from_scenario(scenario: Scenario) -> TwoRayGround:
    """Two-ray ground propagation with the scenario's ``propagation`` parameters."""
    return TwoRayGround(**scenario.propagation.model_dump(exclude={"model"}))


def phy_profile_from_scenario(scenario: Scenario) -> PhyProfile:
    """A realistic profile's parameters with the scenario's ``radio`` overrides."""
    idx = {name: k for k, name in enumerate(scenario.node_names)}
    return scenario.radio.phy_profile(idx)


def medium_from_scenario(
    scenario: Scenario, world: World | None = None, airtime_scale: float = 1.0
) -> Medium | RealisticMedium:
    """The medium a scenario's ``radio`` (its profile), ``propagation`` and ``links``
    describe: the ns2 :class:`Medium` or the :class:`RealisticMedium`."""
    r = scenario.radio
    idx = {name: k for k, name in enumerate(scenario.node_names)}
    if r.profile != "ns2":
        return RealisticMedium(
            world or world_from_scenario(scenario),
            phy_profile_from_scenario(scenario),
            queue_frames=r.queue_frames,
            retry_limit=r.retry_limit,
            rts_threshold=r.rts_threshold,
            short_preamble=r.short_preamble,
            loss=r.loss,
            link_loss={(idx[lk.a], idx[lk.b]): lk.loss for lk in scenario.links},
            seed=scenario.seed,
            airtime_scale=airtime_scale,
            overhear=r.overhear,
            queue=r.queue,
            codel=CodelParams(
                target_s=r.codel_target_ms / 1000, interval_s=r.codel_interval_ms / 1000
            ),
        )
    return Medium(
        world or world_from_scenario(scenario),
        Airtime(r.rate_mbps, r.basic_rate_mbps, r.short_preamble, r.rts_threshold),
        propagation_from_scenario(scenario),
        queue_frames=r.queue_frames,
        retry_limit=r.retry_limit,
        loss=r.loss,
        link_loss={(idx[lk.a], idx[lk.b]): lk.loss for lk in scenario.links},
        interference=r.interference,
        seed=scenario.seed,
        airtime_scale=airtime_scale,
        overhear=r.overhear,
        priqueue=r.priqueue,
    )


def scenario_events(
    scenario: Scenario, duration_s: float | None = None, step_s: float = 0.1
) -> list[dict[str, Any]]:
    """The ground-truth events a scenario's mobility produces (no medium needed): on a
    realistic profile the usable links of its channel, with the same shadowing as the
    medium's for the same seed (``channel.py``)."""
    world = world_from_scenario(scenario)
    duration = duration_s if duration_s is not None else (scenario.duration_s or 0.0)
    if scenario.radio.profile == "ns2":
        prop = propagation_from_scenario(scenario)

        def snap(t: float) -> Snapshot | LinkBudget:
            return Snapshot(t, world.positions(t), prop, world.links)

        rule = None
    else:
        channel = Channel(phy_profile_from_scenario(scenario), world, scenario.seed)
        snap = channel.snapshot
        rule = channel.link_rule()
    log = GroundTruthLog(None, t0_wall=0.0, rule=rule)
    events = []
    steps = int(round(duration / step_s)) if world.mobile else 0
    for k in range(steps + 1):
        t = k * step_s
        ev = log.observe(t, snapshot_edges(snap(t)))
        if ev is not None:
            events.append(ev)
    return events
