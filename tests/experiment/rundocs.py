"""Hand-made run JSONs (as ``manetkit experiment`` writes them) for the report's tests."""

from __future__ import annotations

from typing import Any


def fidelity(valid: bool = True, lag_p99_ms: float = 0.8) -> dict[str, Any]:
    """A window's fidelity record (``manetkit.lab.fidelity.Fidelity.to_json()``)."""
    return {
        "start_t": 60.0, "end_t": 160.0, "outputs": 50_000,
        "lag_p50_ms": 0.1, "lag_p99_ms": lag_p99_ms, "lag_max_ms": lag_p99_ms * 3,
        "per_second": [], "modelled_drops": {}, "unmodelled_drops": {},
        "cpu_s": {"medium": 40.0}, "load_avg": [1.2, 1.0, 0.9],
        "steal_pct": 0.5 if valid else 18.0, "valid": valid,
        "reasons": [] if valid else [f"medium scheduling lag p99 {lag_p99_ms:g} ms > 5 ms"],
    }  # fmt: skip


def _name(base: str, repeat: int) -> str:
    return base if repeat == 1 else f"{base}_r{repeat}"


def bulk_run(
    stack: str,
    speed: float,
    seed: int,
    kbps: float,
    expected: float,
    proxy: str = "none",
    control: dict[str, Any] | None = None,
    repeat: int = 1,
    valid: bool | None = None,
    **extra: Any,
) -> dict:
    """A one-flow bulk run on rwp-30: ``kbps`` measured against ``expected``; ``valid``
    None: no fidelity record (a run made before runs recorded one)."""
    doc = {
        "status": "ok",
        "run": _name(f"rwp-30_{stack}_{proxy}_v{speed:g}_s{seed}_bulk1", repeat),
        "params": {"scenario": "rwp-30", "stack": stack, "proxy": proxy, "speed": speed,
                   "seed": seed, "traffic": "bulk1", "repeat": repeat, "cc": "cubic",
                   "cc_axis": False},
        "bulk": {
            "flows": [{"src": "n1", "dst": "n2", "goodput_kbps": kbps, "expected_kbps": expected,
                       "measured_over_expected": round(kbps / expected, 3), "partition_s": 2.0,
                       "mean_hops": 2.5}],
            "goodput_kbps": kbps, "expected_kbps": expected,
            "measured_over_expected": round(kbps / expected, 3),
        },
        "control": control,
        **extra,
    }  # fmt: skip
    if valid is not None:
        doc["fidelity"] = fidelity(valid, 0.8 if valid else 40.0)
    return doc


def http_run(
    stack: str,
    speed: float,
    seed: int,
    times: list[float],
    failed: int = 0,
    repeat: int = 1,
    valid: bool | None = None,
) -> dict:
    """A HTTP run on rwp-30: one client whose completed pages took ``times`` s."""
    pages = [{"ok": True, "service_s": t, "bytes": 1000} for t in times]
    pages += [{"ok": False, "error": "TimeoutError: timed out", "bytes": 0}] * failed
    doc = {
        "status": "ok",
        "run": _name(f"rwp-30_{stack}_none_v{speed:g}_s{seed}_http", repeat),
        "params": {"scenario": "rwp-30", "stack": stack, "proxy": "none", "speed": speed,
                   "seed": seed, "traffic": "http", "repeat": repeat, "cc": "cubic"},
        "http": {"pairs": [{"client": "n3", "server": "n4", "pages": pages}],
                 "pages_completed": len(times), "pages_failed": failed},
        "control": None,
    }  # fmt: skip
    if valid is not None:
        doc["fidelity"] = fidelity(valid, 0.8 if valid else 40.0)
    return doc


def cell(
    stack: str, speed: float, kbps: list[float], expected: float = 1000.0, valid: bool = True
) -> list[dict]:
    """A goal cell's runs of one stack: ``kbps`` over seeds 1, 2, .. and repeats 1, 2
    (seed s, repeat r is ``kbps[2 * (s - 1) + r - 1]``)."""
    return [
        bulk_run(stack, speed, 1 + k // 2, v, expected, repeat=1 + k % 2, valid=valid)
        for k, v in enumerate(kbps)
    ]
