"""Peer routing daemons as lab stacks: ``stack: babeld`` and ``stack: batmand``.

The point of these stacks is comparison (docs/experiments.md): the same medium, the same movement
and the same applications, with the routing that users already run instead of
manetkit's. In every node the real daemon (Debian's ``babeld`` 1.12, ``batmand`` 0.3.2)
runs on ``radio0`` itself, and the node's address 10.42.0.I is put on ``radio0`` (there is
no ``mesh0``), so an application reaches 10.42.0.I whatever the stack:

- **babeld** (Babel, RFC 8966): 10.42.0.I/32 on ``radio0``; babeld speaks over the IPv6
  link-local address (RFC 8966 §4: Babel packets are sent from and to link-local
  addresses, multicast ff02::1:6 port 6696), announces only 10.42.0.0/16 local addresses,
  and installs ``10.42.0.J via 10.42.0.K dev radio0 proto babel onlink``. ``radio0`` is
  declared ``type wireless`` (ETX link costs, RFC 8966 App. A.2.2; no split horizon,
  §3.7.4); a TAP would otherwise be taken for a wired link. Hello and update intervals
  from the profile (:data:`BABELD_PROFILES`; ``wireless``: 2 s and 20 s).
- **batmand** (B.A.T.M.A.N. III, draft-wunderlich-openmesh-manet-routing-00):
  10.42.0.I/16 with broadcast 10.42.255.255 on ``radio0`` (batmand sends its originator
  messages to the interface's broadcast address, so a /32 would not do); host routes in
  table 66 behind ``ip rule to 10.42.0.0/16 lookup 66`` (priority 6600). Originator
  interval, hop penalty and purge timeout from the profile (:data:`BATMAND_PROFILES`;
  ``wireless``: 1 s, 15, matched to the scenario's speed: :func:`matched_purge_s`).

The profiles are how an operator would run each daemon on a mobile mesh; every flag and
its source is in docs/lab.md ("Peer profiles").

Neither daemon takes ``--lab``, so each runs under a small supervisor (``peerrun``),
``python -m manetkit.lab.peerrun --lab LAB --node nI --config nodes/nI/peer.json`` (the
:class:`~manetkit.lab.processspec.ProcessSpec` ``lab up`` starts and ``lab down`` finds by
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
from dataclasses import dataclass
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from manetkit import paths
from manetkit.errors import UserError
from manetkit.lab.addressing import node_address, node_index
from manetkit.lab.processspec import ProcessSpec

PEER_STACKS = ("babeld", "batmand")
INTERFACE = "radio0"
# Every node's address (addressing.node_address) is in it; the proxy's mesh_prefix too.
MESH_NET = IPv4Network("10.42.0.0/16")
BABELD_BIN = "babeld"
BATMAND_BIN = "batmand"
BATMAND_HOST_TABLE = 66  # batmand's rt_table_hosts (batmand -i)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- the peers' profiles ------------------------------------------------------------------
#
# A profile is how an operator would run the daemon on a mobile 802.11 mesh; every flag
# and its source is in docs/lab.md ("Peer profiles"). The first of each is the default of
# ``stack: babeld|batmand``; the others are kept as labelled variants (an experiment runs
# them side by side: ``babeld-mobile``, ``batmand-default``, ...).


@dataclass(frozen=True)
class BabeldProfile:
    """``interface radio0 type wireless hello-interval H [update-interval U]
    [link-quality false]`` (babeld(8), "Interface configuration")."""

    hello_s: float
    update_s: float | None  # None: babeld's own default, 4 x hello
    link_quality: bool | None  # None: babeld's default (true on a wireless interface)
    about: str


BABELD_PROFILES: dict[str, BabeldProfile] = {
    # an operator's wireless mesh: hellos every 2 s, full updates every 20 s (triggered
    # updates carry the changes; babeld(8): "this can be set to a fairly large value")
    "wireless": BabeldProfile(2.0, 20.0, None, "hello 2 s, update 20 s"),
    # faster link detection with a matched update interval (not 4 x hello)
    "fast": BabeldProfile(1.0, 16.0, None, "hello 1 s, update 16 s"),
    # sensitivity: hop count instead of ETX (the lab medium has no random loss unless a
    # scenario sets radio.loss, so ETX sees only collisions and lost hellos)
    "wireless-nolq": BabeldProfile(2.0, 20.0, False, "hello 2 s, update 20 s, link-quality false"),
    # babeld's built-in defaults for a wireless interface (the lab's default until the
    # operator profiles): hello 4 s, update 16 s
    "default": BabeldProfile(4.0, None, None, "babeld's defaults: hello 4 s, update 16 s"),
    # hello 1 s with babeld's 4 x hello updates: ~10x the control of "wireless"
    "mobile": BabeldProfile(1.0, None, None, "hello 1 s, update 4 s"),
}
BabeldProfileName = Literal["wireless", "fast", "wireless-nolq", "default", "mobile"]


@dataclass(frozen=True)
class BatmandProfile:
    """batmand's command line: ``-o MS [--hop-penalty P] [--purge-timeout MS]``
    (posix/init.c; ``batmand -i`` prints the values in force)."""

    originator_ms: int
    hop_penalty: int | None  # None: batmand's default, 10
    purge_matched: bool  # purge timeout matched to the scenario's speed (else 200 s)
    about: str


BATMAND_PROFILES: dict[str, BatmandProfile] = {
    # the hop penalty a Wi-Fi interface warrants, and stale neighbours purged as fast as
    # the pattern's nodes move out of range
    "wireless": BatmandProfile(1000, 15, True, "OGM 1 s, hop penalty 15, purge matched"),
    # batmand's built-in defaults (the lab's default until the operator profiles)
    "default": BatmandProfile(1000, None, False, "batmand's defaults: OGM 1 s"),
    "mobile": BatmandProfile(500, None, False, "OGM 0.5 s"),
}
BatmandProfileName = Literal["wireless", "default", "mobile"]
BATMAND_DEFAULT_HOP_PENALTY = 10  # tq_hop_penalty (batmand -i)
BATMAND_DEFAULT_PURGE_MS = 200_000  # originator_timeout (batmand -i): 200 s
BATMAND_GLOBAL_WINDOW = 5  # tq_global_window_size (batmand -i): OGMs a TQ averages


def _about(profiles: dict[str, Any]) -> str:
    return "; ".join(f"{k}: {v.about}" for k, v in profiles.items())


class BabeldSettings(_Strict):
    """The scenario's ``babeld:`` section (``--set babeld.profile=fast``)."""

    profile: BabeldProfileName = Field("wireless", description=_about(BABELD_PROFILES))
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
        description="full update interval in seconds (overrides the profile; babeld's "
        "default: 4 x hello)",
    )
    link_quality: bool | None = Field(
        None, description="link quality estimation (ETX) on radio0 (overrides the profile)"
    )

    @property
    def hello_s(self) -> float:
        if self.hello_interval_s is not None:
            return self.hello_interval_s
        return BABELD_PROFILES[self.profile].hello_s

    @property
    def update_s(self) -> float | None:
        """The update interval written to the config (None: babeld's 4 x hello)."""
        if self.update_interval_s is not None:
            return self.update_interval_s
        return BABELD_PROFILES[self.profile].update_s

    @property
    def lq(self) -> bool | None:
        if self.link_quality is not None:
            return self.link_quality
        return BABELD_PROFILES[self.profile].link_quality


