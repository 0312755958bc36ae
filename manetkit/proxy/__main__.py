"""``python -m manetkit.proxy --config FILE``: ``manetkit proxy`` without the other parts.

The lab starts one proxy per node this way (as it does daemons): no other part's CLI
is imported, so start-up is quicker and each proxy smaller.
"""

from __future__ import annotations

import argparse
import logging
import sys

from manetkit.errors import UserError
from manetkit.proxy import cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="manetkit proxy", description="run the split-TCP proxy")
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
