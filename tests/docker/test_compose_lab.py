"""A chain-3 compose lab (``manetkit lab compose``) on Docker: HTTP over 2 hops with DSR and
with AODV, ``lab move`` inside the medium's container breaks and heals the route, and
``down -v`` leaves no container, network or volume (docs/docker.md)."""

from __future__ import annotations

import os
import subprocess

import pytest

from manetkit.lab import dockerctl
from manetkit.lab.scenario import SHIPPED_SCENARIOS
from manetkit.procs import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BLOB_BYTES = 200_000


def _compose_lab(tmp_path, image: str, stack: str) -> dockerctl.ComposeLab:
    lab = f"dk{stack}{os.getpid() % 10000}"
    out = tmp_path / "docker-compose.yml"
    subprocess.run(
        [
            "manetkit", "lab", "compose", str(SHIPPED_SCENARIOS / "chain-3.yaml"),
            "--stack", stack, "--lab", lab, "--image", image, "-o", str(out),
        ],
        check=True,
    )  # fmt: skip
    return dockerctl.ComposeLab(out, project=lab, lab=lab)


@pytest.fixture
def compose_lab(request, tmp_path, image) -> dockerctl.ComposeLab:
    lab = _compose_lab(tmp_path, image, request.param)
    lab.up()
    yield lab
    left = lab.down()
    assert not left, f"down -v left {left}"


def _ping_ok(lab: dockerctl.ComposeLab, count: int = 3) -> bool:
    got = lab.exec("n1", "ping", "-c", str(count), "-i", "0.3", "-W", "1", "10.42.0.3", check=False)
    return got.returncode == 0


@pytest.mark.parametrize("compose_lab", ["dsr", "aodv"], indirect=True)
def test_http_over_two_hops(compose_lab):
    lab = compose_lab
    lab.exec(
        "n3", "sh", "-c", f"mkdir -p /srv/www && head -c {BLOB_BYTES} /dev/urandom >/srv/www/blob"
    )
    want = lab.exec("n3", "sha256sum", "/srv/www/blob").stdout.split()[0]
    lab.exec_detached(
        "n3",
        "python3",
        "-m",
        "http.server",
        "8080",
        "--bind",
        "10.42.0.3",
        "--directory",
        "/srv/www",
    )
    # route discovery and the server's start may each take a moment: curl retries
    got = lab.exec(
        "n1", "sh", "-c",
        "curl -sf --retry 10 --retry-connrefused --retry-delay 1 --max-time 60 "
        "http://10.42.0.3:8080/blob | sha256sum",
        timeout=120,
    )  # fmt: skip
    assert got.stdout.split()[0] == want
    # the packets went through n2 (2 hops): its daemon forwarded, n1 has no direct link
    assert lab.exec("n1", "ping", "-c", "1", "-W", "2", "10.42.0.3").stdout.count("ttl=63") == 1


@pytest.mark.parametrize("compose_lab", ["dsr"], indirect=True)
def test_lab_move_breaks_and_heals(compose_lab):
    lab = compose_lab
    wait_for(lambda: _ping_ok(lab), 30, "first route n1 -> n3")
    move = ["manetkit", "lab", "move", "--name", lab.lab]
    lab.exec("medium", *move, "n2", "200", "1000")  # out of range of n1 and n3
    wait_for(lambda: not _ping_ok(lab, 2), 30, "route break after n2 moved away")
    assert lab.medium({"cmd": "ping"})["ok"]
    lab.exec("medium", *move, "n2", "200", "0")  # back between them
    wait_for(lambda: _ping_ok(lab), 60, "route heal after n2 came back")
    # down -v removes everything the project made (the fixture checks again after a failure)
    assert any(x.startswith("volume") for x in dockerctl.leftovers(lab.project))
    assert lab.down() == []
