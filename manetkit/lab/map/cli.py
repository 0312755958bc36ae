"""``manetkit lab map [--name LAB] [--port 8080] [--bind ADDR]``: the live map of a lab."""

from __future__ import annotations

import argparse
import asyncio
import errno
import signal
import socket
import sys

from manetkit.console import console
from manetkit.errors import UserError
from manetkit.extras import explain


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", "-n", dest="lab", help="lab name (default: the only lab that is up)")
    p.add_argument("--port", type=int, default=8080, help="TCP port of the page (default 8080)")
    p.add_argument(
        "--bind",
        default="127.0.0.1",
        help="address to serve on (default 127.0.0.1: this machine only)",
    )
    p.add_argument(
        "--fps",
        type=float,
        default=10.0,
        help="frames per second pushed to the page: one positions read each (default 10)",
    )
    p.add_argument(
        "--watch",
        action="append",
        default=[],
        metavar="SRC:DST",
        help="always draw the path SRC -> DST, e.g. n1:n5 (repeat)",
    )
    p.set_defaults(func=run)


def _watch_pairs(items: list[str], nodes: tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        src, sep, dst = item.partition(":")
        if not sep or src not in nodes or dst not in nodes or src == dst:
            raise UserError(
                f"--watch {item!r}: expected SRC:DST, two different nodes of the lab "
                f"({nodes[0]}..{nodes[-1]}), e.g. --watch {nodes[0]}:{nodes[-1]}"
            )
        out.append((src, dst))
    return out


def run(args: argparse.Namespace) -> int:
    # aiohttp (the lab extra) is imported here, not when the lab CLI builds its parser.
    try:
        from manetkit.lab.map.core import MapCore, Rates
        from manetkit.lab.map.server import MapServer, is_loopback, serve
        from manetkit.lab.map.sources import find_lab
    except ModuleNotFoundError as exc:
        raise explain(exc, "manetkit lab map") from None

    if not 0 < args.port < 65536:
        raise UserError(f"--port {args.port}: a TCP port is 1..65535")
    if not 1 <= args.fps <= 30:
        raise UserError(f"--fps {args.fps:g}: between 1 and 30 frames per second")
    source = find_lab(args.lab)
    info = source.info
    core = MapCore(info, Rates.for_lab(len(info.nodes), args.fps))
    for src, dst in _watch_pairs(args.watch, info.nodes):
        core.watch(0.0, src, dst)

    def gone(reason: str) -> None:
        console.print(
            f"lab [bold]{info.name}[/] is gone ({reason}); the page says so. Ctrl-C to stop."
        )

    server = MapServer(source, core, on_gone=gone)

    def started(url: str) -> None:
        what = f"{len(info.nodes)} nodes, stack {info.stack}, proxy {info.proxy}"
        kind = " (docker)" if info.kind == "docker" else ""
        console.print(f"map of lab [bold]{info.name}[/]{kind} ({what}): {url}  (Ctrl-C to stop)")
        if not is_loopback(args.bind):
            console.print(
                f"[yellow]warning[/]: serving on {args.bind}: anyone who reaches it sees the lab"
            )
        sys.stdout.flush()

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await serve(server, args.bind, args.port, stop, started)
        except OSError as exc:
            if isinstance(exc, socket.gaierror):
                raise UserError(f"--bind {args.bind}: not an address ({exc.strerror})") from None
            if exc.errno == errno.EADDRINUSE:
                raise UserError(
                    f"--port {args.port}: {args.bind}:{args.port} is already in use "
                    "(another `lab map`?): choose another port"
                ) from None
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EACCES):
                raise UserError(
                    f"--bind {args.bind} --port {args.port}: cannot serve there ({exc.strerror})"
                ) from None
            raise

    # The standard loop, not uvloop (manetkit.runner): pyroute2's AsyncIPRoute, which
    # reads the peer stacks' kernel routes, opens netlink sockets on the running loop,
    # and uvloop cannot ("invalid family 16"). The map is not on any hot path.
    asyncio.run(main())
    return 0
