"""``manetkit lab``: bring labs up and down, look inside them, change their world.

Sub-commands: up, down, status, exec, stations, logs, move, link, map, and the two processes a
lab runs (``medium``, ``radio``), which ``lab up`` starts and which are rarely typed by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from rich.table import Table

from manetkit import paths
from manetkit.console import console, fidelity_table
from manetkit.errors import UserError
from manetkit.lab import inventory, netns, nodes, radio, stacks
from manetkit.lab.stations import format_iw


def _lab_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", "-n", dest="lab", help="lab name (default: the only lab that is up)")


def _resolve_lab(args: argparse.Namespace) -> str:
    """The lab the user means: ``--name``, or the only one that is up."""
    if args.lab:
        try:
            return paths.check_lab_name(args.lab)
        except ValueError as exc:
            raise UserError(str(exc)) from None
    found = inventory.labs()
    if len(found) == 1:
        return found[0]
    if not found:
        raise UserError("no lab is up (start one with `manetkit lab up SCENARIO.yaml`)")
    raise UserError(f"several labs are up ({', '.join(found)}): choose one with --name")


# --- up / down ------------------------------------------------------------------------


def cmd_up(args: argparse.Namespace) -> int:
    from manetkit.lab.scenario import parse_set_args

    overrides = parse_set_args(args.set)
    if args.stack:
        overrides["stack"] = args.stack
    if args.proxy:
        overrides["proxy"] = args.proxy
    state = nodes.up(
        args.scenario,
        name=args.lab,
        overrides=overrides,
        timeout=args.timeout,
        radios=args.radios,
    )
    console.print(
        f"lab [bold]{state.lab}[/]: {len(state.nodes)} nodes up in {state.up_seconds:.1f} s "
        f"({len(state.processes)} processes; `manetkit lab status --name {state.lab}`)"
    )
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    if args.all:
        targets = inventory.labs()
    elif args.lab:
        targets = [_resolve_lab(args)]
    else:
        targets = inventory.labs()
        if len(targets) > 1:
            raise UserError(f"several labs are up ({', '.join(targets)}): use --name or --all")
    if not targets:
        console.print("no lab is up")
        return 0
    for lab in targets:
        r = nodes.down(lab, grace=args.grace)
        console.print(
            f"lab [bold]{lab}[/] down: {len(r.stopped)} processes stopped"
            f"{f' ({len(r.killed)} with SIGKILL)' if r.killed else ''}, "
            f"{len(r.namespaces)} namespaces deleted"
            f"{', state removed' if r.removed_dir else ''}"
        )
    return 0


# --- status ---------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    targets = [_resolve_lab(args)] if args.lab else inventory.labs()
    infos = [nodes.status(lab) for lab in targets]
    if args.json:
        print(json.dumps(infos, indent=2))
        return 0
    if not infos:
        console.print("no lab is up")
        return 0
    for info in infos:
        _print_status(info)
    return 0


def _print_status(info: dict) -> None:
    up = f", up in {info['up_seconds']} s" if info.get("up_seconds") else ""
    started = (
        time.strftime(" since %H:%M:%S", time.localtime(info["started_at"]))
        if info.get("started_at")
        else ""
    )
    console.print(
        f"[bold]lab {info['lab']}[/]: {len(info['nodes'])} nodes{started}{up}; "
        f"scenario {info['scenario'] or '? (no state file)'}"
    )
    positions = _positions_by_node(info.get("positions"))
    radios = info.get("radios") or "process"
    console.print(
        "radios: the medium process owns every node's radio0"
        if radios == "shared"
        else "radios: one radio process per node"
    )
    t = Table("node", "namespace", "x (m)", "y (m)", "radio pid", "alive")
    procs = {p["name"]: p for p in info["processes"]}
    for node in info["nodes"]:
        pos = positions.get(node)
        rp = procs.get(f"radio-{node}" if radios == "process" else "medium", {})
        t.add_row(
            node,
            paths.netns_name(info["lab"], node)
            if paths.netns_name(info["lab"], node) in info["namespaces"]
            else "[red]missing[/]",
            f"{pos[0]:.1f}" if pos else "-",
            f"{pos[1]:.1f}" if pos else "-",
            str(rp.get("pid", "-")),
            _alive(rp.get("alive")),
        )
    console.print(t)
    t = Table("process", "pid", "namespace", "alive")
    for p in info["processes"]:
        t.add_row(p["name"], str(p["pid"]), p.get("netns") or "(root)", _alive(p["alive"]))
    console.print(t)
    if info.get("routing"):
        _print_routing(info["routing"])
    medium = info.get("medium")
    if medium:
        if "fidelity" in medium:
            console.print(fidelity_table(medium["fidelity"]))
        t = Table("medium", "value")
        for k, v in _flatten({k: v for k, v in medium.items() if k != "fidelity"}):
            t.add_row(k, v)
        console.print(t)
    else:
        console.print("medium: [red]not answering[/]")


def _print_routing(routing: dict[str, dict]) -> None:
    """Peer stacks (babeld/batmand): each node's kernel routes, and babeld's neighbours."""
    from manetkit.lab.peers import format_route

    first = next(iter(routing.values()), {})
    cols = ["node", "kernel routes (IPv4)"]
    if first.get("stack") == "babeld":
        cols.append("babel neighbours (cost)")
    t = Table(*cols, title=f"routing ({first.get('stack', '?')})")
    for node, st in routing.items():
        shown = [r for r in st.get("routes", []) if r.get("protocol") != "kernel"]
        routes = [format_route(r) for r in shown if r.get("type") != "unreachable"]
        row = [node, "\n".join(routes) or "-"]
        if "neighbours" in st:
            nb = st["neighbours"]
            row.append(
                "not answering"
                if nb is None
                else "\n".join(f"{n['node'] or n['address']} ({n['cost']})" for n in nb) or "-"
            )
        t.add_row(*row)
    console.print(t)


def _flatten(d: dict, prefix: str = "") -> list[tuple[str, str]]:
    """Nested counters as ``section.name`` rows (lists shown inline, shortened)."""
    rows: list[tuple[str, str]] = []
    for k, v in d.items():
        if k == "ok":
            continue
        if isinstance(v, dict):
            rows += _flatten(v, f"{prefix}{k}.")
        else:
            text = ", ".join(map(str, v)) if isinstance(v, list) else str(v)
            rows.append((f"{prefix}{k}", text if len(text) <= 60 else text[:57] + "..."))
    return rows


def _alive(v: object) -> str:
    return "-" if v is None else ("[green]yes[/]" if v else "[red]no[/]")


def _positions_by_node(reply: dict | None) -> dict[str, tuple[float, float]]:
    """Accept the medium's ``positions`` reply as ``{"positions": {node: [x, y]}}`` or a list."""
    if not reply:
        return {}
    pos = reply.get("positions", reply)
    out: dict[str, tuple[float, float]] = {}
    if isinstance(pos, dict):
        for node, v in pos.items():
            if isinstance(v, dict):
                out[node] = (float(v.get("x", 0)), float(v.get("y", 0)))
            elif isinstance(v, list | tuple) and len(v) >= 2:
                out[node] = (float(v[0]), float(v[1]))
    elif isinstance(pos, list):
        for v in pos:
            if isinstance(v, dict) and "node" in v:
                out[v["node"]] = (float(v.get("x", 0)), float(v.get("y", 0)))
    return out


