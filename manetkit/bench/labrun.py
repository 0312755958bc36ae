"""What every lab benchmark does around its runs: a config file merged into every node's
daemon or proxy while the lab comes up, Python started inside a node's namespace, and an
optional flock around each run (``--lock``: one lab at a time on a shared machine without
holding the lock for a whole matrix).

``manetkit.lab.stacks`` reads the two environment variables (``EXTRA_ENV``,
``PROXY_EXTRA_ENV``) when ``lab up`` writes each node's configs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from manetkit.paths import netns_name


@contextlib.contextmanager
def env_config(var: str, path: Path, doc: dict[str, Any]) -> Iterator[None]:
    """Write ``doc`` (YAML) to ``path`` and point ``var`` at it; restore ``var`` after."""
    old = os.environ.get(var)
    path.write_text(yaml.safe_dump(doc))
    os.environ[var] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = old


@contextlib.contextmanager
def locked(path: str | None) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (created if missing) for the block; None: no lock."""
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ns_python(
    lab: str, node: str, module: str, *args: str, stderr: int | None = None
) -> subprocess.Popen[bytes]:
    """``python -m module args`` inside lab node ``node`` (``n4``); stdout discarded,
    stderr inherited unless ``stderr`` says otherwise (``subprocess.DEVNULL``)."""
    argv = ["ip", "netns", "exec", netns_name(lab, node), sys.executable, "-m", module, *args]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr)
