"""Run the ns-3 oracle programs on the validation grid and assemble their JSON.

``per`` gives one curve per run (:func:`run_curve`); :func:`run_grid` runs a list of
:class:`~manetkit.bench.oracle.params.CurveSpec` into a curve set
(:mod:`manetkit.bench.oracle.curves`). ``chain`` gives one throughput per run;
:func:`run_chain_table` runs 1..7 hops into T_i and T_i/T_1. Every run is seeded
(``RngSeed``/``RngRun``): the same binary and arguments give the same numbers.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from manetkit.bench.oracle import curves, params
from manetkit.bench.oracle.build import build, ns3_version
from manetkit.bench.oracle.params import CurveSpec

FRAMES = 1000  # per point: binomial sampling error at 50 % delivery 1.6 pp
SEED = 1
RUN = 1


def _phy_args(profile: params.Profile, standard: str, fading: bool) -> list[str]:
    rssi, snr = params.PREAMBLE_DETECTION[standard]
    return [
        f"--txPowerDbm={profile.tx_power_dbm}",
        f"--antennaGain={profile.antenna_gain_dbi}",
        f"--exponent={profile.path_loss_exponent}",
        f"--referenceDistance={profile.reference_distance_m}",
        f"--referenceLoss={profile.reference_loss_db:.4f}",
        f"--nakagamiM={profile.nakagami_m if fading else 0}",
        f"--noiseFigure={profile.noise_figure_db}",
        f"--preambleMinRssi={rssi}",
        f"--preambleMinSnr={snr}",
        f"--ccaEdThreshold={profile.cca_ed_threshold_dbm}",
    ]


def _run(binary: Path, args: list[str]) -> dict[str, Any]:
    res = subprocess.run([str(binary), *args], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(
            f"{binary.name} {' '.join(args)} failed ({res.returncode}): {res.stderr.strip()[-2000:]}"
        )
    return json.loads(res.stdout)


def per_args(spec: CurveSpec, frames: int, seed: int, run: int) -> list[str]:
    return [
        f"--standard={spec.standard}",
        f"--rateMbps={spec.rate_mbps:g}",
        f"--psduBytes={params.psdu_bytes(spec.frame_bytes)}",
        f"--frames={frames}",
        f"--step={params.STEP_M:g}",
        f"--maxDistance={spec.max_distance_m():g}",
        *_phy_args(params.PROFILES[spec.profile], spec.standard, spec.fading),
        f"--seed={seed}",
        f"--run={run}",
    ]


def run_curve(
    binary: Path, spec: CurveSpec, frames: int = FRAMES, seed: int = SEED, run: int = RUN
) -> curves.Curve:
    """One curve: ns-3's delivery ratio per distance, trimmed where delivery ends."""
    args = per_args(spec, frames, seed, run)
    out = _run(binary, args)
    points = [
        {**p, "delivery": round(p["received"] / p["sent"], 4)} for p in curves.trim(out["points"])
    ]
    return {
        "profile": spec.profile,
        "standard": spec.standard,
        "rate_mbps": spec.rate_mbps,
        "frame_bytes": spec.frame_bytes,
        "psdu_bytes": out["psdu_bytes"],
        "fading": "nakagami" if spec.fading else "none",
        "nakagami_m": params.PROFILES[spec.profile].nakagami_m if spec.fading else None,
        "mode": out["mode"],
        "airtime_s": out["airtime_s"],
        "interval_s": out["interval_s"],
        "params": params.PROFILES[spec.profile].as_params(spec.standard, spec.fading),
        "frames": frames,
        "seed": seed,
        "run": run,
        "command": f"per {' '.join(args)}",
        "d50_m": _round(curves.distance_at(points)),
        "points": points,
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def source() -> str:
    return f"ns-3 {ns3_version()}{_debian_version()}"


def _debian_version() -> str:
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", "libns3-dev"],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        return ""
    return f" (Debian libns3-dev {out.stdout.strip()})" if out.returncode == 0 else ""


def run_grid(
    specs: Iterable[CurveSpec],
    frames: int = FRAMES,
    seed: int = SEED,
    run: int = RUN,
    progress: Callable[[CurveSpec, curves.Curve], None] | None = None,
    binary: Path | None = None,
) -> dict[str, Any]:
    """Every curve of ``specs`` as one curve set."""
    binary = binary or build("per")
    out = []
    for spec in specs:
        curve = run_curve(binary, spec, frames, seed, run)
        out.append(curve)
        if progress:
            progress(spec, curve)
    return {
        "source": source(),
        "program": "manetkit/bench/oracle/ns3/per.cc",
        "what": "probability that one broadcast transmission (no ACK, no retry) is received, "
        "per distance: PHY receptions (RxOk) / frames sent",
        "frame_bytes_counted": "frame_bytes = 802.11 frame body (8-byte LLC/SNAP + payload); "
        "psdu_bytes = 24-byte MAC header + frame body + 4-byte FCS",
        "frames_per_point": frames,
        "seed": seed,
        "run": run,
        "curves": out,
    }


def chain_args(hops: int, fading: bool, duration: float, warmup: float, seed: int, run: int):
    profile = params.PROFILES[params.CHAIN_PROFILE]
    return [
        f"--hops={hops}",
        f"--hopLength={params.CHAIN_HOP_M:g}",
        f"--rateMbps={params.CHAIN_RATE_MBPS:g}",
        f"--duration={duration:g}",
        f"--warmup={warmup:g}",
        *_phy_args(profile, "802.11b", fading),
        f"--seed={seed}",
        f"--run={run}",
    ]


def run_chain_table(
    fading: bool = False,
    hops: Iterable[int] = params.CHAIN_HOPS,
    duration: float = 60.0,
    warmup: float = 10.0,
    seed: int = SEED,
    run: int = RUN,
    binary: Path | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """T_i for each hop count and T_i/T_1, as one JSON document."""
    binary = binary or build("chain")
    rows = []
    for h in hops:
        args = chain_args(h, fading, duration, warmup, seed, run)
        out = _run(binary, args)
        row = {
            "hops": h,
            "throughput_mbps": round(out["throughput_mbps"], 4),
            "received_bytes": out["received_bytes"],
            "mac_data_failures": out["mac_data_failures"],
            "mac_final_failures": out["mac_final_failures"],
            "command": f"chain {' '.join(args)}",
        }
        rows.append(row)
        if progress:
            progress(row)
    t1 = rows[0]["throughput_mbps"] if rows and rows[0]["hops"] == 1 else None
    for row in rows:
        row["ratio_to_1hop"] = round(row["throughput_mbps"] / t1, 4) if t1 else None
    profile = params.PROFILES[params.CHAIN_PROFILE]
    return {
        "source": source(),
        "program": "manetkit/bench/oracle/ns3/chain.cc",
        "profile": params.CHAIN_PROFILE,
        "standard": "802.11b",
        "rate_mbps": params.CHAIN_RATE_MBPS,
        "ack_rate": "ns-3 IBSS rule: the highest basic rate <= the data rate; every "
        "DSSS/CCK rate is mandatory in ns-3, so all join the basic rate set and "
        "ACKs of 11 Mbit/s data go at 11 Mbit/s",
        "hop_length_m": params.CHAIN_HOP_M,
        "fading": "nakagami" if fading else "none",
        "nakagami_m": profile.nakagami_m if fading else None,
        "params": profile.as_params("802.11b", fading),
        "tcp": "TCP CUBIC (ns-3 3.37's default), 1448-byte segments, SACK and timestamps "
        "on, ns-3 defaults otherwise",
        "duration_s": duration,
        "warmup_s": warmup,
        "seed": seed,
        "run": run,
        "rows": rows,
    }