# --- exec / stations / logs -------------------------------------------------------------


def cmd_exec(args: argparse.Namespace) -> int:
    cmd = list(args.cmd)
    # REMAINDER keeps everything after NODE, so an option given there is ours until "--".
    while len(cmd) >= 2 and cmd[0] in ("--name", "-n"):
        args.lab, cmd = cmd[1], cmd[2:]
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]
    lab = _resolve_lab(args)
    ns = nodes.require_node(lab, args.node)
    if not cmd:
        raise UserError("lab exec: give a command after --, e.g. lab exec n1 -- ip addr")
    sys.stdout.flush()
    # So that `manetkit status` run in the node finds that node's daemon.
    env = dict(
        os.environ,
        MANETKIT_EVENT_SOCKET=str(stacks.daemon_socket(lab, args.node)),
        MANETKIT_PROXY_SOCKET=str(stacks.proxy_socket(lab, args.node)),
    )
    try:
        return subprocess.run(netns.exec_argv(ns, cmd), env=env).returncode
    except KeyboardInterrupt:
        return 130


def cmd_stations(args: argparse.Namespace) -> int:
    lab = _resolve_lab(args)
    nodes.require_node(lab, args.node)
    try:
        reply = radio.request(paths.radio_control_socket(lab, args.node), {"cmd": "stations"})
    except OSError as exc:
        raise UserError(f"radio of {args.node} in lab {lab} does not answer: {exc}") from None
    stations = reply.get("stations", [])
    if args.json:
        print(json.dumps(stations, indent=2))
    elif args.iw:
        sys.stdout.write(format_iw(stations, now_ms=int(time.time() * 1000)))
    else:
        t = Table(
            "station", "signal", "avg", "inactive ms", "rx pkts", "rx bytes", "tx pkts",
            "tx bytes", "tx retries", "tx failed", title=f"{lab} {args.node} radio0",
        )  # fmt: skip
        for s in stations:
            t.add_row(
                s["mac"],
                _dbm(s["signal_dbm"]),
                _dbm(s["signal_avg_dbm"]),
                str(s["inactive_ms"]),
                str(s["rx_packets"]),
                str(s["rx_bytes"]),
                str(s["tx_packets"]),
                str(s["tx_bytes"]),
                str(s["tx_retries"]),
                str(s["tx_failed"]),
            )
        console.print(t)
    return 0


