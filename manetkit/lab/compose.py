"""``manetkit lab compose``: a docker-compose file for a scenario (docs/docker.md).

One ``medium`` service runs the lab's medium with its UDP transport (docs/medium.md, "UDP
transport"); one service per node runs the node's radio towards it (``lab radio
--medium-udp``), then the same daemon and proxy configs ``lab up`` writes
(``manetkit.lab.stacks``), passed in environment variables and written to files by the
node's entrypoint. The file is plain compose v3, so ``docker stack deploy`` takes it too
(the ``mesh`` network is then an overlay).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from manetkit.errors import UserError
from manetkit.lab import stacks
from manetkit.lab.scenario import lab_name, load_scenario, parse_set_args

IMAGE = "manetkit:latest"
MEDIUM_PORT = 7700
CONTAINER_SCENARIO = "/etc/manetkit/scenario.yaml"

# Node entrypoint (bash: ``wait -n``): the medium's name must resolve before the radio
# starts (it resolves once), radio in the background, wait for its TAP, then daemon and
# proxy; the container ends when any of them does, and SIGTERM (``docker stop``) goes to
# all of them. Swarm services take no ``devices:``: there the TUN node is made (runc's
# default device rules allow 10:200). radio0 carries no IP address, as in ``lab up``: the daemon's TUN mesh0 has
# the mesh address (docs/daemon.md).
_NODE_SCRIPT = r"""set -e
mkdir -p /etc/manetkit /var/log/manetkit
trap 'kill $$(jobs -p) 2>/dev/null; wait; exit 0' TERM INT
[ -c /dev/net/tun ] || { mkdir -p /dev/net && mknod /dev/net/tun c 10 200; }
i=0; until getent hosts medium >/dev/null; do i=$$((i+1)); [ $$i -lt 200 ] || exit 1; sleep 0.05; done
python3 -m manetkit.lab.radio --lab "$$MK_LAB" --node "$$MK_NODE" --medium-udp "medium:$$MK_PORT" \
  >/var/log/manetkit/radio.log 2>&1 &
i=0; until ip link show radio0 >/dev/null 2>&1; do i=$$((i+1)); [ $$i -lt 200 ] || exit 1; sleep 0.05; done
if [ -n "$$MK_DAEMON" ]; then
  printf '%s' "$$MK_DAEMON" >/etc/manetkit/daemon.yaml
  python3 -m manetkit.daemon --config /etc/manetkit/daemon.yaml --lab "$$MK_LAB" \
    >/var/log/manetkit/daemon.log 2>&1 &
fi
if [ -n "$$MK_PROXY" ]; then
  printf '%s' "$$MK_PROXY" >/etc/manetkit/proxy.yaml
  python3 -m manetkit.proxy -v --config /etc/manetkit/proxy.yaml --lab "$$MK_LAB" \
    --node "$$MK_NODE" >/var/log/manetkit/proxy.log 2>&1 &
