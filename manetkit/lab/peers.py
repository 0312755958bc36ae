"""Peer routing daemons as lab stacks: ``stack: babeld`` and ``stack: batmand``.

The point of these stacks is comparison (issue 10): the same medium, the same movement
and the same applications, with the routing that users already run instead of
manetkit's. In every node the real daemon (Debian's ``babeld`` 1.12, ``batmand`` 0.3.2)
runs on ``radio0`` itself, and the node's address 10.42.0.I is put on ``radio0`` (there is
no ``mesh0``), so an application reaches 10.42.0.I whatever the stack:

- **babeld** (Babel, RFC 8966): 10.42.0.I/32 on ``radio0``; babeld speaks over the IPv6
  link-local address (RFC 8966 §4: Babel packets are sent from and to link-local
  addresses, multicast ff02::1:6 port 6696), announces only 10.42.0.0/16 local addresses,
  and installs ``10.42.0.J via 10.42.0.K dev radio0 proto babel onlink``. ``radio0`` is
  declared ``type wireless`` (ETX link costs, RFC 8966 App. A.2.2; no split horizon,
  §3.7.4); a TAP would otherwise be taken for a wired link. Hello interval 4 s (babeld's
  default for wireless interfaces), 1 s with ``profile: mobile``, or ``hello_interval_s``.
- **batmand** (B.A.T.M.A.N. III, draft-wunderlich-openmesh-manet-routing-00):
  10.42.0.I/16 with broadcast 10.42.255.255 on ``radio0`` (batmand sends its originator
  messages to the interface's broadcast address, so a /32 would not do); host routes in
  table 66 behind ``ip rule to 10.42.0.0/16 lookup 66`` (priority 6600). Originator
  interval 1 s (batmand's default), 0.5 s with ``profile: mobile``, or
  ``originator_interval_s``.

Neither daemon takes ``--lab``, so each runs under a small supervisor (``peerrun``),
``python -m manetkit.lab.peerrun --lab LAB --node nI --config nodes/nI/peer.json`` (the
:class:`~manetkit.lab.stacks.ProcessSpec` ``lab up`` starts and ``lab down`` finds by
``--lab``). The supervisor puts the address and the forwarding sysctls on ``radio0``,
waits for IPv6 duplicate address detection to finish (babeld cannot send from a
tentative link-local address), starts the daemon as its child with
``PR_SET_PDEATHSIG`` (the daemon dies with its supervisor, even on SIGKILL), passes
SIGTERM/SIGINT on, and exits with the daemon. Per-node files keep the instances apart:
babeld gets its own pid file, state file and local socket (``-I``, ``-S``,
``local-path``); batmand has a fixed ``/var/run/batmand.socket``, so it runs in a private
mount namespace where ``nodes/nI/run/`` is bind-mounted over ``/run`` (nothing of the
host's ``/run`` is touched). ``lab down`` also kills whatever runs inside a node's
namespace, so even a daemon that outlived its supervisor goes.

No route events reach the proxy from these daemons: ``proxy: plain|fixed-rto`` work on
top; ``elfn``/``bus`` are refused when the scenario is loaded.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from manetkit import paths
from manetkit.errors import UserError

PEER_STACKS = ("babeld", "batmand")
INTERFACE = "radio0"
# Every node's address (stacks.node_address) is in it; the proxy's mesh_prefix too.
MESH_NET = IPv4Network("10.42.0.0/16")
BABELD_BIN = "babeld"
BATMAND_BIN = "batmand"
BATMAND_HOST_TABLE = 66  # batmand's rt_table_hosts (batmand -i)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BabeldSettings(_Strict):
    """The scenario's ``babeld:`` section (``--set babeld.profile=mobile``)."""

    profile: Literal["default", "mobile"] = Field(
        "default", description="default: hello every 4 s (babeld's wireless default); mobile: 1 s"
    )
    hello_interval_s: float | None = Field(
        None,
        ge=0.05,
        le=655.0,  # babeld keeps intervals in centiseconds, 16 bits
        description="hello interval on radio0 in seconds (overrides the profile)",
    )
    update_interval_s: float | None = Field(
        None,
        ge=0.05,
        le=655.0,
        description="full update interval in seconds (babeld's default: 4 x hello)",
    )

    @property
    def hello_s(self) -> float:
        if self.hello_interval_s is not None:
            return self.hello_interval_s
        return 1.0 if self.profile == "mobile" else 4.0


