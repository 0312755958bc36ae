"""Docker fixtures: the image is built once per session (docker/build: offline base from
Debian's packages, wheels from the host, cached layers reused); tests skip, with the
reason, only when Docker itself cannot start here."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from manetkit.lab import dockerctl

IMAGE = "manetkit:test"


def pytest_configure(config):
    config.addinivalue_line("markers", "docker: builds the image and runs containers (Docker)")


@pytest.fixture(scope="session")
def docker_ok() -> None:
    if os.geteuid() != 0:
        pytest.skip("Docker tests need root (dockerd, NET_ADMIN containers)")
    problem = dockerctl.docker_problem()
    if problem:
        pytest.skip(problem)


@pytest.fixture(scope="session")
def image(docker_ok) -> Iterator[str]:
    """``manetkit:test`` built from this tree (once per session)."""
    dockerctl.build_image(IMAGE)
    yield IMAGE
