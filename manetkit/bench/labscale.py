"""``manetkit bench lab-scale``: does the lab keep real time at 50-100 nodes, and with
which radio design?

For each radio design (``lab up --radios shared``: the medium process owns every node's
TAP; ``process``: one radio process per node relaying over a datagram socket), side by
side in one run:

- ``rwp-50``: the shipped rwp-50 scenario with batmand at its default profile (the
  heaviest control load the lab runs: every node floods every originator's OGM each
  second) and one bulk TCP flow (iperf3, n1 -> n2);
- ``grid-100``: 100 static nodes on a 200 m grid (10 columns; grid-3x3.yaml's layout)
  with DSR and one bulk flow across 3 hops (n1 -> n4);
- ``search`` (shared design by default): the largest N that stays valid for each stack,
  a coarse search over ``--sizes`` on rwp scenarios at rwp-50's density (the area grows
  with N), one bulk flow each, stopping at the first invalid size.

Each run measures its window (after ``--warmup`` s of medium time) with
``manetkit.lab.fidelity``: lag p50/p99/max, unmodelled drops, CPU seconds per process
class, the load average, valid or not (lag p99 <= 5 ms and no unmodelled drops), plus the
flow's goodput and the processes the lab runs per node. The flow's TCP congestion control
is set at its two ends (``--congestion-control``, CUBIC by default) and recorded.
``--lock FILE`` takes the lock around each run only (each is a minute or two), so a shared
machine's other jobs run in between; the machine's load is recorded with every reading.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from manetkit import paths, procs
from manetkit.bench import report
from manetkit.bench.labrun import locked, medium_time, term_as_interrupt, wait_medium
from manetkit.errors import UserError
from manetkit.lab import fidelity, netns, nodes, tcpcc
from manetkit.lab.scenario import SHIPPED_SCENARIOS
from manetkit.lab.stacks import node_address

STACKS = ("dsr", "aodv", "batmand", "babeld")
RWP50_AREA_M = 1000.0
GRID_SPACING_M = 200


def run_spec(
    scenario: Path, overrides: dict[str, str], flow: tuple[str, str], what: str
) -> dict[str, Any]:
    return {"scenario": str(scenario), "overrides": overrides, "flow": list(flow), "what": what}


def rwp50(stack: str = "batmand") -> dict[str, Any]:
    return run_spec(
        SHIPPED_SCENARIOS / "rwp-50.yaml", {"stack": stack}, ("n1", "n2"), f"rwp-50 {stack}"
    )


def grid100(stack: str = "dsr") -> dict[str, Any]:
    over = {
        "nodes": "100",
        "stack": stack,
        "mobility.layout.columns": "10",
        "mobility.layout.spacing": str(GRID_SPACING_M),
    }
    return run_spec(SHIPPED_SCENARIOS / "grid-3x3.yaml", over, ("n1", "n4"), f"grid-100 {stack}")


def rwp_n(n: int, stack: str) -> dict[str, Any]:
    """rwp-50's scenario with ``n`` nodes at rwp-50's density."""
    side = round(RWP50_AREA_M * math.sqrt(n / 50))
    over = {"nodes": str(n), "stack": stack, "area.x": str(side), "area.y": str(side)}
    return run_spec(SHIPPED_SCENARIOS / "rwp-50.yaml", over, ("n1", "n2"), f"rwp-{n} {stack}")


# --- one run ------------------------------------------------------------------------------


def _popen(lab: str, node: str, argv: list[str], out: Path) -> subprocess.Popen[bytes]:
    with open(out, "wb") as f:
        return netns.popen(paths.netns_name(lab, node), argv, stdout=f, stderr=subprocess.STDOUT)


def _received_bytes(path: Path) -> int | None:
    try:
        doc = json.loads(path.read_text())
        return int(doc["end"]["sum_received"]["bytes"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def processes_per_node(state: nodes.LabState) -> float:
    """The lab's own processes besides the medium, per node (traffic not counted)."""
    return round((len(state.processes) - 1) / max(1, len(state.nodes)), 2)


