"""``field-tests/report``: summaries and plots from ``collect`` runs (one per laptop).

For every node and every neighbour it heard: samples, signal min/mean/max, the share of
samples in which the neighbour was present, tx retries/failures over the run; the daemon's
neighbour and route counts over time. Printed as a table, written as ``report.json`` and
``signal.png`` (signal of each link over time, as the lab's benchmarks plot).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from manetkit.daemon.linksense.iw import IwParseError, parse_station_dump
from manetkit.daemonstatus import DaemonStatus, StatusError
from manetkit.extras import require
from manetkit.field.collect import MARK
from manetkit.macaddr import format_mac


def split_samples(text: str) -> list[tuple[float, str]]:
    """``(unix time, body)`` per sample of a collect file."""
    samples: list[tuple[float, str]] = []
    for chunk in text.split(MARK)[1:]:
        head, _, body = chunk.partition("\n")
        parts = head.split()
        if len(parts) == 2:
            samples.append((float(parts[1]), body))
    return samples


def load_run(folder: Path) -> dict[str, Any]:
    meta = dict(
        line.split("=", 1) for line in (folder / "meta.txt").read_text().splitlines() if "=" in line
    )
    links: dict[str, list[tuple[float, Any]]] = {}
    times: list[float] = []
    bad = 0
    for t, body in split_samples((folder / "stations.txt").read_text()):
        times.append(t)
        try:
            rows = parse_station_dump(body)
        except IwParseError:
            bad += 1  # iw failed in that sample (interface down): counted, not fatal
            continue
        for row in rows:
            mac = format_mac(row.info.mac)
            links.setdefault(mac, []).append((t, row.info))
    status: list[tuple[float, DaemonStatus]] = []
    if (folder / "status.jsonl").exists():
        for t, body in split_samples((folder / "status.jsonl").read_text()):
            try:
                status.append((t, DaemonStatus.from_wire(json.loads(body))))
            except (ValueError, StatusError):
                bad += 1  # no daemon answered then (or not a status): counted, not fatal
    return {"node": meta.get("node", folder.name), "times": times, "links": links,
            "status": status, "bad_samples": bad}  # fmt: skip


def summarise(run: dict[str, Any]) -> dict[str, Any]:
    n = len(run["times"]) or 1
    links = {}
    for mac, samples in run["links"].items():
        sig = [s.signal_dbm for _, s in samples if s.signal_dbm is not None]
        first, last = samples[0][1], samples[-1][1]
        links[mac] = {
            "samples": len(samples),
            "present": round(len(samples) / n, 3),
            "signal_min": min(sig) if sig else None,
            "signal_mean": round(statistics.fmean(sig), 1) if sig else None,
            "signal_max": max(sig) if sig else None,
            "tx_retries": last.tx_retries - first.tx_retries,
            "tx_failed": last.tx_failed - first.tx_failed,
        }
    counts = [(len(s.neighbours), len(s.engine.routed())) for _, s in run["status"]]
    return {
        "node": run["node"],
        "samples": len(run["times"]),
        "bad_samples": run["bad_samples"],
        "links": links,
        "mean_neighbours": round(statistics.fmean(c[0] for c in counts), 2) if counts else None,
        "mean_routes": round(statistics.fmean(c[1] for c in counts), 2) if counts else None,
    }


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    matplotlib = require("matplotlib", "the signal plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    t0 = min((r["times"][0] for r in runs if r["times"]), default=0.0)
    for run in runs:
        for mac, samples in run["links"].items():
            pts = [(t - t0, s.signal_dbm) for t, s in samples if s.signal_dbm is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker=".", label=f"{run['node']} <- {mac}")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("signal (dBm)")
    ax.set_title("per-link signal (nl80211 / iw station dump)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def unpack(inputs: list[Path], tmp: Path) -> list[Path]:
    folders = []
    for item in inputs:
        if item.is_dir():
            folders.append(item)
        elif item.name.endswith(".tar.gz"):
            with tarfile.open(item) as tar:
                tar.extractall(tmp, filter="data")
            folders.append(tmp / item.name.removesuffix(".tar.gz"))
        else:
            raise ValueError(f"{item}: not a collect folder or .tar.gz")
        if not (folders[-1] / "meta.txt").exists():
            raise ValueError(f"{item}: no meta.txt, not made by field-tests/collect")
    return folders


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="report", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="collect folders or tarballs")
    parser.add_argument("--out", type=Path, default=Path("report"), help="output folder")
    parser.add_argument("--dry-run", action="store_true", help="say what would be written")
    args = parser.parse_args(argv)
    if args.dry_run:
        for f in ("report.json", "signal.png"):
            print(f"write {args.out / f}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        try:
            runs = [load_run(f) for f in unpack(args.runs, Path(tmp))]
        except (ValueError, OSError, tarfile.TarError) as exc:
            print(f"report: {exc}", file=sys.stderr)
            return 2
    summary = [summarise(r) for r in runs]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(summary, indent=1))
    plot(runs, args.out / "signal.png")
    from rich.table import Table

    from manetkit.console import console

    table = Table(title="field run: links seen by each node")
    for col in ("node", "neighbour", "present", "signal min/mean/max", "tx retries", "tx failed"):
        table.add_column(col)
    for s in summary:
        for mac, link in s["links"].items():
            sig = f"{link['signal_min']}/{link['signal_mean']}/{link['signal_max']}"
            table.add_row(s["node"], mac, f"{link['present']:.0%}", sig,
                          str(link["tx_retries"]), str(link["tx_failed"]))  # fmt: skip
    console.print(table)
    print(f"wrote {args.out / 'report.json'} and {args.out / 'signal.png'}")
    return 0