class BatmandSettings(_Strict):
    """The scenario's ``batmand:`` section (``--set batmand.originator_interval_s=0.5``)."""

    profile: BatmandProfileName = Field("wireless", description=_about(BATMAND_PROFILES))
    originator_interval_s: float | None = Field(
        None, ge=0.05, le=60.0, description="originator interval (batmand -o) in seconds"
    )
    hop_penalty: int | None = Field(
        None, ge=0, le=255, description="TQ points a hop costs, of 255 (batmand --hop-penalty)"
    )
    purge_timeout_s: float | None = Field(
        None,
        ge=0.001,
        le=86_400.0,
        description="seconds without an OGM before a neighbour is purged (batmand "
        "--purge-timeout; originators after twice that); overrides the profile",
    )

    @field_validator("originator_interval_s", "purge_timeout_s")
    @classmethod
    def _whole_ms(cls, v: float | None) -> float | None:
        if v is not None and abs(v * 1000 - round(v * 1000)) > 1e-6:
            raise ValueError(f"{v} s is not a whole number of milliseconds (batmand takes ms)")
        return v

    @property
    def originator_ms(self) -> int:
        if self.originator_interval_s is not None:
            return round(self.originator_interval_s * 1000)
        return BATMAND_PROFILES[self.profile].originator_ms

    @property
    def penalty(self) -> int | None:
        """``--hop-penalty`` to pass (None: batmand's default)."""
        if self.hop_penalty is not None:
            return self.hop_penalty
        return BATMAND_PROFILES[self.profile].hop_penalty

    def purge_ms(self, speed_mps: float | None, range_m: float) -> int | None:
        """``--purge-timeout`` to pass in ms (None: batmand's default, 200 s): the
        setting, else the profile's (matched to ``speed_mps``: :func:`matched_purge_s`)."""
        if self.purge_timeout_s is not None:
            return round(self.purge_timeout_s * 1000)
        if not BATMAND_PROFILES[self.profile].purge_matched:
            return None
        return round(matched_purge_s(speed_mps, range_m, self.originator_ms / 1000) * 1000)


