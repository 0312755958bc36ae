"""Bringing a lab up and down: namespaces, the medium (with every node's radio, or one
radio process per node: ``RADIO_DESIGNS``), node software.

Everything a lab makes is found again from its name alone (``manetkit.paths``):
namespaces ``mk-<lab>-nI``, files under ``<rundir>/labs/<lab>/``, and processes whose
argv carries ``--lab <lab>``. ``down`` relies only on that, so it works after a crash,
without ``state.json``, and as often as it is called.

Processes are detached (own session, output to ``logs/<name>.log``) so the lab outlives
the ``lab up`` command, and nothing runs that ``lab status`` does not show.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from manetkit import paths
from manetkit.errors import UserError
from manetkit.lab import netns, peers, radio, stacks
from manetkit.lab.inventory import find_processes, namespaces
from manetkit.lab.stacks import ProcessSpec
from manetkit.procs import alive, terminate

STATE_FILE = "state.json"
# Who runs the nodes' radios: "shared", the medium process itself (one process for the
# whole air; manetkit.lab.sharedradios), or "process", one radio process per node
# relaying to the medium over a datagram socket (manetkit.lab.radio; docker labs' design).
RADIO_DESIGNS = ("shared", "process")
DEFAULT_RADIOS = "shared"


@dataclass
class ProcessInfo:
    name: str
    pid: int
    argv: list[str]
    netns: str | None
    log: str


@dataclass
class LabState:
    lab: str
    scenario: str
    overrides: dict[str, str]
    nodes: list[str]
    started_at: float
    processes: list[ProcessInfo] = field(default_factory=list)
    up_seconds: float | None = None  # how long ``lab up`` took
    radios: str = "process"  # RADIO_DESIGNS (a state file older than the choice: process)

    def save(self) -> None:
        path = paths.lab_dir(self.lab) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)  # atomic: a reader never sees half a file


def read_state(lab: str) -> LabState | None:
    try:
        data = json.loads((paths.lab_dir(lab) / STATE_FILE).read_text())
        data["processes"] = [ProcessInfo(**p) for p in data.get("processes", [])]
        return LabState(**data)
    except (OSError, ValueError, TypeError):
        return None


# --- up -------------------------------------------------------------------------------


def _spawn(lab: str, spec: ProcessSpec) -> ProcessInfo:
    if "--lab" not in spec.argv or spec.argv[spec.argv.index("--lab") + 1] != lab:
        raise ValueError(f"process {spec.name}: argv must carry --lab {lab} (lab down finds it so)")
    log = paths.logs_dir(lab) / f"{spec.name}.log"
    argv = netns.exec_argv(spec.netns, spec.argv) if spec.netns else list(spec.argv)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # detached: survives the CLI, not hit by its Ctrl-C
            env={**os.environ, **spec.env},
        )
    return ProcessInfo(spec.name, proc.pid, argv, spec.netns, str(log))


def _log_tail(info: ProcessInfo, lines: int = 8) -> str:
    try:
        text = Path(info.log).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n    ".join(text[-lines:])


def _wait(ready, deadline: float, what: str, procs: list[ProcessInfo]) -> None:
    """Poll ``ready()`` (-> list of names not ready yet) until empty; fail naming them."""
    while True:
        pending = ready()
        if not pending:
            return
        dead = [p for p in procs if not alive(p.pid)]
        if dead:
            p = dead[0]
            raise UserError(f"{p.name} exited during start-up; its log says:\n    {_log_tail(p)}")
        if time.monotonic() > deadline:
            shown = ", ".join(pending[:10]) + (" ..." if len(pending) > 10 else "")
            raise UserError(f"timed out waiting for {what}: {shown}")
        time.sleep(0.05)


def medium_spec(
    lab: str, scenario_path: str, overrides: dict[str, str], radios: str = "process"
) -> ProcessSpec:
    argv = [sys.executable, "-m", "manetkit.cli", "lab", "medium", scenario_path, "--lab", lab]
    argv += ["--radios", radios]
    argv += ["--socket", str(paths.medium_socket(lab))]
    argv += ["--control", str(paths.medium_control_socket(lab))]
    argv += ["--ground-truth", str(paths.ground_truth_log(lab))]
    for k, v in overrides.items():
        argv += ["--set", f"{k}={v}"]
    return ProcessSpec("medium", argv)


def radio_spec(lab: str, node: str) -> ProcessSpec:
    # ``python -m manetkit.lab.radio`` is ``manetkit lab radio`` without importing every
    # part's CLI: 30 radios start noticeably faster on two cores.
    argv = [sys.executable, "-m", "manetkit.lab.radio", "--lab", lab, "--node", node]
    return ProcessSpec(f"radio-{node}", argv, netns=paths.netns_name(lab, node))


def medium_request(lab: str, req: dict) -> dict:
    from manetkit.lab.medium.control import control

    return control(lab, req)


def _medium_ready(lab: str) -> bool:
    try:
        return bool(medium_request(lab, {"cmd": "ping"}).get("ok"))
    except (OSError, ValueError, UserError):
        return False


def radio_ready(lab: str, node: str) -> bool:
    """The node's radio is on the air (its process attached to the medium, or the medium
    made its TAP)."""
    try:
        return bool(
            radio.request(paths.radio_control_socket(lab, node), {"cmd": "stats"})["attached"]
        )
    except (OSError, ValueError, KeyError):
        return False


def up(
    scenario_path: str | Path,
    *,
    name: str | None = None,
    overrides: dict[str, str] | None = None,
    timeout: float = 60.0,
    radios: str = DEFAULT_RADIOS,
) -> LabState:
    """Bring a lab up; on any failure tear down what was made and raise ``UserError``.

    ``radios``: who runs the nodes' radios (:data:`RADIO_DESIGNS`)."""
    if radios not in RADIO_DESIGNS:
        raise UserError(f"radios {radios!r}: expected one of {', '.join(RADIO_DESIGNS)}")
    from manetkit.lab.scenario import lab_name, load_scenario

    t0 = time.monotonic()
    overrides = dict(overrides or {})
    scenario_path = str(Path(scenario_path).resolve())
    scenario = load_scenario(scenario_path, overrides)
    lab = name or lab_name(scenario, scenario_path)
    node_names = [f"n{i}" for i in range(1, scenario.nodes + 1)]
    try:
        paths.check_lab_name(lab)
        paths.check_socket_paths(paths.lab_sockets(lab, node_names))
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if (paths.lab_dir(lab) / STATE_FILE).exists() or namespaces(lab) or find_processes(lab):
        raise UserError(
            f"lab {lab!r} is already up (or left over): run `manetkit lab down --name {lab}`"
        )
    # Fail early, before making anything, if the scenario asks for unbuilt software.
    extra = {n: stacks.node_processes(lab, scenario, n) for n in node_names}

    state = LabState(lab, scenario_path, overrides, node_names, time.time(), radios=radios)
    try:
        paths.logs_dir(lab).mkdir(parents=True, exist_ok=True)
        state.save()
        for n in node_names:
            netns.create(paths.netns_name(lab, n))
        deadline = time.monotonic() + timeout
        medium = _spawn(lab, medium_spec(lab, scenario_path, overrides, radios))
        state.processes.append(medium)
        state.save()
        _wait(
            lambda: [] if _medium_ready(lab) else ["medium"],
            deadline,
            "the medium's control socket",
            [medium],
        )
        waited = [medium]
        if radios == "process":
            waited = [_spawn(lab, radio_spec(lab, n)) for n in node_names]
            state.processes += waited
            state.save()
        _wait(
            lambda: [n for n in node_names if not radio_ready(lab, n)],
            deadline,
            "radios to attach",
            waited,
        )
        started = []
        for n in node_names:
            for spec in extra[n]:
                info = _spawn(lab, spec)
                state.processes.append(info)
                started.append((spec, info))
        state.save()
        waiting = [(s, i) for s, i in started if s.ready is not None]
        if waiting:
            _wait(
                lambda: [s.name for s, _ in waiting if not s.ready()],
                deadline,
                "node software (daemons) to answer",
                [i for _, i in waiting],
            )
        state.up_seconds = round(time.monotonic() - t0, 3)
        state.save()
        return state
    except BaseException as exc:
        down(lab)
        if isinstance(exc, FileExistsError):
            raise UserError(str(exc)) from None
        raise


