"""Atra's trend predictor replayed offline on a realistic scenario's own channel.

No lab: the scenario's mobility and the medium's channel (``manetkit.lab.medium.channel``:
the same seed gives the same shadowing as the live medium's) give every pair's mean
power every 0.1 s. Every node sends one beacon a second (a 40-byte IP packet at 1 Mbit/s,
the daemons' beacon, at a random phase); each receiver draws the frame's Nakagami fade
(m of the profile, independent per beacon: a second is far beyond the coherence time),
detects it at or above -97 dBm and 5 dB under the noise at most (the profile's preamble
rule), decodes it with the medium's DSSS error model on its SNR (no interference), and
reports its power rounded to 1 dB at the next 0.2 s poll, as the lab's link sensing
does for a neighbour that sends no data. Each node runs one
:class:`~manetkit.daemon.engines.atra.trend.TrendPredictor`; a neighbour not heard for
3 s is lost (``link_sensing.hysteresis.inactive_s``). Scored with the ``atra`` plug-in's
rules (:func:`~manetkit.experiment.plugins.atra.score`, :func:`classify_breaks`), every
lost neighbour a break dated when it was last heard.

    python3 tools/atra_replay.py -80 -86 -95      # rx_threshold_dbm values

prints, per threshold, the precision and recall over a 100 s window after 60 s
(rwp-30-outdoor at 20 m/s, seed 1: docs/results/atra-realistic's run).
"""

from __future__ import annotations

import json
import math
import random
import sys
from ipaddress import IPv4Address
from typing import Any

from manetkit.daemon.engines.atra.config import AtraConfig
from manetkit.daemon.engines.atra.trend import TrendPredictor
from manetkit.experiment.plugins.atra import classify_breaks, score
from manetkit.lab.build import phy_profile_from_scenario, world_from_scenario
from manetkit.lab.medium.airtime import mpdu_bytes
from manetkit.lab.medium.channel import Channel
from manetkit.lab.medium.errormodels import SHARED_TABLE, frame_layout, frame_success
from manetkit.lab.scenario import load_scenario

BEACON_IP_BYTES = 40  # IPv4 + UDP + the beacon (manetkit/daemon/linksense/hello.py)
POLL_S = 0.2
SILENCE_S = 3.0
STEP_S = 0.1


def replay(
    threshold_dbm: float,
    scenario: str = "configs/scenarios/rwp-30-outdoor.yaml",
    speed: float = 20.0,
    seed: int = 1,
    window: tuple[float, float] = (60.0, 160.0),
    beacon_hz: float = 1.0,
    rng_seed: int = 7,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(:func:`score`'s precision, :func:`classify_breaks`' recall) of one replay."""
    sc = load_scenario(
        scenario, {"seed": str(seed), "mobility.speed": f"{speed:g}", "mobility.pause_s": "0"}
    )
    profile = phy_profile_from_scenario(sc)
    channel = Channel(profile, world_from_scenario(sc), sc.seed)
    n, (t0, t1) = sc.nodes, window
    layout = frame_layout(mpdu_bytes(14 + BEACON_IP_BYTES), min(profile.rates))
    noise = float(channel.noise_dbm[0])
    m = profile.nakagami_m
    rng = random.Random(rng_seed)
    cfg = AtraConfig(rfp=True, predictor="trend", rx_threshold_dbm=threshold_dbm)
    predictors = [TrendPredictor(cfg) for _ in range(n)]
    beacons = sorted(
        (phase + k / beacon_hz, i)
        for i, phase in enumerate(rng.random() / beacon_hz for _ in range(n))
        for k in range(int((t1 + SILENCE_S) * beacon_hz) + 1)
    )
    heard: dict[tuple[int, int], float] = {}  # (receiver, sender) -> last poll heard
    preds: list[tuple[float, str, str]] = []
    breaks: list[tuple[float, str, str, str, float]] = []
    graph: list[dict[str, Any]] = []
    edges_before: set[frozenset[str]] | None = None
    k = 0
    for step in range(int((t1 + SILENCE_S) / STEP_S) + 1):
        t = step * STEP_S
        budget = channel.snapshot(t)
        edges = {frozenset((f"n{i + 1}", f"n{j + 1}")) for i, j in budget.edges()}
        if edges != edges_before:
            graph.append({"wall": t, "edges": [sorted(e) for e in edges]})
            edges_before = edges
        while k < len(beacons) and beacons[k][0] < t + STEP_S:
            tb, i = beacons[k]
            k += 1
            for j in range(n):
                if j == i:
                    continue
                fade = rng.gammavariate(m, 1 / m) if m else 1.0
                p = budget.dbm[i][j] + 10 * math.log10(fade)
                if p < profile.preamble_min_rssi_dbm or p - noise < profile.preamble_min_snr_db:
                    continue
                if rng.random() > frame_success(SHARED_TABLE, layout, p - noise):
                    continue
                poll = math.ceil(tb / POLL_S) * POLL_S
                heard[(j, i)] = poll
                got = predictors[j].sample(poll, IPv4Address(f"10.42.0.{i + 1}"), float(round(p)))
                if got is not None and t0 <= poll <= t1:
                    preds.append((poll, f"n{j + 1}", f"n{i + 1}"))
        for (j, i), last in list(heard.items()):
            if t >= last + SILENCE_S:
                del heard[(j, i)]
                predictors[j].link_failed(t, IPv4Address(f"10.42.0.{i + 1}"))
                if t0 <= t <= t1:
                    breaks.append((t, f"n{j + 1}", f"n{i + 1}", "silent", last))
    horizon = 2 * cfg.lookahead_s
    return score(preds, graph, horizon), classify_breaks(breaks, preds, graph, horizon)


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["-95"]:
        s, b = replay(float(arg))
        keep_s = ("predictions", "precision", "mean_lead_s", "false_alarms_already_gone")
        keep_b = ("breaks", "predicted", "recall")
        print(json.dumps({"rx_threshold_dbm": float(arg), **{k: s[k] for k in keep_s},
                          **{k: b[k] for k in keep_b}}))  # fmt: skip