def _dbm(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} dBm"


def cmd_logs(args: argparse.Namespace) -> int:
    lab = _resolve_lab(args)
    d = paths.logs_dir(lab)
    logs = sorted(d.glob("*.log")) if d.exists() else []
    if not args.proc:
        t = Table("log", "bytes", "path", title=f"lab {lab} logs")
        for p in logs:
            t.add_row(p.stem, str(p.stat().st_size), str(p))
        console.print(t)
        return 0
    path = d / f"{args.proc}.log"
    if not path.exists():
        names = ", ".join(p.stem for p in logs) or "none"
        raise UserError(f"lab {lab} has no log {args.proc!r} (logs: {names})")
    with open(path, "rb") as f:
        sys.stdout.buffer.write(f.read())
        sys.stdout.flush()
        while args.follow:
            chunk = f.read()
            if chunk:
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
            else:
                time.sleep(0.2)
    return 0


# --- move / link ----------------------------------------------------------------------


def _medium(lab: str, req: dict) -> dict:
    try:
        reply = nodes.medium_request(lab, req)
    except PermissionError:
        raise UserError(
            f"permission denied on the control socket of lab {lab}'s medium "
            "(root, or the medium's --control-group)"
        ) from None
    except OSError as exc:
        raise UserError(f"the medium of lab {lab} does not answer: {exc}") from None
    if not reply.get("ok"):
        raise UserError(f"medium refused {req['cmd']}: {reply.get('error', reply)}")
    return reply


def cmd_move(args: argparse.Namespace) -> int:
    lab = _resolve_lab(args)
    _medium(lab, {"cmd": "move", "node": args.node, "x": args.x, "y": args.y, "speed": args.speed})
    how = f" at {args.speed} m/s" if args.speed else ""
    console.print(f"{args.node} -> ({args.x:g}, {args.y:g}){how}")
    return 0