class BatmandSettings(_Strict):
    """The scenario's ``batmand:`` section (``--set batmand.originator_interval_s=0.5``)."""

    profile: Literal["default", "mobile"] = Field(
        "default", description="default: an originator message every 1 s; mobile: 0.5 s"
    )
    originator_interval_s: float | None = Field(
        None, ge=0.05, le=60.0, description="originator interval (batmand -o) in seconds"
    )

    @field_validator("originator_interval_s")
    @classmethod
    def _whole_ms(cls, v: float | None) -> float | None:
        if v is not None and abs(v * 1000 - round(v * 1000)) > 1e-6:
            raise ValueError(f"{v} s is not a whole number of milliseconds (batmand -o takes ms)")
        return v

    @property
    def originator_ms(self) -> int:
        if self.originator_interval_s is not None:
            return round(self.originator_interval_s * 1000)
        return 500 if self.profile == "mobile" else 1000


# --- files of one node ------------------------------------------------------------------


def peer_config_path(lab: str, node: str) -> Path:
    return paths.node_dir(lab, node) / "peer.json"


def babeld_socket(lab: str, node: str) -> Path:
    """babeld's read-only local interface (``local-path``): ``dump`` lists its state."""
    return paths.node_dir(lab, node) / "babeld.sock"


def batmand_run_dir(lab: str, node: str) -> Path:
    """What batmand sees as ``/run`` (its ``batmand.socket`` lands here)."""
    return paths.node_dir(lab, node) / "run"


def babeld_conf(lab: str, node: str, settings: BabeldSettings) -> str:
    from manetkit.lab.medium.protocol import node_mac
    from manetkit.lab.stacks import node_index
    from manetkit.macaddr import format_mac

    iface = f"interface {INTERFACE} type wireless hello-interval {settings.hello_s:g}"
    if settings.update_interval_s is not None:
        iface += f" update-interval {settings.update_interval_s:g}"
    return "\n".join(
        [
            "# generated by manetkit lab up (stack babeld, docs/lab.md)",
            f"router-id {format_mac(node_mac(node_index(node)))}",
            # relative to babeld's working directory, the node dir: an AF_UNIX path has
            # at most 107 bytes and a lab dir under a test's tmp_path comes close
            f"local-path {babeld_socket(lab, node).name}",
            iface,
            f"redistribute local ip {MESH_NET} allow",
            "redistribute local deny",
            "",
        ]
    )


def peer_config(lab: str, node: str, stack: str, settings: BaseModel) -> dict[str, Any]:
    """What the supervisor of ``node`` does: address, sysctls, the daemon's argv."""
    from manetkit.lab.stacks import node_address

    d = paths.node_dir(lab, node)
    address = str(node_address(node))
    cfg: dict[str, Any] = {
        "stack": stack,
        "interface": INTERFACE,
        "address": address,
        "settings": settings.model_dump(mode="json"),
    }
    if stack == "babeld":
        assert isinstance(settings, BabeldSettings)
        cfg |= {
            "prefixlen": 32,
            "broadcast": None,
            "wait_ipv6": True,
            "private_run": None,
            "cwd": str(d),  # where its relative local-path socket is made
            # config, pid file and state file per node: instances share the filesystem
            "argv": [BABELD_BIN, "-c", str(d / "babeld.conf"), "-I", str(d / "babeld.pid")]
            + ["-S", str(d / "babel-state"), INTERFACE],
        }
    elif stack == "batmand":
        assert isinstance(settings, BatmandSettings)
        cfg |= {
            "prefixlen": MESH_NET.prefixlen,
            "broadcast": str(MESH_NET.broadcast_address),
            "wait_ipv6": False,
            "private_run": str(batmand_run_dir(lab, node)),
            "argv": [BATMAND_BIN, "--no-detach", "-o", str(settings.originator_ms), INTERFACE],
        }
    else:
        raise ValueError(f"not a peer stack: {stack!r}")
    return cfg


# --- the ProcessSpec ----------------------------------------------------------------------


def _babeld_ready(lab: str, node: str) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            return babeld_request(babeld_socket(lab, node), None, timeout=1).endswith("ok\n")
        except OSError:
            return False

    return ready


def _batmand_ready(lab: str, node: str) -> Callable[[], bool]:
    def ready() -> bool:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1)
            try:
                connect_unix(s, batmand_run_dir(lab, node) / "batmand.socket")
            except OSError:
                return False
        return True

    return ready


def peer_spec(lab: str, node: str, stack: str, settings: BaseModel):
    """The supervisor of ``node``'s babeld or batmand, its files written."""
    from manetkit.lab.stacks import ProcessSpec

    cfg = peer_config(lab, node, stack, settings)
    if shutil.which(cfg["argv"][0]) is None:
        raise UserError(
            f"stack {stack}: {cfg['argv'][0]} is not installed (apt-get install {stack}; "
            ".ci/install does)"
        )
    d = paths.node_dir(lab, node)
    d.mkdir(parents=True, exist_ok=True)
    if stack == "babeld":
        assert isinstance(settings, BabeldSettings)
        (d / "babeld.conf").write_text(babeld_conf(lab, node, settings))
        ready = _babeld_ready(lab, node)
    else:
        batmand_run_dir(lab, node).mkdir(exist_ok=True)
        ready = _batmand_ready(lab, node)
    path = peer_config_path(lab, node)
    path.write_text(json.dumps(cfg, indent=2) + "\n")
    argv = [sys.executable, "-m", "manetkit.lab.peerrun", "--lab", lab, "--node", node]
    argv += ["--config", str(path)]
    return ProcessSpec(f"{stack}-{node}", argv, netns=paths.netns_name(lab, node), ready=ready)


