"""Where the map reads a lab: its medium's control socket, each node's daemon event
socket and proxy status socket, babeld's local socket and the node's network namespace.

A namespace lab (``manetkit lab up``) keeps them under ``$MANETKIT_RUNDIR/labs/LAB``
(``manetkit.paths``). A compose lab (``manetkit lab compose``, docs/docker.md) keeps the
same tree inside each container, under the container's ``/run/manetkit``; the map
reaches it from the host through ``/proc/PID/root`` of the container's first process
(a unix socket is found by its path like any file) and the node's namespace through
``/proc/PID/ns/net``, so it needs no ``docker exec`` per read. Its containers are the
ones whose environment has ``MK_LAB=LAB``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from manetkit import paths
from manetkit.errors import UserError
from manetkit.lab import inventory, nodes
from manetkit.lab.map.core import LabInfo

CONTAINER_RUNDIR = Path("/run/manetkit")
SERVICE_LABEL = "com.docker.compose.service"


@dataclass
class LabSource:
    """How to reach one lab's sockets and namespaces."""

    info: LabInfo
    medium_socket: Path
    daemon_sockets: dict[str, Path]
    proxy_sockets: dict[str, Path]
    babeld_sockets: dict[str, Path] = field(default_factory=dict)
    netns: dict[str, str] = field(default_factory=dict)  # node -> name or /proc path

    def still_there(self) -> bool:
        return self.medium_socket.exists()


def _relative(path: Path) -> Path:
    return path.relative_to(paths.rundir())


def _scenario_info(lab: str, scenario: Any, node_names: list[str], kind: str) -> LabInfo:
    area = getattr(scenario, "area", None)
    return LabInfo(
        name=lab,
        nodes=tuple(node_names),
        stack=str(getattr(scenario, "stack", "none") or "none"),
        proxy=str(getattr(scenario, "proxy", "none") or "none"),
        kind=kind,
        area=(float(area.x), float(area.y)) if area is not None else None,
    )


def _netns_info(lab: str, state: nodes.LabState | None, node_names: list[str]) -> LabInfo:
    """The lab's stack, proxy and area from its scenario (as ``lab up`` loaded it), or
    from the processes it runs when the scenario file cannot be read any more."""
    from manetkit.lab.scenario import load_scenario

    if state is not None:
        try:
            return _scenario_info(
                lab, load_scenario(state.scenario, state.overrides), node_names, "netns"
            )
        except (OSError, ValueError, UserError):
            pass
    names = [p.name for p in (state.processes if state else [])]
    stack, proxy = "none", "none"
    for peer in ("babeld", "batmand"):
        if any(n.startswith(f"{peer}-n") for n in names):
            stack = peer
    if any(n.startswith("daemon-n") for n in names):
        try:
            cfg = yaml.safe_load((paths.node_dir(lab, node_names[0]) / "daemon.yaml").read_text())
            stack = str(cfg.get("protocol", "aodv"))
        except (OSError, ValueError, AttributeError, IndexError):
            stack = "aodv"
    if any(n.startswith("proxy-n") for n in names):
        proxy = "plain"  # the mode only changes what the proxies do, not what is read
    return LabInfo(name=lab, nodes=tuple(node_names), stack=stack, proxy=proxy)


def netns_source(lab: str) -> LabSource:
    from manetkit.lab.peers import babeld_socket

    state = nodes.read_state(lab)
    node_names = state.nodes if state else [ns.rsplit("-", 1)[1] for ns in nodes.namespaces(lab)]
    info = _netns_info(lab, state, node_names)
    return LabSource(
        info=info,
        medium_socket=paths.medium_control_socket(lab),
        daemon_sockets={n: paths.daemon_socket(lab, n) for n in node_names},
        proxy_sockets={n: paths.proxy_socket(lab, n) for n in node_names},
        babeld_sockets={n: babeld_socket(lab, n) for n in node_names}
        if info.stack == "babeld"
        else {},
        netns={n: paths.netns_name(lab, n) for n in node_names},
    )


