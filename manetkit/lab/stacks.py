"""The per-node software a scenario asks for besides the radio: routing daemon, proxy.

``lab up`` starts what :func:`node_processes` returns inside each node's namespace once
every radio is attached, waits until each spec's ``ready()`` is true, and ``lab down``
stops them.

For ``stack: aodv|dsr|smr`` every node nI runs ``manetkit daemon`` with a generated config
(written to ``<lab dir>/nodes/nI/daemon.yaml``): mesh address 10.42.0.I (for I > 254,
10.42.(I // 256).(I % 256)), radio_interface radio0, link sensing from the lab radio's
station table, event socket ``<lab dir>/nodes/nI/events.sock`` (``daemon_socket``).
``lab up --daemon-config FILE`` (YAML; ``nodes.up(daemon_config=...)`` in Python) is
merged into every node's generated config, e.g. ``dsr: {broadcast_jitter_ms: 0}`` for a
benchmark; the node-specific fields (address, lab, event socket) cannot be set there.

With ``proxy: plain|fixed-rto|elfn|bus`` (``lab up --proxy``) every node also runs
``manetkit proxy`` (after its daemon in start order) with a generated config
(``<lab dir>/nodes/nI/proxy.yaml``): that mode for the mesh prefix 10.42.0.0/16, the
daemon's event socket, status socket ``<lab dir>/nodes/nI/proxy.sock``
(``proxy_socket``). It is ready when its status socket answers and, with a daemon, it has
subscribed to the daemon's events. ``lab up --proxy-config FILE`` (YAML;
``nodes.up(proxy_config=...)``) is merged into every node's proxy config (e.g.
``partition_timeout``); the sockets are set per node and cannot be set there.
``proxy: bus`` also sets ``bus: true`` in every daemon's protocol section (TCP-BuS,
docs/elfn-bus.md): the proxy's bus mode needs the daemons' ERDN/ERSN.

For ``stack: babeld|batmand`` every node runs the real peer daemon on radio0 instead
(``manetkit.lab.peers``: address 10.42.0.I on radio0, no mesh0, settings from the
scenario's ``babeld:``/``batmand:`` section); a proxy on top runs without a daemon socket
(plain or fixed-rto: the scenario refuses elfn/bus with these stacks).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from manetkit import paths
from manetkit.errors import UserError
from manetkit.lab import peers

# Node addressing and ProcessSpec live in modules of their own (lab/peers.py needs them
# too); re-exported here for the lab's other users.
from manetkit.lab.addressing import node_address as node_address
from manetkit.lab.addressing import node_index as node_index
from manetkit.lab.processspec import ProcessSpec as ProcessSpec
from manetkit.paths import daemon_socket, proxy_socket

# The fields the lab sets per node: a config merged into every node cannot set them.
NODE_FIELDS = {"daemon": ("address", "lab", "event_socket"),
               "proxy": ("daemon_socket", "status_socket")}  # fmt: skip


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def check_extra(doc: Any, kind: str, source: str) -> dict[str, Any]:
    """``doc`` as the fields merged into every node's ``kind`` ("daemon" or "proxy")
    config; ``UserError`` naming ``source`` when it is not a mapping or sets a field
    the lab sets per node (:data:`NODE_FIELDS`)."""
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise UserError(f"{source}: expected a mapping of {kind} config fields")
    bad = [k for k in NODE_FIELDS[kind] if k in doc]
    if bad:
        raise UserError(f"{source}: {', '.join(bad)} are set per node by the lab")
    return dict(doc)


def load_extra(path: str | Path, kind: str) -> dict[str, Any]:
    """A YAML file of fields for every node's ``kind`` config (``lab up --daemon-config``
    / ``--proxy-config``), checked as :func:`check_extra` does."""
    source = f"--{kind}-config {path}"
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"{source}: {exc}") from None
    return check_extra(doc, kind, source)


def daemon_config(lab: str, node: str, protocol: str, extra: dict[str, Any] | None = None) -> dict:
    cfg: dict[str, Any] = {
        "address": str(node_address(node)),
        "protocol": protocol,
        "radio_interface": "radio0",
        "link_sensing": {"backend": "lab"},
        "lab": {"name": lab, "node": node},
        "event_socket": str(daemon_socket(lab, node)),
        "log_level": "info",
    }
    return _merge(cfg, extra or {})


def daemon_ready(lab: str, node: str) -> bool:
    """The node's daemon answers a ping on its event socket."""
    from manetkit.jsonlines import request

    try:
        return bool(request(daemon_socket(lab, node), {"cmd": "ping"}, timeout=1).get("ok"))
    except (OSError, ValueError):
        return False


