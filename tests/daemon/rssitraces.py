"""Generated received-signal traces of one link under fading and shadowing, with their
ground truth, to score failure predictors (precision, recall, lead time).

The channel is the realistic outdoor 802.11b profile's (docs/medium.md): transmit power
16 dBm, log-distance path loss 40.05 dB at 1 m with exponent 3, log-normal shadowing
(sigma 4 dB) correlated over the relative distance moved (Gudmundson's exponential,
20 m), Nakagami-m fading (m = 1.5) per frame, held for the coherence time 0.423 c /
(v f) (at least the one of 0.5 m/s); a noise floor of -93.6 dBm (22 MHz, noise figure
7 dB). The sender transmits ``frame_rate`` data frames a second; the receiver hears a
frame when its power reaches -95 dBm (preamble detection) and reports each one's power
rounded to 1 dB, as nl80211 does. An 11 Mbit/s frame gets through with a probability
falling from 1 to 0 around an SNR of 7 dB (the CCK curve's 10 % PER, about the -86.4 dBm
edge).

What a predictor sees, every ``poll_s`` (the lab backend's station poll): the mean power
of the frames heard since the last poll (none heard: no sample) and the share of the
frames sent that did not get through (the data path's loss). The ground truth is the
medium's rule: the link is usable while its mean power (path loss and shadowing, no
fading) is at least the edge, -86.4 dBm; a *break* is a change from usable (for at
least 1 s) to unusable (for at least 1 s).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

C = 299_792_458.0
FREQ_HZ = 2.412e9
TX_DBM = 16.0206
REF_LOSS_DB = 40.05
EXPONENT = 3.0
SIGMA_DB = 4.0
DECORRELATION_M = 20.0
NAKAGAMI_M = 1.5
NOISE_DBM = -93.6
PREAMBLE_DBM = -95.0
EDGE_DBM = -86.4  # the mean power where 11 Mbit/s frames of 1500 bytes get 10 % PER
RANGE_M = 10 ** ((TX_DBM - REF_LOSS_DB - EDGE_DBM) / (10 * EXPONENT))  # ~121 m

Motion = Callable[[float], tuple[float, float]]  # t -> relative position (m)


@dataclass
class Trace:
    name: str
    samples: list[tuple[float, float, float | None]] = field(default_factory=list)
    usable: list[tuple[float, bool]] = field(default_factory=list)  # every poll

    def breaks(self, hold_s: float = 1.0) -> list[float]:
        """Times the link went from usable (for ``hold_s``) to unusable (for ``hold_s``)."""
        out, runs = [], []
        for t, u in self.usable:
            if runs and runs[-1][1] == u:
                continue
            runs.append((t, u))
        ends = [t for t, _ in runs[1:]] + [self.usable[-1][0]]
        for i in range(1, len(runs)):
            t, u = runs[i]
            if u or runs[i - 1][1] is False:
                continue
            if t - runs[i - 1][0] >= hold_s and ends[i] - t >= hold_s:
                out.append(t)
        return out

    def down_within(self, t0: float, t1: float) -> bool:
        return any(t0 < t <= t1 and not u for t, u in self.usable)


def generate(
    name: str,
    motion: Motion,
    duration: float,
    rng: random.Random,
    frame_rate: float = 50.0,
    poll_s: float = 0.2,
) -> Trace:
    tr = Trace(name)
    shadow = rng.gauss(0, SIGMA_DB)
    last_pos = motion(0.0)
    fade_db, fade_until = 0.0, -1.0
    dt = 1 / frame_rate
    heard: list[float] = []
    sent = lost = 0
    next_poll = poll_s
    t = 0.0
    while t < duration:
        pos = motion(t)
        moved = math.dist(pos, last_pos)
        last_pos = pos
        rho = math.exp(-moved / DECORRELATION_M)
        shadow = rho * shadow + math.sqrt(1 - rho * rho) * rng.gauss(0, SIGMA_DB)
        d = max(math.hypot(*pos), 1.0)
        mean = TX_DBM - REF_LOSS_DB - 10 * EXPONENT * math.log10(d) + shadow
        if t >= fade_until:
            speed = max(moved / dt, 0.5)
            fade_db = 10 * math.log10(rng.gammavariate(NAKAGAMI_M, 1 / NAKAGAMI_M))
            fade_until = t + 0.423 * C / (speed * FREQ_HZ)
        p = mean + fade_db
        sent += 1
        if p >= PREAMBLE_DBM:
            heard.append(round(p))
        snr = p - NOISE_DBM
        if rng.random() >= 1 / (1 + math.exp(-(snr - 7.0) / 1.0)):
            lost += 1
        if t + 1e-9 >= next_poll:
            sample = sum(heard) / len(heard) if heard else None
            loss = lost / sent if sent else None
            if sample is not None:
                tr.samples.append((round(t, 3), round(sample, 2), loss))
            tr.usable.append((round(t, 3), mean >= EDGE_DBM))
            heard, sent, lost = [], 0, 0
            next_poll += poll_s
        t += dt
    return tr


# -- motions --------------------------------------------------------------------------


def recede(v: float, start: float = 40.0) -> Motion:
    return lambda t: (start + v * t, 0.0)


def approach(v: float, start: float = 220.0) -> Motion:
    return lambda t: (max(start - v * t, 5.0), 0.0)


def still(d: float) -> Motion:
    return lambda t: (d, 0.0)


def pass_by(v: float, offset: float, start: float = -200.0) -> Motion:
    return lambda t: (start + v * t, offset)


def sway(centre: float, amplitude: float, period: float) -> Motion:
    return lambda t: (centre + amplitude * math.sin(2 * math.pi * t / period), 0.0)


def suite(seed: int) -> list[Trace]:
    """The link situations a predictor meets, at walking to driving speeds."""
    rng = random.Random(seed)
    out = []
    for v in (1.0, 2.0, 5.0, 10.0, 20.0):
        dur = min(40.0 + 200.0 / v, 120.0)
        out.append(generate(f"recede-{v:g}", recede(v), dur, rng))
        out.append(generate(f"approach-{v:g}", approach(v), dur, rng))
        for off in (60.0, 100.0):
            out.append(generate(f"pass-{v:g}-{off:g}", pass_by(v, off), 400.0 / v, rng))
    for d in (90.0, 110.0, 125.0, 140.0):
        out.append(generate(f"still-{d:g}", still(d), 60.0, rng))
    out.append(generate("sway", sway(115.0, 30.0, 20.0), 60.0, rng))
    return out


@dataclass
class Score:
    predictions: int = 0
    hits: int = 0
    breaks: int = 0
    predicted_breaks: int = 0
    leads: list[float] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.hits / self.predictions if self.predictions else 1.0

    @property
    def recall(self) -> float:
        return self.predicted_breaks / self.breaks if self.breaks else 1.0


def score(trace: Trace, predictions: list[float], horizon_s: float, into: Score) -> Score:
    """The experiments' rules (``manetkit/experiment/plugins/atra.py``): a prediction
    is a hit when the link is unusable at some time within ``horizon_s`` after it; a
    break is predicted when a prediction came within ``horizon_s`` before it."""
    for tp in predictions:
        into.predictions += 1
        if trace.down_within(tp, tp + horizon_s):
            into.hits += 1
            first = next(t for t, u in trace.usable if t > tp and not u)
            into.leads.append(first - tp)
    for tb in trace.breaks():
        into.breaks += 1
        if any(tb - horizon_s <= tp <= tb for tp in predictions):
            into.predicted_breaks += 1
    return into
