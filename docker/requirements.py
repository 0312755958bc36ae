"""The image's Python requirements: pyproject's dependencies less what no process in the
image imports, or what Debian's packages give (docker/packages.txt). One copy, read by
docker/Dockerfile and docker/build. Usage: python3 docker/requirements.py PYPROJECT [--build]
(--build adds the build backend, for fetching wheels)."""

import sys
import tomllib

# matplotlib: only the bench's plots; scapy: only tests decode with it; numpy: python3-numpy
NOT_IN_IMAGE = ("matplotlib", "scapy", "numpy")

with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)
reqs = [d for d in project["project"]["dependencies"] if not d.lower().startswith(NOT_IN_IMAGE)]
if "--build" in sys.argv:
    reqs += project["build-system"]["requires"]
print("\n".join(reqs))
