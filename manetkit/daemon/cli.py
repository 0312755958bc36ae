"""``manetkit daemon --config FILE [--check] [--lab NAME]``."""

from __future__ import annotations

import argparse
import logging
import sys

import yaml

from manetkit.daemon.config import DaemonConfig, load_config


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", required=True, help="YAML config (docs/daemon.md)")
    parser.add_argument(
        "--check", action="store_true", help="validate, print the effective config and exit"
    )
    parser.add_argument(
        "--lab", metavar="NAME", help="override lab.name (the lab starts daemons with this)"
    )
    parser.set_defaults(func=main)


def effective_config(args: argparse.Namespace) -> DaemonConfig:
    cfg = load_config(args.config)
    if args.lab:
        from manetkit.daemon.config import parse_config

        # Only what the file set: a full dump would mark every section's defaults as
        # set, and the dsr/smr/aodv sections' default atra: would shadow the top-level
        # atra: in DaemonConfig.engine_config (the lab's --set atra.rfp was lost so).
        data = cfg.model_dump(mode="json", exclude_unset=True)
        if data.get("lab"):
            data["lab"]["name"] = args.lab
        cfg = parse_config(data, f"{args.config} with --lab {args.lab}")
    return cfg


def main(args: argparse.Namespace) -> int:
    cfg = effective_config(args)
    if args.check:
        yaml.safe_dump(cfg.effective(), sys.stdout, sort_keys=False)
        return 0
    root = logging.getLogger()
    # -v on the command line wins over the config's log_level.
    if root.level >= logging.WARNING and args.verbose == 0:
        root.setLevel(cfg.log_level.upper())
    from manetkit.daemon.shell import run_daemon

    run_daemon(cfg)
    return 0
