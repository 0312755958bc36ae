"""``python -m manetkit.proxy --config FILE``: the same as ``manetkit proxy``.

The lab starts one proxy per node this way, as it does daemons; the ``manetkit`` CLI
imports only the part it runs.
"""

import sys

from manetkit.cli import part_main

if __name__ == "__main__":
    sys.exit(part_main("proxy"))
