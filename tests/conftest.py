"""Shared test configuration.

Tests marked ``netns`` build real namespaces, TAP/TUN devices and nft tables; they need
root and are skipped otherwise. Every such test must clean up even when it fails; the
session-end check below fails the run if a namespace, interface or nft table that
manetkit makes is left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

IS_ROOT = os.geteuid() == 0


def _term(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config):
    """SIGTERM (a CI timeout, ``kill`` of the job) unwinds the run as Ctrl-C does: each
    running test's ``finally`` and every fixture's teardown run, so its namespaces,
    daemons and nft tables go with it (the default action would leave them behind)."""
    signal.signal(signal.SIGTERM, _term)


def pytest_collection_modifyitems(config, items):
    if IS_ROOT:
        return
    skip = pytest.mark.skip(reason="needs root (network namespaces, TAP/TUN, nftables)")
    for item in items:
        if "netns" in item.keywords or "vm" in item.keywords:
            item.add_marker(skip)


def leftovers() -> list[str]:
    """Namespaces, root-namespace interfaces and nft tables that manetkit may create."""
    found: list[str] = []
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    found += [f"netns {n}" for n in ns if n.startswith("mk-") or n.startswith("mkt")]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    for line in links.splitlines():
        name = line.split(": ")[1].split("@")[0]
        if name.startswith(("mesh", "radio", "mk")):
            found.append(f"link {name}")
    nft = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    found += [f"nft {t}" for t in nft.splitlines() if "manetkit" in t]
    return found


@pytest.fixture(scope="session", autouse=True)
def _no_leftovers():
    if not IS_ROOT:
        yield
        return
    before = set(leftovers())
    yield
    after = set(leftovers()) - before
    assert not after, f"tests left these behind: {sorted(after)}"
