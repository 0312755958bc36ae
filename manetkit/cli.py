"""The ``manetkit`` console script: one sub-command per part of the project.

Each part registers its own sub-commands (``register(subparsers)``) so this file only
wires them together. Only the part that is asked for is imported: ``manetkit daemon``
must not pay (in start-up time and RSS) for the lab's numpy or the bench's matplotlib.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from manetkit.errors import UserError
from manetkit.extras import explain, missing_extra

# (command, module that provides register(subparsers), help)
PARTS: list[tuple[str, str, str]] = [
    ("lab", "manetkit.lab.cli", "emulated 802.11 lab in network namespaces"),
    (
        "bench",
        "manetkit.bench.cli",
        "benchmarks and experiments (results printed and written as JSON)",
    ),
    (
        "experiment",
        "manetkit.experiment.cli",
        "a matrix of lab runs (scenario x stack x proxy x speed x seed x traffic) and its report",
    ),
    ("daemon", "manetkit.daemon.cli", "run the routing daemon"),
    ("status", "manetkit.daemon.statuscli", "show a running daemon's (and proxy's) state"),
    ("proxy", "manetkit.proxy.cli", "run the split-TCP proxy"),
    ("field", "manetkit.field.cli", "real 802.11 test rig and field-test helpers"),
]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full parser; with ``command``, only that part's module is imported."""
    parser = argparse.ArgumentParser(prog="manetkit", description=__doc__.splitlines()[0])
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module, help_text in PARTS:
        part = sub.add_parser(name, help=help_text, description=help_text)
        if command is None or command == name:
            try:
                importlib.import_module(module).register(part)
            except ModuleNotFoundError as exc:
                # A laptop with the daemon and proxy only: the other parts need extras.
                if command == name or missing_extra(exc) is None:
                    raise explain(exc, f"manetkit {name}") from None
    return parser


def _command_in(argv: list[str]) -> str | None:
    """The sub-command named in ``argv`` (the first word that is not an option)."""
    known = {name for name, _, _ in PARTS}
    for word in argv:
        if not word.startswith("-"):
            return word if word in known else None
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        parser = build_parser(_command_in(argv))
    except UserError as exc:
        print(f"manetkit: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except UserError as exc:
        print(f"manetkit: {exc}", file=sys.stderr)
        return 2


def part_main(command: str, argv: list[str] | None = None) -> int:
    """``python -m manetkit.<part> ARGS`` = ``manetkit [-v] <command> ARGS``.

    ``-v`` flags may come anywhere in ARGS (the lab passes them first).
    """
    argv = sys.argv[1:] if argv is None else argv
    verbose = [a for a in argv if a in ("-v", "-vv", "--verbose")]
    rest = [a for a in argv if a not in ("-v", "-vv", "--verbose")]
    return main([*verbose, command, *rest])


if __name__ == "__main__":
    sys.exit(main())
