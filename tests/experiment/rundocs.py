"""Hand-made run JSONs (as ``manetkit experiment`` writes them) for the report's tests."""

from __future__ import annotations

from typing import Any


def bulk_run(
    stack: str,
    speed: float,
    seed: int,
    kbps: float,
    expected: float,
    proxy: str = "none",
    control: dict[str, Any] | None = None,
    **extra: Any,
) -> dict:
    """A one-flow bulk run on rwp-30: ``kbps`` measured against ``expected``."""
    return {
        "status": "ok",
        "run": f"rwp-30_{stack}_{proxy}_v{speed:g}_s{seed}_bulk1",
        "params": {"scenario": "rwp-30", "stack": stack, "proxy": proxy, "speed": speed,
                   "seed": seed, "traffic": "bulk1"},
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