# --- down -----------------------------------------------------------------------------


@dataclass
class DownReport:
    lab: str
    stopped: list[int]
    killed: list[int]
    namespaces: list[str]
    removed_dir: bool


def down(lab: str, *, grace: float = 5.0) -> DownReport:
    """Remove everything of ``lab``: processes, namespaces, state dir. Idempotent."""
    state = read_state(lab)
    pids = find_processes(lab)
    if state:  # pids from the state file count only if they are still this lab's process
        pids |= {p.pid for p in state.processes if p.pid in find_processes(lab)}
    spaces = namespaces(lab)
    pids |= netns.pids_in(spaces)  # whatever else runs in the nodes (iperf3, shells...)
    killed = terminate(pids, grace=grace)
    # A process could have started in a namespace meanwhile (a racing `lab exec`).
    leftover = netns.pids_in(spaces)
    if leftover:
        killed += terminate(leftover, grace=1.0)
    for ns in spaces:
        netns.delete(ns)
    d = paths.lab_dir(lab)
    removed = d.exists()
    shutil.rmtree(d, ignore_errors=True)
    return DownReport(lab, sorted(pids), killed, spaces, removed)


# --- status ---------------------------------------------------------------------------


def status(lab: str) -> dict:
    """What ``lab status`` shows for one lab (JSON-ready)."""
    state = read_state(lab)
    spaces = namespaces(lab)
    procs = []
    known = set()
    if state:
        for p in state.processes:
            known.add(p.pid)
            procs.append({"name": p.name, "pid": p.pid, "alive": alive(p.pid), "netns": p.netns})
    for pid in sorted(find_processes(lab) - known):
        procs.append({"name": "?", "pid": pid, "alive": True, "argv": netns.cmdline(pid)})
    out: dict = {
        "lab": lab,
        "scenario": state.scenario if state else None,
        "overrides": state.overrides if state else {},
        "started_at": state.started_at if state else None,
        "up_seconds": state.up_seconds if state else None,
        "radios": state.radios if state else None,
        "nodes": state.nodes if state else [ns.rsplit("-", 1)[1] for ns in spaces],
        "namespaces": spaces,
        "processes": procs,
        "positions": None,
        "medium": None,
    }
    peer = peers.lab_peer_stack([p["name"] for p in procs])
    if peer:  # babeld/batmand route in the kernel: show each node's routes
        out["routing"] = {
            n: peers.node_status(lab, n, peer)
            for n in out["nodes"]
            if paths.netns_name(lab, n) in spaces
        }
    if _medium_ready(lab):
        with contextlib.suppress(OSError, ValueError, UserError):
            out["positions"] = medium_request(lab, {"cmd": "positions"})
        with contextlib.suppress(OSError, ValueError, UserError):
            out["medium"] = medium_request(lab, {"cmd": "stats"})
        medium = out["medium"] or {}
        if medium.get("radios") == "process" and "fidelity" in medium:
            # radio processes count their own losses: add them to the medium's
            from manetkit.lab.fidelity import radio_unmodelled

            unmodelled = medium["fidelity"]["drops"]["unmodelled"]
            for k, v in radio_unmodelled(lab).items():
                unmodelled[k] = unmodelled.get(k, 0) + v
    return out


def require_node(lab: str, node: str) -> str:
    """The namespace of ``node`` in ``lab``, or a ``UserError`` naming what exists."""
    ns = paths.netns_name(lab, node)
    if not netns.exists(ns):
        have = [n.rsplit("-", 1)[1] for n in namespaces(lab)]
        if not have:
            raise UserError(f"lab {lab!r} is not up (no namespaces {paths.NETNS_PREFIX}{lab}-*)")
        raise UserError(f"lab {lab!r} has no node {node!r} (nodes: {', '.join(have)})")
    return ns
