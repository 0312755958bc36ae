"""``python -m manetkit.daemon --config FILE``: ``manetkit daemon`` without the other parts.

The console script imports every part's CLI to build its parser (~15 MB of modules
the daemon never uses); the lab and the benchmarks start daemons this way so each
node's daemon stays small (``bench daemon``: goal < 60 MB RSS).
"""

from __future__ import annotations

import argparse
import logging
import sys

from manetkit.daemon import cli
from manetkit.errors import UserError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="manetkit daemon", description="run the routing daemon")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    cli.register(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except UserError as exc:
        print(f"manetkit: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
