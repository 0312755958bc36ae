"""Drive a compose lab (``manetkit lab compose``) with the Docker CLI: build, up, exec, down.

What tests/docker and ``manetkit bench docker`` share (docs/docker.md). Nothing here talks
to the Docker API directly: every step is the command a person would type, so a failure
reads like one. Both compose CLIs work: ``docker compose`` (v2 plugin) where it exists,
else ``docker-compose`` (1.29, Debian bookworm's); their container names differ (``p-n1-1``
vs ``p_n1_1``), so containers are found by their compose labels, never by name.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from manetkit.errors import UserError
from manetkit.procs import wait_for

REPO = Path(__file__).resolve().parents[2]
DOCKER_DIR = REPO / "docker"
IMAGE = "manetkit:latest"
PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"


def run(cmd: Sequence[str], *, timeout: float = 120.0, check: bool = True, **kw):
    """``subprocess.run`` with text output captured; a failure names the command and its
    stderr tail (``UserError``)."""
    try:
        proc = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=timeout, check=False, **kw
        )
    except subprocess.TimeoutExpired:
        raise UserError(f"`{' '.join(cmd)}` did not finish in {timeout:g} s") from None
    if check and proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
        raise UserError(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{tail}")
    return proc


def docker_problem() -> str | None:
    """Why Docker cannot be used here (``None`` when ``docker info`` answers): no CLI, or
    no daemon even after ``docker/start-dockerd`` tried to start one (its log's tail)."""
    if not shutil.which("docker"):
        return "no docker CLI (apt-get install docker.io; .ci/install does)"
    if run(["docker", "info"], check=False, timeout=30).returncode == 0:
        return None
    start = run([str(DOCKER_DIR / "start-dockerd")], check=False, timeout=120)
    if start.returncode == 0:
        return None
    return "dockerd cannot start here: " + (start.stderr.strip() or start.stdout.strip())


@functools.cache
def compose_command() -> tuple[str, ...]:
    """``("docker", "compose")`` or ``("docker-compose",)``, whichever answers."""
    if run(["docker", "compose", "version"], check=False, timeout=30).returncode == 0:
        return ("docker", "compose")
    if shutil.which("docker-compose"):
        return ("docker-compose",)
    raise UserError(
        "neither `docker compose` nor `docker-compose` (apt-get install docker-compose)"
    )


def build_image(tag: str = IMAGE, *, timeout: float = 1200.0) -> float:
    """Build ``tag`` offline with ``docker/build`` (base image from Debian's packages if
    missing, wheels fetched on the host); seconds it took."""
    t0 = time.monotonic()
    env = {**os.environ, "PYTHON": sys.executable}
    run([str(DOCKER_DIR / "build"), tag], timeout=timeout, env=env)
    return time.monotonic() - t0


def image_size(tag: str = IMAGE) -> int:
    """The image's size in bytes (``docker image inspect``)."""
    return int(run(["docker", "image", "inspect", "-f", "{{.Size}}", tag]).stdout.strip())


def leftovers(project: str) -> list[str]:
    """Containers, networks and volumes that still carry compose project ``project``'s
    label (what ``down -v`` must remove)."""
    flt = ["--filter", f"label={PROJECT_LABEL}={project}"]
    found = []
    for kind, cmd in (
        ("container", ["docker", "ps", "-a", "-q", *flt]),
        ("network", ["docker", "network", "ls", "-q", *flt]),
        ("volume", ["docker", "volume", "ls", "-q", *flt]),
    ):
        found += [f"{kind} {x}" for x in run(cmd).stdout.split()]
    return found


@dataclass
class ComposeLab:
    """One compose lab: ``file`` (from ``manetkit lab compose``) as compose project
    ``project``; ``lab`` is the manetkit lab name inside (``lab move --name``)."""

    file: Path
    project: str
    lab: str
    up_seconds: float | None = None
    _containers: dict[str, str] = field(default_factory=dict)

    def compose(self, *args: str, timeout: float = 120.0, check: bool = True):
        return run(
            [*compose_command(), "-f", str(self.file), "-p", self.project, *args],
            timeout=timeout,
            check=check,
        )

    def container(self, service: str) -> str:
        """The container id of ``service`` (found by its compose labels)."""
        if service not in self._containers:
            ids = run(
                [
                    "docker",
                    "ps",
                    "-q",
                    "--filter",
                    f"label={PROJECT_LABEL}={self.project}",
                    "--filter",
                    f"label={SERVICE_LABEL}={service}",
                ]
            ).stdout.split()
            if len(ids) != 1:
                raise UserError(f"compose lab {self.project}: {len(ids)} containers for {service}")
            self._containers[service] = ids[0]
        return self._containers[service]

    def services(self) -> list[str]:
        return self.compose("config", "--services").stdout.split()

    def health(self) -> dict[str, str]:
        """Each node's health (``starting``/``healthy``/``unhealthy``), or its state when
        the container has no health check or has stopped."""
        out = {}
        for svc in self.services():
            fmt = "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}"
            state = run(["docker", "inspect", "-f", fmt, self.container(svc)]).stdout.split()
            out[svc] = state[1] if len(state) > 1 and state[0] == "running" else state[0]
        return out

    def up(self, timeout: float = 90.0) -> float:
        """``up -d``, then wait until every node's daemon answers its health check;
        seconds from the command to healthy. On failure the lab is taken down again and
        the error carries the unhealthy nodes' logs."""
        t0 = time.monotonic()
        try:
            self.compose("up", "-d", timeout=timeout)
            bad: dict[str, str] = {}

            def failed() -> UserError:
                return UserError(
                    f"compose lab {self.project} not healthy in {timeout:g} s: {bad}\n"
                    + self.logs(sorted(bad))
                )

            def healthy() -> bool:
                nonlocal bad
                health = self.health()
                bad = {s: h for s, h in health.items() if h not in ("healthy", "running")}
                if any(h in ("exited", "dead", "unhealthy") for h in bad.values()):
                    raise failed()
                return not bad

            left = max(0.0, t0 + timeout - time.monotonic())
            try:
                wait_for(healthy, left, f"compose lab {self.project}", 0.25)
            except TimeoutError:
                raise failed() from None
        except BaseException:
            self.down()
            raise
        self.up_seconds = time.monotonic() - t0
        return self.up_seconds

    def logs(self, services: Sequence[str], lines: int = 15) -> str:
        """The compose log tail and manetkit's own logs of ``services``, for errors."""
        text = self.compose("logs", "--tail", str(lines), *services, check=False).stdout
        for svc in services:
            got = self.exec(
                svc, "sh", "-c", f"tail -n {lines} /var/log/manetkit/*.log", check=False
            )
            text += f"\n--- {svc} /var/log/manetkit\n{got.stdout}{got.stderr}"
        return text

    def exec(self, service: str, *cmd: str, timeout: float = 60.0, check: bool = True):
        """Run ``cmd`` in ``service``'s container (``docker exec``)."""
        return run(["docker", "exec", self.container(service), *cmd], timeout=timeout, check=check)

    def exec_detached(self, service: str, *cmd: str) -> None:
        run(["docker", "exec", "-d", self.container(service), *cmd])

    def medium(self, req: dict) -> dict:
        """A request to the medium's control socket, from inside the medium's container
        (``manetkit lab move/link`` do the same there)."""
        code = (
            "import json, sys; from manetkit.lab.medium.control import control; "
            "print(json.dumps(control(sys.argv[1], json.loads(sys.argv[2]))))"
        )
        out = self.exec("medium", "python3", "-c", code, self.lab, json.dumps(req)).stdout
        return json.loads(out)

    def down(self) -> list[str]:
        """``down -v`` (containers, networks, volumes); what is left afterwards."""
        self.compose("down", "-v", "--timeout", "5", timeout=120, check=False)
        self._containers.clear()
        return leftovers(self.project)