def measure(
    spec: dict[str, Any],
    radios: str,
    warmup: float,
    window: float,
    work: Path,
    lock: str | None,
    cc: str = "cubic",
) -> dict[str, Any]:
    """Bring the lab up, run the flow (with ``cc`` set at its two ends, the only nodes
    with a TCP socket), read the fidelity of the window, bring it down."""
    lab = f"bls{os.getpid() % 10000}"
    src, dst = spec["flow"]
    port = 5301
    row: dict[str, Any] = {"what": spec["what"], "radios": radios, **spec}
    work.mkdir(parents=True, exist_ok=True)
    with locked(lock):
        t0 = time.monotonic()
        server = client = None
        try:
            state = nodes.up(spec["scenario"], name=lab, overrides=spec["overrides"], radios=radios)
            row["up_s"] = round(time.monotonic() - t0, 1)
            row["nodes"] = len(state.nodes)
            row["processes_per_node"] = processes_per_node(state)
            row["tcp"] = tcpcc.set_lab(lab, [src, dst], cc)
            addr = str(node_address(dst))
            srv_out, cli_out = work / "server.json", work / "client.json"
            argv = ["iperf3", "-s", "-1", "-J", "-p", str(port), "--bind", addr]
            server = _popen(lab, dst, argv, srv_out)
            flow_at = medium_time(lab) + 1.0
            end = flow_at + warmup + window
            wait_medium(lab, flow_at)
            # A client that finds no route yet (the stack has not converged) exits at once:
            # start it again until the window opens.
            while True:
                left = int(end - medium_time(lab)) + 1
                argv = ["iperf3", "-c", addr, "-p", str(port), "-J", "-t", str(left)]
                argv += ["--connect-timeout", "5000"]
                client = _popen(lab, src, argv, cli_out)
                row["flow_attempts"] = row.get("flow_attempts", 0) + 1
                while client.poll() is None and medium_time(lab) < flow_at + warmup:
                    time.sleep(0.5)
                if client.poll() is None or medium_time(lab) >= flow_at + warmup:
                    break
            wait_medium(lab, flow_at + warmup)
            a = fidelity.collect(lab)
            wait_medium(lab, end)
            b = fidelity.collect(lab)
            f = fidelity.window(a, b)
            row["fidelity"] = f.to_json()
            for proc in (client, server):
                procs.terminate({proc.pid}, grace=3.0)
                proc.wait()
            got = _received_bytes(srv_out)
            row["goodput_kbps"] = (
                None if got is None else round(8 * got / (warmup + window) / 1000, 1)
            )
        except (OSError, ValueError, UserError) as exc:
            row["error"] = str(exc)
        finally:
            for proc in (client, server):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait()
            nodes.down(lab)
    return row


# --- the table ------------------------------------------------------------------------------


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def table(rows: list[dict[str, Any]], title: str) -> Table:
    t = Table(
        "run", "radios", "nodes", "procs/node", "lag p50 ms", "lag p99 ms", "lag max ms",
        "unmodelled drops", "CPU s (medium / radios / daemons / peers / traffic)",
        "load avg", "goodput kbit/s", "valid", title=title,
    )  # fmt: skip
    for r in rows:
        f = r.get("fidelity")
        if f is None:
            t.add_row(r["what"], r["radios"], str(r.get("nodes", "-")), "-", "-", "-", "-", "-",
                      r.get("error", "?")[:60], "-", "-", "[red]error[/]")  # fmt: skip
            continue
        cpu = f["cpu_s"]
        t.add_row(
            r["what"],
            r["radios"],
            str(r["nodes"]),
            str(r["processes_per_node"]),
            _ms(f["lag_p50_ms"]),
            _ms(f["lag_p99_ms"]),
            _ms(f["lag_max_ms"]),
            str(sum(f["unmodelled_drops"].values())),
            " / ".join(
                f"{cpu.get(k, 0):.1f}" for k in ("medium", "radios", "daemons", "peers", "traffic")
            ),
            f"{f['load_avg'][0]:.1f}",
            report.cell(r.get("goodput_kbps"), ".0f"),
            "[green]yes[/]" if f["valid"] else "[red]no[/]",
        )
    return t


def is_valid(row: dict[str, Any]) -> bool:
    return bool(row.get("fidelity", {}).get("valid"))