def docker_labs() -> dict[str, list[dict[str, Any]]]:
    """Running compose labs: lab name -> its containers (``docker inspect`` objects).
    Empty when docker is not installed or its daemon does not answer."""
    if shutil.which("docker") is None:
        return {}
    try:
        ids = subprocess.run(
            ["docker", "ps", "-q", "--filter", f"label={SERVICE_LABEL}"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.split()
        if not ids:
            return {}
        out = subprocess.run(
            ["docker", "inspect", *ids], capture_output=True, text=True, timeout=20
        ).stdout
        containers = json.loads(out or "[]")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}
    labs: dict[str, list[dict[str, Any]]] = {}
    for c in containers:
        env = dict(e.split("=", 1) for e in (c.get("Config", {}).get("Env") or []) if "=" in e)
        if env.get("MK_LAB") and c.get("State", {}).get("Pid"):
            c["_env"] = env
            labs.setdefault(env["MK_LAB"], []).append(c)
    return labs


def docker_source(lab: str, containers: list[dict[str, Any]]) -> LabSource:
    from manetkit.lab.scenario import scenario_from_dict

    by_service = {c.get("Config", {}).get("Labels", {}).get(SERVICE_LABEL): c for c in containers}
    medium = by_service.get("medium")
    if medium is None:
        raise UserError(f"docker lab {lab}: no medium container is running")
    node_names = sorted(
        (c["_env"]["MK_NODE"] for c in containers if c["_env"].get("MK_NODE")),
        key=lambda n: int(n[1:]) if n[1:].isdigit() else 0,
    )

    def inside(c: dict[str, Any], path: Path) -> Path:
        rundir = Path(c["_env"].get("MANETKIT_RUNDIR") or CONTAINER_RUNDIR)
        return Path(f"/proc/{c['State']['Pid']}/root") / rundir.relative_to("/") / _relative(path)

    try:
        scenario = scenario_from_dict(
            yaml.safe_load(medium["_env"].get("MK_SCENARIO", "")) or {}, "compose", Path("/")
        )
        info = _scenario_info(lab, scenario, node_names, "docker")
    except (ValueError, UserError, yaml.YAMLError):
        info = LabInfo(name=lab, nodes=tuple(node_names), kind="docker")
    nodes_c = {c["_env"]["MK_NODE"]: c for c in containers if c["_env"].get("MK_NODE")}

    def configured(c: dict[str, Any], var: str, key: str, default: Path) -> Path:
        """The socket the node's config (``MK_DAEMON``/``MK_PROXY``) names, in its root."""
        try:
            named = (yaml.safe_load(c["_env"].get(var) or "") or {}).get(key)
        except (yaml.YAMLError, AttributeError):
            named = None
        if not named:
            return inside(c, default)
        return Path(f"/proc/{c['State']['Pid']}/root") / Path(named).relative_to("/")

    return LabSource(
        info=info,
        medium_socket=inside(medium, paths.medium_control_socket(lab)),
        daemon_sockets={
            n: configured(c, "MK_DAEMON", "event_socket", paths.daemon_socket(lab, n))
            for n, c in nodes_c.items()
        },
        proxy_sockets={
            n: configured(c, "MK_PROXY", "status_socket", paths.proxy_socket(lab, n))
            for n, c in nodes_c.items()
        },
        netns={n: f"/proc/{c['State']['Pid']}/ns/net" for n, c in nodes_c.items()},
    )


def find_lab(name: str | None) -> LabSource:
    """The lab ``name`` (a namespace lab first, then a compose lab), or the only lab up.

    ``UserError`` naming the labs that are up when there is no such lab, or several and
    no name."""
    if name is not None:
        try:
            paths.check_lab_name(name)
        except ValueError as exc:
            raise UserError(f"--name: {exc}") from None
    netns_labs = [lab for lab in inventory.labs() if paths.medium_control_socket(lab).exists()]
    if name is not None and name in netns_labs:
        return netns_source(name)
    docker = docker_labs()
    if name is not None and name in docker:
        return docker_source(name, docker[name])
    everything = sorted(netns_labs) + [f"{lab} (docker)" for lab in sorted(docker)]
    have = ", ".join(everything) if everything else "none"
    if name is not None:
        raise UserError(f"no lab named {name!r} is up (labs up: {have})")
    if len(everything) == 1:
        return (
            netns_source(netns_labs[0])
            if netns_labs
            else docker_source(*next(iter(docker.items())))
        )
    if not everything:
        raise UserError("no lab is up (start one with `manetkit lab up SCENARIO.yaml`)")
    raise UserError(f"several labs are up ({have}): choose one with --name")