# --- what lab status shows ----------------------------------------------------------------


def connect_unix(sock: socket.socket, path: Path | str) -> None:
    """``sock.connect(path)`` also for paths longer than AF_UNIX's 107 bytes: through the
    directory's ``/proc/self/fd`` entry (path resolution follows it like a symlink)."""
    path = Path(path)
    if len(os.fsencode(path)) < 100:
        sock.connect(str(path))
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        sock.connect(f"/proc/self/fd/{fd}/{path.name}")
    finally:
        os.close(fd)


def babeld_request(path: Path | str, command: str | None, timeout: float = 2.0) -> str:
    """Talk to babeld's local interface: its banner, then ``command``'s reply (up to ``ok``)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        connect_unix(s, path)
        buf = b""
        sent = False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            if buf.endswith(b"ok\n") or buf.endswith(b"no\n") or b"\nbad\n" in buf:
                if command is None or sent:
                    break
                s.sendall(command.encode() + b"\n")
                sent = True
        return buf.decode(errors="replace")


def link_local_node(address: str) -> str | None:
    """``nI`` whose radio0 has the EUI-64 link-local ``address`` (RFC 4291 App. A), else None."""
    from ipaddress import IPv6Address

    from manetkit.lab.medium.protocol import mac_node

    try:
        b = IPv6Address(address.split("%")[0]).packed
    except ValueError:
        return None
    if b[:8] != bytes([0xFE, 0x80]) + bytes(6) or b[11:13] != b"\xff\xfe":
        return None
    i = mac_node(bytes([b[8] ^ 0x02]) + b[9:11] + b[13:16])
    return f"n{i}" if i else None


def babeld_neighbours(dump: str) -> list[dict[str, Any]]:
    """``add neighbour ... address A if I reach R ... cost C`` lines of babeld's ``dump``."""
    out = []
    for line in dump.splitlines():
        words = line.split()
        if words[:2] != ["add", "neighbour"]:
            continue
        kv = dict(zip(words[3::2], words[4::2], strict=False))
        out.append(
            {
                "address": kv.get("address"),
                "node": link_local_node(kv.get("address", "")),
                "reach": kv.get("reach"),
                "rxcost": int(kv.get("rxcost", 0)),
                "txcost": int(kv.get("txcost", 0)),
                "cost": int(kv.get("cost", 0)),
            }
        )
    return out


def kernel_routes(lab: str, node: str) -> list[dict[str, Any]]:
    """The node's IPv4 unicast routes outside the local table (what the daemon installed)."""
    ns = paths.netns_name(lab, node)
    try:
        r = subprocess.run(
            ["ip", "-j", "-n", ns, "-4", "route", "show", "table", "all"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        routes = json.loads(r.stdout or "[]")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return []
    out = []
    for rt in routes:
        kind = rt.get("type", "unicast")
        if rt.get("table") == "local" or kind not in ("unicast", "unreachable"):
            continue
        out.append(
            {
                "dst": rt.get("dst"),
                "via": rt.get("gateway"),
                "dev": rt.get("dev"),
                "table": rt.get("table", "main"),
                "protocol": rt.get("protocol"),
                "type": kind,
            }
        )
    return out


def node_status(lab: str, node: str, stack: str) -> dict[str, Any]:
    """Kernel routes of one node, and babeld's neighbours (from its local socket)."""
    st: dict[str, Any] = {"stack": stack, "routes": kernel_routes(lab, node)}
    if stack == "babeld":
        try:
            st["neighbours"] = babeld_neighbours(
                babeld_request(babeld_socket(lab, node), "dump", timeout=1)
            )
        except OSError:
            st["neighbours"] = None
    return st


def lab_peer_stack(process_names: list[str]) -> str | None:
    """``babeld``/``batmand`` if the lab's processes include that stack's supervisors."""
    for stack in PEER_STACKS:
        if any(n.startswith(f"{stack}-n") for n in process_names):
            return stack
    return None


def format_route(rt: dict[str, Any]) -> str:
    if rt.get("type") == "unreachable":
        return f"unreachable {rt.get('dst')}"
    return f"{rt.get('dst')} via {rt['via']}" if rt.get("via") else f"{rt.get('dst')} (link)"
