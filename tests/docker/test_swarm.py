"""The compose file on a single-node Docker Swarm: ``docker stack deploy`` of chain-3
carries ping over 2 hops (the medium's UDP over an overlay network; TUN made in the node,
since services take no ``devices:``), and ``docker stack rm`` + ``docker volume rm`` (stack rm
keeps named volumes) + ``docker swarm leave --force`` leave nothing behind (docs/docker.md,
"Swarm")."""

from __future__ import annotations

import os
import subprocess

import pytest

from manetkit.lab import dockerctl
from manetkit.lab.scenario import SHIPPED_SCENARIOS
from manetkit.procs import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Overlay subnets from a pool far from the mesh's 10.42.0.0/16.
ADDR_POOL = "10.201.0.0/16"
STACK_LABEL = "com.docker.stack.namespace"


def _docker(*args: str, check: bool = True, timeout: float = 120.0):
    return dockerctl.run(["docker", *args], check=check, timeout=timeout)


def _swarm_state() -> str:
    return _docker("info", "-f", "{{.Swarm.LocalNodeState}}").stdout.strip()


def _stack_left(stack: str, *, volumes: bool = True) -> list[str]:
    """What still carries the stack's label: containers, networks and (stack rm keeps
    them) named volumes."""
    flt = ["--filter", f"label={STACK_LABEL}={stack}"]
    kinds = [("container", ["ps", "-aq"]), ("network", ["network", "ls", "-q"])]
    if volumes:
        kinds.append(("volume", ["volume", "ls", "-q"]))
    return [f"{k} {x}" for k, cmd in kinds for x in _docker(*cmd, *flt).stdout.split()]


@pytest.fixture
def swarm(docker_ok):
    """A single-node swarm made for the test, and left (with what it made) afterwards."""
    if _swarm_state() != "inactive":
        pytest.skip("this Docker is already in a swarm: the test would have to leave it")
    nets_before = set(_docker("network", "ls", "--format", "{{.Name}}").stdout.split())
    init = _docker(
        "swarm", "init", "--advertise-addr", "127.0.0.1", "--default-addr-pool", ADDR_POOL,
        check=False,
    )  # fmt: skip
    if init.returncode != 0:
        pytest.skip(f"docker swarm init fails here: {init.stderr.strip()}")
    try:
        yield
    finally:
        _docker("swarm", "leave", "--force", check=False)
        # the swarm's bridge to the host stays after leave; remove it if we made it
        if "docker_gwbridge" not in nets_before:
            _docker("network", "rm", "docker_gwbridge", check=False)
    assert _swarm_state() == "inactive"


def test_stack_deploy_ping_two_hops(swarm, tmp_path, image):
    stack = f"sw{os.getpid() % 10000}"
    out = tmp_path / "stack.yml"
    subprocess.run(
        [
            "manetkit", "lab", "compose", str(SHIPPED_SCENARIOS / "chain-3.yaml"),
            "--stack", "dsr", "--lab", stack, "--image", image, "-o", str(out),
        ],
        check=True,
    )  # fmt: skip
    services = [f"{stack}_{s}" for s in ("medium", "n1", "n2", "n3")]

    def container(service: str) -> str:
        ids = _docker(
            "ps", "-q", "--filter", f"label=com.docker.swarm.service.name={service}"
        ).stdout.split()
        return ids[0] if len(ids) == 1 else ""

    def healthy() -> bool:
        ids = [container(s) for s in services[1:]]
        if not all(ids):
            return False
        fmt = "{{.State.Health.Status}}"
        return _docker("inspect", "-f", fmt, *ids).stdout.split() == ["healthy"] * 3

    def ping() -> bool:
        got = _docker("exec", container(services[1]), "ping", "-c", "2", "-W", "1", "10.42.0.3",
                      check=False)  # fmt: skip
        return got.returncode == 0

    def diagnose() -> str:
        """What each task did and what n1..n3 logged: why a flake flaked."""
        parts = [_docker("stack", "ps", "--no-trunc", stack, check=False).stdout]
        for s in services:
            cid = container(s)
            if not cid:
                parts.append(f"--- {s}: no single running container")
                continue
            if s == services[0]:
                logs = _docker("service", "logs", "--tail", "30", s, check=False)
                cmd = 'manetkit status --medium --lab "$MK_LAB" 2>&1 | tail -n 40'
                parts.append(f"--- {s} log\n{logs.stdout}{logs.stderr}")
            else:
                cmd = (
                    "tail -n 15 /var/log/manetkit/*.log; "
                    'manetkit status --lab "$MK_LAB" --node "$MK_NODE" 2>&1 | tail -n 30'
                )
            got = _docker("exec", cid, "sh", "-c", cmd, check=False)
            parts.append(f"--- {s}\n{got.stdout}{got.stderr}")
        return "\n" + "\n".join(parts)

    try:
        _docker("stack", "deploy", "-c", str(out), stack)
        wait_for(healthy, 90, "every node's daemon healthy", 0.5, detail=diagnose)
        wait_for(ping, 60, "ping n1 -> n3 (2 hops)", 0.5, detail=diagnose)
        got = _docker("exec", container(services[1]), "ping", "-c", "1", "10.42.0.3").stdout
        assert "ttl=63" in got  # one forwarding node: n2
    finally:
        _docker("stack", "rm", stack, check=False)
        wait_for(lambda: not _stack_left(stack, volumes=False), 60, f"stack {stack} removed", 0.5)
        # stack rm keeps named volumes: they can go once no container holds them
        vols = [v.split()[1] for v in _stack_left(stack)]
        if vols:
            _docker("volume", "rm", *vols)
        assert _stack_left(stack) == []
    assert _docker("service", "ls", "-q", "--filter", f"label={STACK_LABEL}={stack}").stdout == ""