def search(
    stacks: list[str],
    sizes: list[int],
    radios: str,
    args: argparse.Namespace,
    work: Path,
    rows: list[dict[str, Any]],
) -> dict[str, int | None]:
    """Per stack: the largest of ``sizes`` (ascending) whose run was valid."""
    largest: dict[str, int | None] = {}
    for stack in stacks:
        largest[stack] = None
        for n in sizes:
            row = measure(
                rwp_n(n, stack), radios, args.warmup, args.window, work / f"{stack}-{n}",
                args.lock, args.congestion_control,
            )  # fmt: skip
            row["search"] = True
            rows.append(row)
            report.console.print(table([row], f"search {stack} N={n}"))
            if not is_valid(row):
                break
            largest[stack] = n
    return largest


def run(args: argparse.Namespace) -> int:
    tcpcc.require([args.congestion_control])
    # SIGTERM: the run's finally brings its lab down
    with term_as_interrupt(), tcpcc.allowing([args.congestion_control]):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    designs = [d.strip() for d in args.radios.split(",") if d.strip()]
    bad = [d for d in designs if d not in nodes.RADIO_DESIGNS]
    if bad or not designs:
        raise UserError(f"--radios {args.radios}: expected a list of {nodes.RADIO_DESIGNS}")
    stacks = [s.strip() for s in args.stacks.split(",") if s.strip()]
    if any(s not in STACKS for s in stacks):
        raise UserError(f"--stacks {args.stacks}: expected a list of {', '.join(STACKS)}")
    try:
        sizes = sorted(int(x) for x in args.sizes.split(","))
    except ValueError:
        raise UserError(f"--sizes {args.sizes}: expected numbers like 25,50,75,100") from None
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    work = Path(args.out) / "lab-scale"
    rows: list[dict[str, Any]] = []
    specs = {"rwp50": rwp50(), "grid100": grid100()}
    for name in runs:
        if name == "search":
            continue
        if name not in specs:
            raise UserError(f"--runs: unknown run {name!r} (rwp50, grid100, search)")
        for design in designs:
            row = measure(
                specs[name], design, args.warmup, args.window, work / f"{name}-{design}",
                args.lock, args.congestion_control,
            )  # fmt: skip
            rows.append(row)
            report.console.print(table([row], f"{name} ({design})"))
    largest: dict[str, dict[str, int | None]] = {}
    if "search" in runs:
        for design in [d.strip() for d in args.search_radios.split(",") if d.strip()]:
            largest[design] = search(stacks, sizes, design, args, work / f"search-{design}", rows)
    report.show(
        table(rows, "lab-scale: fidelity per run (lag p99 <= 5 ms, no unmodelled drops)"),
        *(
            f"largest valid N ({design}): "
            + ", ".join(f"{s} {n if n is not None else f'< {sizes[0]}'}" for s, n in got.items())
            for design, got in largest.items()
        ),
        f"load average at the end: {os.getloadavg()[0]:.2f} (a shared machine: see each row)",
    )
    report.write(
        args.out,
        "lab-scale",
        {"settings": report.settings(args), "runs": rows, "largest_valid_n": largest},
    )
    return 0


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--radios", default="shared,process", help="radio designs compared (shared,process)"
    )
    parser.add_argument(
        "--runs", default="rwp50,grid100,search", help="which runs: rwp50, grid100, search"
    )
    parser.add_argument(
        "--congestion-control",
        default="cubic",
        help="TCP congestion control at the flow's ends, one the kernel has (cubic)",
    )
    parser.add_argument("--warmup", type=float, default=20.0, help="s of flow before the window")
    parser.add_argument("--window", type=float, default=30.0, help="s measured per run")
    parser.add_argument("--stacks", default=",".join(STACKS), help="stacks of the N search")
    parser.add_argument("--sizes", default="25,50,75,100", help="N of the search (ascending)")
    parser.add_argument(
        "--search-radios", default="shared", help="designs searched for the largest N (shared)"
    )
    parser.add_argument(
        "--lock", help="flock FILE around each run (a shared machine: released between runs)"
    )
    parser.set_defaults(func=run)
