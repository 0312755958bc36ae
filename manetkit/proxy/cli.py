"""``manetkit proxy --config FILE``: run the split-TCP proxy until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import signal

from manetkit import runner
from manetkit.proxy.config import load_config, load_keyring, parse_config


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML configuration (fields: docs/proxy.md)")
    parser.add_argument("--check", action="store_true", help="validate the configuration and exit")
    # Only labels: `lab down` finds a lab's processes by `--lab <lab>` in their argv.
    parser.add_argument("--lab", help=argparse.SUPPRESS)
    parser.add_argument("--node", help=argparse.SUPPRESS)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    cfg = load_config(args.config) if args.config else parse_config({}, "defaults")
    load_keyring(cfg)  # key files are checked (mode, owner, contents) before anything runs
    if args.check:
        print(cfg.model_dump_json(indent=2))
        return 0
    runner.run(_serve(cfg))  # uvloop for our loop only (manetkit.runner says why)
    return 0


async def _serve(cfg) -> None:  # type: ignore[no-untyped-def]
    from manetkit.proxy.server import run

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await run(cfg, stop)
