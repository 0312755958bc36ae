"""The veth mesh used by the daemon's netns tests lives in the package (benchmarks use it)."""

from manetkit.bench.vethlab import VethMesh, dump, sh
from manetkit.procs import wait_for

__all__ = ["VethMesh", "dump", "sh", "wait_for"]
