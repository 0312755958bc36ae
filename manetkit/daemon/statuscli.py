"""``manetkit status [--socket PATH] [--proxy-socket PATH] [--json]``: a running daemon's
state as tables, and the split-TCP proxy's sessions when a proxy answers.
``manetkit status --medium [--lab LAB]``: a lab medium's emulation fidelity (scheduling
lag since the start and over the last seconds, drops inside and outside its model)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from rich.console import Console
from rich.table import Table

from manetkit import paths
from manetkit.console import fidelity_table, make_console
from manetkit.errors import UserError
from manetkit.jsonlines import request

DEFAULT_SOCKET = "/run/manetkit/events.sock"
DEFAULT_PROXY_SOCKET = "/run/manetkit/proxy.sock"


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--socket",
        default=None,
        help=f"the daemon's event socket (default: $MANETKIT_EVENT_SOCKET, which `lab exec` "
        f"sets for its node, else {DEFAULT_SOCKET})",
    )
    parser.add_argument(
        "--proxy-socket",
        default=None,
        help=f"the proxy's status socket (default: $MANETKIT_PROXY_SOCKET, which `lab exec` "
        f"sets for its node, else {DEFAULT_PROXY_SOCKET}); shown when it answers",
    )
    parser.add_argument("--lab", help="a lab node's daemon: the lab's name (with --node)")
    parser.add_argument("--node", help="a lab node's daemon: the node (n1, n2, ...)")
    parser.add_argument(
        "--medium",
        action="store_true",
        help="a lab medium's state instead (--lab LAB, or the only lab): fidelity, counters",
    )
    parser.add_argument("--json", action="store_true", help="print the raw status JSON")
    parser.set_defaults(func=main)


def _node_lab(args: argparse.Namespace) -> str:
    if args.lab is not None:
        return args.lab
    labs = sorted(p.name for p in (paths.rundir() / "labs").glob("*"))
    if len(labs) != 1:
        raise UserError("say which lab with --lab")
    return labs[0]


def socket_path(args: argparse.Namespace) -> str:
    if args.node:
        return str(paths.daemon_socket(_node_lab(args), args.node))
    return args.socket or os.environ.get("MANETKIT_EVENT_SOCKET") or DEFAULT_SOCKET


def proxy_socket_path(args: argparse.Namespace) -> str:
    if args.node:
        return str(paths.proxy_socket(_node_lab(args), args.node))
    return (
        getattr(args, "proxy_socket", None)
        or os.environ.get("MANETKIT_PROXY_SOCKET")
        or DEFAULT_PROXY_SOCKET
    )


def fetch_proxy(path: str) -> dict[str, Any] | None:
    """The proxy's status, or None when no proxy answers (a node may run none)."""
    try:
        reply = request(path, {"cmd": "status"}, timeout=2)
    except (OSError, ValueError):
        return None
    return reply.get("status") if reply.get("ok") else None


def fetch(path: str) -> dict[str, Any]:
    try:
        reply = request(path, {"cmd": "status"})
    except (OSError, ValueError) as exc:
        raise UserError(f"no daemon answers on {path}: {exc}") from None
    if not reply.get("ok"):
        raise UserError(f"daemon on {path} refused status: {reply.get('error')}")
    return reply["status"]


def main_medium(args: argparse.Namespace) -> int:
    """The lab medium's ``stats`` (its control socket: paths.medium_control_socket)."""
    path = paths.medium_control_socket(_node_lab(args))
    try:
        st = request(path, {"cmd": "stats"})
    except (OSError, ValueError) as exc:
        raise UserError(f"no lab medium answers on {path}: {exc}") from None
    if args.json:
        print(json.dumps(st, indent=2, sort_keys=True))
        return 0
    console = make_console()
    console.print(
        f"[bold]lab medium[/bold]  t {st.get('t', 0):.1f} s  radios {st.get('radios')}  "
        f"scheduling {st.get('scheduling')}  attached {len(st.get('attached', []))}"
    )
    if "fidelity" in st:
        console.print(fidelity_table(st["fidelity"]))
    return 0


def main(args: argparse.Namespace) -> int:
    if getattr(args, "medium", False):
        return main_medium(args)
    proxy = fetch_proxy(proxy_socket_path(args))
    try:
        st: dict[str, Any] | None = fetch(socket_path(args))
    except UserError:
        if proxy is None:
            raise
        st = None  # a proxy without a daemon (e.g. fixed-rto over static routes)
    if args.json:
        out = dict(st or {})
        if proxy is not None:
            out["proxy"] = proxy
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    console = make_console()
    if st is not None:
        render(st, console)
    else:
        console.print(f"no daemon answers on {socket_path(args)}")
    if proxy is not None:
        render_proxy(proxy, console)
    return 0


