"""``python -m manetkit.daemon --config FILE``: the same as ``manetkit daemon``.

The lab and the benchmarks start daemons this way (no console-script wrapper); the
``manetkit`` CLI imports only the part it runs, so both stay small (``bench daemon``).
"""

import sys

from manetkit.cli import part_main

if __name__ == "__main__":
    sys.exit(part_main("daemon"))