def cmd_link(args: argparse.Namespace) -> int:
    lab = _resolve_lab(args)
    _medium(lab, {"cmd": "link", "a": args.a, "b": args.b, "state": args.state})
    console.print(f"link {args.a} - {args.b}: {args.state}")
    return 0


# --- the lab's own processes ------------------------------------------------------------


def cmd_radio(args: argparse.Namespace) -> int:
    return radio.run(args)


def _register_medium(sub) -> None:
    from manetkit.lab.medium import server

    p = sub.add_parser("medium", help="run a lab's medium (lab up starts it)")
    server.add_arguments(p)
    p.set_defaults(func=server.run)


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="lab_command", metavar="LAB_COMMAND")

    p = sub.add_parser("up", help="bring a lab up from a scenario file")
    p.add_argument("scenario", help="scenario YAML (configs/scenarios/...)")
    _lab_arg(p)
    p.add_argument(
        "--stack",
        choices=["none", "aodv", "dsr", "smr", "babeld", "batmand"],
        help="override the scenario's stack",
    )
    p.add_argument(
        "--proxy",
        choices=["none", "plain", "fixed-rto", "elfn", "bus"],
        help="override the scenario's proxy",
    )
    p.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override a scenario field (repeat)"
    )
    p.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the lab (default 60)"
    )
    p.add_argument(
        "--radios",
        choices=nodes.RADIO_DESIGNS,
        default=nodes.DEFAULT_RADIOS,
        help="who runs the nodes' radios: shared (the medium process owns every TAP; "
        "default) or process (one radio process per node, relaying over a socket)",
    )
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("down", help="remove everything a lab made (also after a crash)")
    _lab_arg(p)
    p.add_argument("--all", action="store_true", help="every lab found on this machine")
    p.add_argument(
        "--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL (default 5)"
    )
    p.set_defaults(func=cmd_down)

    p = sub.add_parser("status", help="labs, nodes, positions, processes, medium stats")
    _lab_arg(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("exec", help="run a command in a node's namespace: exec n1 -- CMD...")
    p.add_argument("node")
    _lab_arg(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    p.set_defaults(func=cmd_exec)

    p = sub.add_parser("stations", help="a node's station table (like iw dev wlan0 station dump)")
    p.add_argument("node")
    _lab_arg(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="JSON list")
    fmt.add_argument("--iw", action="store_true", help="exactly iw's station dump text")
    p.set_defaults(func=cmd_stations)

    p = sub.add_parser("logs", help="list the lab's logs, or print one (-f follows)")
    p.add_argument("proc", nargs="?", help="medium, radio-n1, ...")
    _lab_arg(p)
    p.add_argument("-f", "--follow", action="store_true")
    p.set_defaults(func=cmd_logs)

    p = sub.add_parser("move", help="send a node to (X, Y), at once or at --speed m/s")
    p.add_argument("node")
    p.add_argument("x", type=float)
    p.add_argument("y", type=float)
    p.add_argument("--speed", type=float, default=None, help="m/s (default: jump)")
    _lab_arg(p)
    p.set_defaults(func=cmd_move)

    p = sub.add_parser("link", help="force a link down or up, or back to propagation (auto)")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("state", choices=["down", "up", "auto"])
    _lab_arg(p)
    p.set_defaults(func=cmd_link)

    from manetkit.lab.map import cli as map_cli

    map_cli.add_arguments(
        sub.add_parser("map", help="a live map of a lab in the browser (http://127.0.0.1:8080/)")
    )

    _register_medium(sub)

    from manetkit.lab import compose

    compose.add_arguments(
        sub.add_parser(
            "compose", help="write a docker-compose file for a scenario (docs/docker.md)"
        )
    )

    from manetkit.lab import demo

    demo.register(
        sub.add_parser(
            "demo",
            help="bring up chain-5 with a routing stack and send ping/HTTP/iperf3 through it",
        )
    )
    p = sub.add_parser("radio", help="run one node's radio (lab up starts it in the node)")
    radio.add_arguments(p)
    p.set_defaults(func=cmd_radio)