def render_proxy(st: dict[str, Any], console: Console) -> None:
    """The proxy's sessions (docs/proxy.md, "Status socket"): one row per session."""
    console.print(
        f"[bold]proxy[/bold]  {st.get('mode')} for {st.get('mesh_prefix')}  "
        f"daemon events {'connected' if st.get('daemon_connected') else 'NOT connected'}  "
        f"up {st.get('uptime_s')} s"
    )
    t = Table(title="proxy sessions")
    cols = ("session", "role", "peer", "dst", "mode", "state", "from app", "to app")
    for col in cols + ("resumes", "rto ms", "backoff", "unacked"):
        t.add_column(col)
    for s in st.get("sessions") or []:
        info = s.get("tcp_info") or {}
        t.add_row(
            str(s.get("session", ""))[:8],
            _fmt(s.get("role")),
            _fmt(s.get("peer")),
            _fmt(s.get("dst")),
            _fmt(s.get("mode")),
            _fmt(s.get("state")),
            _fmt(s.get("bytes_from_app")),
            _fmt(s.get("bytes_to_app")),
            _fmt(s.get("resumes")),
            _fmt(info.get("rto_ms")),
            _fmt(info.get("backoff")),
            _fmt(info.get("unacked")),
        )
    console.print(t)
    counters = st.get("counters") or {}
    console.print("proxy counters: " + ", ".join(f"{k} {v}" for k, v in sorted(counters.items())))


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.1f}"
    if isinstance(v, list | tuple):
        return " ".join(str(x) for x in v)
    return str(v)


def render(st: dict[str, Any], console: Console) -> None:
    console.print(
        f"[bold]{st['address']}[/bold]  {st['protocol']} on {st['tun']}  radio "
        f"{st['radio_interface']} ({st['link_sensing']} link sensing)  up {st['uptime_s']} s"
    )
    t = Table(title="neighbours")
    for col in ("address", "mac", "up", "signal dBm", "last heard s", "tx failed"):
        t.add_column(col)
    for n in st["neighbours"]:
        t.add_row(
            n["address"],
            n["mac"],
            "yes" if n["up"] else "no",
            _fmt(n["signal_dbm"]),
            _fmt(n["last_heard_s"]),
            _fmt(n["tx_failed"]),
        )
    console.print(t)

    engine = st.get("engine", {})
    # Engines report routes (AODV, static) or cached paths (DSR) as lists of flat dicts.
    for key in ("routes", "paths", "cache", "multipath"):
        rows = engine.get(key)
        if not rows or not isinstance(rows, list) or not isinstance(rows[0], dict):
            continue
        t = Table(title=key)
        cols = list(dict.fromkeys(k for r in rows for k in r))
        for c in cols:
            t.add_column(c)
        for r in rows:
            t.add_row(*(_fmt(r.get(c)) for c in cols))
        console.print(t)

    sb = st.get("send_buffer", {})
    t = Table(title="send buffer")
    t.add_column("packets")
    t.add_column("limit")
    t.add_column("waiting by destination")
    t.add_column("drops")
    t.add_row(
        _fmt(sb.get("packets")),
        _fmt(sb.get("limit")),
        " ".join(f"{d}:{n}" for d, n in (sb.get("destinations") or {}).items()) or "-",
        " ".join(f"{r}:{n}" for r, n in (sb.get("drops") or {}).items()) or "-",
    )
    console.print(t)

    t = Table(title="counters")
    t.add_column("group")
    t.add_column("counter")
    t.add_column("value", justify="right")
    groups = dict(st.get("counters", {}))
    if isinstance(engine.get("counters"), dict):
        groups["engine"] = engine["counters"]
    for group, values in groups.items():
        if isinstance(values, dict):
            for k, v in sorted(values.items()):
                t.add_row(group, k, _fmt(v))
        else:
            t.add_row(group, "", _fmt(values))
    console.print(t)

    bounds = engine.get("bounds")
    if isinstance(bounds, dict) and bounds:
        # Bounded state (docs/security.md): a table at its limit or evicting is news.
        t = Table(title="tables (size / limit, evicted)")
        for col in ("table", "size", "limit", "evicted"):
            t.add_column(col, justify="left" if col == "table" else "right")
        for name, b in sorted(bounds.items()):
            if isinstance(b, dict):
                t.add_row(name, _fmt(b.get("size")), _fmt(b.get("limit")), _fmt(b.get("evicted")))
        console.print(t)