def matched_purge_s(speed_mps: float | None, range_m: float, originator_s: float) -> float:
    """A purge timeout matched to the nodes' speed: the time two nodes moving apart at
    the pattern's speed (relative speed 2v) take to cross the reception range, so a
    departed neighbour stops being a route candidate about when it left; never fewer
    than :data:`BATMAND_GLOBAL_WINDOW` originator intervals (a neighbour is not dropped
    for fewer lost OGMs than its TQ averages over), never more than batmand's 200 s
    (static scenarios, or no speed known)."""
    cap = BATMAND_DEFAULT_PURGE_MS / 1000
    floor = BATMAND_GLOBAL_WINDOW * originator_s
    if not speed_mps or speed_mps <= 0:
        return cap
    return round(min(cap, max(floor, range_m / (2 * speed_mps))), 3)


def scenario_speed_range(scenario: Any) -> tuple[float | None, float]:
    """(random-waypoint speed or None, reception range in m) of a lab scenario."""
    from manetkit.lab.medium.propagation import TwoRayGround

    mob = getattr(scenario, "mobility", None)
    speed = getattr(mob, "speed", None) if getattr(mob, "model", "") == "random-waypoint" else None
    prop = TwoRayGround(**scenario.propagation.model_dump(exclude={"model"}))
    return speed, prop.range_m()


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
    from manetkit.macaddr import format_mac

    iface = f"interface {INTERFACE} type wireless hello-interval {settings.hello_s:g}"
    if settings.update_s is not None:
        iface += f" update-interval {settings.update_s:g}"
    if settings.lq is not None:
        iface += f" link-quality {'true' if settings.lq else 'false'}"
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


def batmand_argv(settings: BatmandSettings, purge_ms: int | None) -> list[str]:
    """batmand's command line for ``settings`` (``purge_ms``: :meth:`BatmandSettings.purge_ms`)."""
    argv = [BATMAND_BIN, "--no-detach", "-o", str(settings.originator_ms)]
    if settings.penalty is not None:
        argv += ["--hop-penalty", str(settings.penalty)]
    if purge_ms is not None:
        argv += ["--purge-timeout", str(purge_ms)]
    return [*argv, INTERFACE]


def peer_config(
    lab: str,
    node: str,
    stack: str,
    settings: BaseModel,
    speed_range: tuple[float | None, float] = (None, 250.0),
) -> dict[str, Any]:
    """What the supervisor of ``node`` does: address, sysctls, the daemon's argv.
    ``speed_range``: the scenario's speed and reception range (a batmand profile with a
    matched purge timeout: :func:`scenario_speed_range`)."""

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
            "argv": batmand_argv(settings, settings.purge_ms(*speed_range)),
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


def peer_spec(
    lab: str,
    node: str,
    stack: str,
    settings: BaseModel,
    speed_range: tuple[float | None, float] = (None, 250.0),
):
    """The supervisor of ``node``'s babeld or batmand, its files written."""

    cfg = peer_config(lab, node, stack, settings, speed_range)
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
