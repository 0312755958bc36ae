"""Pool the rounds of several ``manetkit bench proxy`` runs (their ``proxy.json``) for one
chain length and judge the overhead goal on all of them together: each variant's median
over plain's, with the 95 % bootstrap interval of manetkit.stats (each side's rounds
resampled on their own), and the bench's verdict rule (met when the lower end clears
0.98, missed when the upper end is below it, undecided otherwise). A round whose window
lost real time (its fidelity record says invalid) is left out; rounds of runs made before
the bench recorded fidelity are kept and counted as unchecked.

    python3 tools/bench_proxy_pool.py docs/results/bench-proxy-cubic/proxy-3hops-*.json --hops 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from manetkit.bench.proxy import ratio_text, verdict  # noqa: E402


def pool(
    files: list[Path], hops: int, tally: dict[str, dict[str, int]] | None = None
) -> dict[str, list[float]]:
    """Every valid or unchecked round of every variant of the ``hops``-hop chain in
    ``files``, in file order; ``tally`` (if given) counts per variant the rounds that were
    ``valid``, ``invalid`` (left out) and ``unchecked`` (no fidelity record)."""
    tally = {} if tally is None else tally
    rounds: dict[str, list[float]] = {}
    for f in files:
        for lab in json.loads(f.read_text()).get("lab", []):
            if lab["hops"] != hops:
                continue
            for name, v in lab.items():
                if not (isinstance(v, dict) and "kbps" in v):
                    continue
                flags = v.get("valid") or [None] * len(v["kbps"])
                counts = tally.setdefault(name, {"valid": 0, "invalid": 0, "unchecked": 0})
                kept = rounds.setdefault(name, [])
                for kbps, ok in zip(v["kbps"], flags, strict=True):
                    counts["valid" if ok else "unchecked" if ok is None else "invalid"] += 1
                    if ok is not False:
                        kept.append(kbps)
    return rounds


def _counts(c: dict[str, int]) -> str:
    return f"{c['valid']} valid, {c['unchecked']} unchecked, {c['invalid']} invalid left out"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path, help="proxy.json files of bench proxy")
    ap.add_argument("--hops", type=int, default=3, help="chain length to pool (3)")
    args = ap.parse_args(argv)
    tally: dict[str, dict[str, int]] = {}
    rounds = pool(args.files, args.hops, tally)
    if not rounds.get("plain"):
        print(f"no plain rounds at {args.hops} hops in these files", file=sys.stderr)
        return 2
    plain = rounds["plain"]
    print(
        f"{args.hops} hops, plain: {len(plain)} rounds ({_counts(tally['plain'])}), "
        f"median {statistics.median(plain):.0f}"
    )
    for name, kbps in rounds.items():
        if name == "plain":
            continue
        if not kbps:
            print(f"{name}: no round to judge ({_counts(tally[name])})")
            continue
        v = verdict(kbps, plain)
        ci = v["ratio_to_plain"]
        print(
            f"{name}: {len(kbps)} rounds ({_counts(tally[name])}), "
            f"median / plain {ratio_text(ci)}: {v['verdict']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
