"""The before/after tables of README.md from run.sh's output: python3 compare.py OUT."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def chain(out: Path) -> list[str]:
    b, a = load(out / "before/chain/chain.json"), load(out / "after/chain/chain.json")
    rows = ["| hops | before kbit/s | after kbit/s | after/before |", "|---|---|---|---|"]
    for h, x, y in zip(b["hops"], b["throughput_bps"], a["throughput_bps"], strict=True):
        rows.append(f"| {h} | {x / 1000:.1f} | {y / 1000:.1f} | {y / x:.3f} |")
    return rows


def dataplane(out: Path) -> list[str]:
    b = load(out / "before/dataplane/dataplane.json")
    a = load(out / "after/dataplane/dataplane.json")
    rows = ["| data plane | before | after | after/before |", "|---|---|---|---|"]
    for k in ("daemon_pps_per_hop", "daemon_tcp_mbps", "kernel_pps_per_hop", "kernel_tcp_mbps"):
        rows.append(f"| {k} | {b[k]} | {a[k]} | {a[k] / b[k]:.3f} |")
    return rows


def flap(out: Path) -> list[str]:
    """Goodput and the mean recovery per proxy mode, one run each."""
    rows = [
        "| run | goodput before | after | after/before | recovery mean s before | after | valid |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in sorted((out / "before/flap/runs").glob("*.json")):
        x, y = load(f), load(out / "after/flap/runs" / f.name)
        gx, gy = x["bulk"]["goodput_kbps"], y["bulk"]["goodput_kbps"]
        ex, ey = x["flap"]["recovery_mean_s"], y["flap"]["recovery_mean_s"]
        valid = f"{x['fidelity'].get('valid')} / {y['fidelity'].get('valid')}"
        rows.append(f"| {f.stem} | {gx} | {gy} | {gy / gx:.3f} | {ex:.2f} | {ey:.2f} | {valid} |")
    return rows


def cell(out: Path) -> list[str]:
    """Every valid run of the mobility cell per seed (cell/ and the repeats cell-*/):
    goodputs of each valid run, the medians' ratio."""
    rows = ["| seed | before kbit/s | after kbit/s | after/before (medians) |", "|---|---|---|---|"]
    seeds: dict[str, dict[str, list[float]]] = {}
    for side in ("before", "after"):
        for f in sorted((out / side).glob("cell*/runs/*.json")):
            doc = load(f)
            if doc["fidelity"].get("valid"):
                seed = f.stem.split("_")[-2]
                seeds.setdefault(seed, {"before": [], "after": []})[side].append(
                    doc["bulk"]["goodput_kbps"]
                )
    for seed, got in sorted(seeds.items()):
        b, a = got["before"], got["after"]
        ratio = statistics.median(a) / statistics.median(b)
        rows.append(
            f"| {seed} | {', '.join(map(str, b))} | {', '.join(map(str, a))} | {ratio:.3f} |"
        )
    return rows


def main(out: Path) -> None:
    for table in (chain(out), dataplane(out), flap(out), cell(out)):
        print("\n".join(table), end="\n\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