fi
wait -n
"""

_MEDIUM_SCRIPT = r"""set -e
mkdir -p /etc/manetkit /var/log/manetkit
printf '%s' "$$MK_SCENARIO" >/etc/manetkit/scenario.yaml
exec manetkit lab medium /etc/manetkit/scenario.yaml --lab "$$MK_LAB" --udp ":$$MK_PORT"
"""


# Healthy once the daemon answers ``ping`` on its event socket (as ``lab up`` waits).
_DAEMON_HEALTH = (
    "python3 -c 'import sys; from manetkit.jsonlines import request; "
    "from manetkit.lab.stacks import daemon_socket; "
    'sys.exit(0 if request(daemon_socket(sys.argv[1], sys.argv[2]), {"cmd": "ping"}, '
    'timeout=1).get("ok") else 1)\' "$$MK_LAB" "$$MK_NODE"'
)


def _scenario_text(scenario) -> str:
    data = scenario.model_dump(mode="json", exclude={"base_dir"})
    if data.get("mobility", {}).get("model") == "setdest":
        raise UserError("mobility.model: setdest files are not copied into compose labs yet")
    return yaml.safe_dump(data, sort_keys=False)


def _node_env(lab: str, scenario, node: str) -> dict[str, str]:
    stack, proxy = scenario.stack, scenario.proxy
    env = {
        "MK_LAB": lab,
        "MK_NODE": node,
        "MK_ADDR": str(stacks.node_address(node)),
        "MK_PORT": str(MEDIUM_PORT),
        "MK_DAEMON": "",
        "MK_PROXY": "",
    }
    if stack in ("aodv", "dsr", "smr"):
        cfg = stacks.daemon_config(lab, node, stack, stacks.scenario_daemon_extra(scenario))
        from manetkit.daemon.config import parse_config

        parse_config(cfg, f"generated daemon config for {node}")
        env["MK_DAEMON"] = json.dumps(cfg)
    if proxy != "none":
        cfg = stacks.proxy_config(lab, node, proxy, stack != "none")
        from manetkit.proxy.config import parse_config as parse_proxy

        parse_proxy(cfg, f"generated proxy config for {node}")
        env["MK_PROXY"] = json.dumps(cfg)
    return env


# Stacks a compose node runs: the image has no babeld/batmand (manetkit.lab.peers runs
# them in namespace labs only).
STACKS = ("none", "aodv", "dsr", "smr")


def compose_file(scenario, lab: str, image: str = IMAGE) -> dict[str, Any]:
    """The compose document (a dict) for ``scenario`` as lab ``lab``."""
    if scenario.stack not in STACKS:
        raise UserError(
            f"stack {scenario.stack}: lab compose does not run it (the image has no "
            f"{scenario.stack}; namespace labs do: `manetkit lab up --stack "
            f"{scenario.stack}`); compose takes stack {', '.join(STACKS)}"
        )
    services: dict[str, Any] = {
        "medium": {
            "image": image,
            "command": ["sh", "-c", _MEDIUM_SCRIPT],
            "environment": {
                "MK_LAB": lab,
                "MK_PORT": str(MEDIUM_PORT),
                "MK_SCENARIO": _scenario_text(scenario),
            },
            "networks": ["mesh"],
            "volumes": ["logs:/var/log/manetkit"],
            # swarm: radios reach the medium's own address, not a virtual IP (UDP through
            # the VIP's IPVS needs kernel support that not every host has)
            "deploy": {"endpoint_mode": "dnsrr"},
        }
    }
    volumes: dict[str, Any] = {"logs": {}}
    for i in range(1, scenario.nodes + 1):
        node = f"n{i}"
        health = _DAEMON_HEALTH if scenario.stack != "none" else "ip link show radio0"
        services[node] = {
            "image": image,
            "hostname": node,
            "command": ["bash", "-c", _NODE_SCRIPT],
            "environment": _node_env(lab, scenario, node),
            "cap_add": ["NET_ADMIN"],
            "devices": ["/dev/net/tun:/dev/net/tun"],
            "sysctls": {
                "net.ipv4.ip_forward": "1",
                "net.ipv4.conf.all.send_redirects": "0",
                "net.ipv4.conf.all.rp_filter": "0",
            },
            "depends_on": ["medium"],
            "networks": ["mesh"],
            "volumes": [f"logs-{node}:/var/log/manetkit"],
            "healthcheck": {
                "test": ["CMD-SHELL", health],
                "interval": "2s",
                "retries": 15,
                # a slow first start (image layers, a loaded host) is not a failure: swarm
                # would replace the task, which then joins again under a new address
                "start_period": "30s",
            },
            # swarm: nothing reaches a node by its service name, so no virtual IP either
            # (a VIP needs IPVS in the kernel; without it dockerd fails to set up each
            # task's load-balancer endpoint); as the medium's, below
            "deploy": {"endpoint_mode": "dnsrr"},
        }
        volumes[f"logs-{node}"] = {}
    return {
        "version": "3.7",
        "services": services,
        "networks": {"mesh": {}},
        "volumes": volumes,
    }


def render(scenario, lab: str, image: str = IMAGE, source: str = "") -> str:
    head = (
        f"# generated by `manetkit lab compose {source}` (docs/docker.md); lab {lab}\n"
        if source
        else "# generated by `manetkit lab compose` (docs/docker.md)\n"
    )
    return head + yaml.safe_dump(compose_file(scenario, lab, image), sort_keys=False, width=200)


def cmd_compose(args: argparse.Namespace) -> int:
    overrides = parse_set_args(args.set)
    if args.stack:
        overrides["stack"] = args.stack
    if args.proxy:
        overrides["proxy"] = args.proxy
    scenario = load_scenario(args.scenario, overrides)
    lab = args.lab or lab_name(scenario, args.scenario)
    text = render(scenario, lab, args.image, Path(args.scenario).name)
    if args.output in (None, "-"):
        print(text, end="")
    else:
        Path(args.output).write_text(text)
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario YAML (configs/scenarios/...)")
    p.add_argument("--lab", help="lab name (default: the scenario's name or file name)")
    p.add_argument("--stack", choices=STACKS)
    p.add_argument("--proxy", choices=["none", "plain", "fixed-rto", "elfn", "bus"])
    p.add_argument("--set", action="append", metavar="KEY=VALUE")
    p.add_argument("--image", default=IMAGE, help=f"image of every service (default {IMAGE})")
    p.add_argument("-o", "--output", help="file to write (default: stdout)")
    p.set_defaults(func=cmd_compose)