def daemon_spec(
    lab: str, node: str, protocol: str, extra: dict[str, Any] | None = None
) -> ProcessSpec:
    cfg = daemon_config(lab, node, protocol, extra)
    # Validate now, so a bad stack setting fails before anything is made.
    from manetkit.daemon.config import parse_config

    parse_config(cfg, f"generated daemon config for {node}")
    path = paths.node_dir(lab, node) / "daemon.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    argv = [sys.executable, "-m", "manetkit.daemon", "--config", str(path), "--lab", lab]
    return ProcessSpec(
        f"daemon-{node}",
        argv,
        netns=paths.netns_name(lab, node),
        ready=functools.partial(daemon_ready, lab, node),
    )


def proxy_config(
    lab: str, node: str, mode: str, with_daemon: bool, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "mesh_prefix": "10.42.0.0/16",
        "mode": mode,
        # None without a routing daemon: fixed-rto still works, elfn/bus only probe
        "daemon_socket": str(daemon_socket(lab, node)) if with_daemon else None,
        "status_socket": str(proxy_socket(lab, node)),
    }
    return _merge(cfg, extra or {})


def proxy_status(lab: str, node: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """The node's proxy's status (docs/proxy.md "Status"), or None when none answers."""
    from manetkit.jsonlines import request

    try:
        reply = request(proxy_socket(lab, node), {"cmd": "status"}, timeout=timeout)
    except (OSError, ValueError):
        return None
    st = reply.get("status")
    return st if reply.get("ok") and isinstance(st, dict) else None


def proxy_ready(lab: str, node: str, with_daemon: bool = True) -> bool:
    """The node's proxy answers on its status socket and, with a daemon, has subscribed
    to its events (so no route event of the run is missed)."""
    st = proxy_status(lab, node, timeout=1)
    return st is not None and (not with_daemon or bool(st.get("daemon_connected")))


def proxy_spec(
    lab: str, node: str, mode: str, with_daemon: bool, extra: dict[str, Any] | None = None
) -> ProcessSpec:
    cfg = proxy_config(lab, node, mode, with_daemon, extra)
    from manetkit.proxy.config import parse_config

    parse_config(cfg, f"generated proxy config for {node}")
    path = paths.node_dir(lab, node) / "proxy.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    argv = [sys.executable, "-m", "manetkit.proxy", "-v", "--config", str(path)]
    argv += ["--lab", lab, "--node", node]
    return ProcessSpec(
        f"proxy-{node}",
        argv,
        netns=paths.netns_name(lab, node),
        ready=functools.partial(proxy_ready, lab, node, with_daemon),
    )


def scenario_daemon_extra(scenario) -> dict[str, Any]:
    """What the scenario adds to every node's daemon config: ``bus: true`` in the stack's
    section with ``proxy: bus``, and its ``atra:``/``aodv:``/``dsr:``/``smr:`` sections
    (``lab up --set atra.rfp=true``, ``--set smr.mode=backup2``)."""
    stack = getattr(scenario, "stack", "none")
    extra: dict[str, Any] = {}
    if getattr(scenario, "proxy", "none") == "bus":
        # a bus proxy freezes on ERDN and resumes on ERSN: without the daemons' BuS
        # (pivot holds, local repair, notices) it would only ever probe like elfn
        extra = {stack: {"bus": True}}
    for section in ("atra", "aodv", "dsr", "smr"):
        if getattr(scenario, section, None):
            extra = _merge(extra, {section: getattr(scenario, section)})
    return extra


def node_processes(
    lab: str,
    scenario,
    node: str,
    daemon_config: Mapping[str, Any] | None = None,
    proxy_config: Mapping[str, Any] | None = None,
) -> list[ProcessSpec]:
    """Extra processes for ``node`` (``n1``..) given the scenario's ``stack`` and ``proxy``.

    ``daemon_config`` / ``proxy_config``: fields merged into the node's generated daemon
    / proxy config (``lab up --daemon-config`` / ``--proxy-config``); the scenario's
    protocol sections go over ``daemon_config``, and neither may set a per-node field."""
    stack = getattr(scenario, "stack", "none")
    proxy = getattr(scenario, "proxy", "none")
    daemon_extra = check_extra(daemon_config, "daemon", "daemon_config")
    proxy_extra = check_extra(proxy_config, "proxy", "proxy_config")
    specs: list[ProcessSpec] = []
    if stack in ("aodv", "dsr", "smr"):
        extra = _merge(daemon_extra, scenario_daemon_extra(scenario))
        specs.append(daemon_spec(lab, node, stack, extra))
    elif stack in peers.PEER_STACKS:
        speed_range = peers.scenario_speed_range(scenario)
        specs.append(peers.peer_spec(lab, node, stack, getattr(scenario, stack), speed_range))
    elif stack != "none":
        raise UserError(
            f"stack {stack!r} is not built (use aodv, dsr, smr, babeld, batmand or none)"
        )
    if proxy in ("plain", "fixed-rto", "elfn", "bus"):
        with_daemon = stack in ("aodv", "dsr", "smr")
        specs.append(proxy_spec(lab, node, proxy, with_daemon, proxy_extra))
    elif proxy != "none":
        raise UserError(f"proxy {proxy!r} is not known (use none, plain, fixed-rto, elfn, bus)")
    return specs
