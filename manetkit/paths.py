"""Where manetkit's processes keep their sockets, pid files and logs (a neutral module).

The daemon, the proxy and the lab all find each other's sockets here, so none of them
imports another to learn a path. Everything a lab makes is found from its name alone, so ``lab down`` can clean up after
a crash: namespaces are ``mk-<lab>-<node>``, files live under ``<rundir>/labs/<lab>/``.
``MANETKIT_RUNDIR`` (default ``/run/manetkit``) moves the whole tree (tests use it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

NETNS_PREFIX = "mk-"
# sockaddr_un's sun_path holds 108 bytes with the terminating NUL (unix(7)).
SUN_PATH_MAX = 107
_LAB_NAME = re.compile(r"^[a-z0-9][a-z0-9_]{0,11}$")


def rundir() -> Path:
    return Path(os.environ.get("MANETKIT_RUNDIR", "/run/manetkit"))


def check_lab_name(name: str) -> str:
    """Lab names become part of namespace and interface names: short, lowercase, no dash."""
    if not _LAB_NAME.match(name):
        raise ValueError(
            f"lab name {name!r}: use 1-12 characters of a-z, 0-9 and '_', starting with a letter or digit"
        )
    return name


def lab_dir(lab: str) -> Path:
    return rundir() / "labs" / lab


def netns_name(lab: str, node: str) -> str:
    return f"{NETNS_PREFIX}{lab}-{node}"


def medium_socket(lab: str) -> Path:
    """The medium's datagram socket (radios send ATTACH/TX here)."""
    return lab_dir(lab) / "medium.sock"


def medium_control_socket(lab: str) -> Path:
    """The medium's control socket (JSON lines: move, link, positions, stats)."""
    return lab_dir(lab) / "medium-ctl.sock"


def node_dir(lab: str, node: str) -> Path:
    return lab_dir(lab) / "nodes" / node


def radio_socket(lab: str, node: str) -> Path:
    """The radio's datagram address towards the medium."""
    return node_dir(lab, node) / "radio.sock"


def radio_control_socket(lab: str, node: str) -> Path:
    """The radio's control socket: station dump and link events for the node's software."""
    return node_dir(lab, node) / "radio-ctl.sock"


def logs_dir(lab: str) -> Path:
    return lab_dir(lab) / "logs"


def ground_truth_log(lab: str) -> Path:
    return logs_dir(lab) / "ground-truth.jsonl"


def daemon_socket(lab: str, node: str) -> Path:
    """A lab node's daemon event socket."""
    return node_dir(lab, node) / "events.sock"


def proxy_socket(lab: str, node: str) -> Path:
    """A lab node's proxy status socket."""
    return node_dir(lab, node) / "proxy.sock"


def lab_sockets(lab: str, nodes: list[str]) -> list[Path]:
    """Every AF_UNIX path a lab of ``nodes`` binds (babeld's and batmand's are reached
    through their directory: manetkit.lab.peers)."""
    out = [medium_socket(lab), medium_control_socket(lab)]
    for n in nodes:
        out += [radio_socket(lab, n), radio_control_socket(lab, n)]
        out += [daemon_socket(lab, n), proxy_socket(lab, n)]
    return out


def check_socket_path(path: Path | str, what: str = "socket path", hint: str = "") -> Path:
    """``path`` if it fits AF_UNIX's 107 bytes; else ValueError naming ``what`` (a config
    field or option), the length and the limit: bind() or connect() would fail later, in
    whichever process gets there first, with a bare OSError ("AF_UNIX path too long")."""
    n = len(os.fsencode(path))
    if n > SUN_PATH_MAX:
        raise ValueError(
            f"{what} {path} is {n} bytes; AF_UNIX allows at most {SUN_PATH_MAX} (unix(7))"
            + (f": {hint}" if hint else "")
        )
    return Path(path)


def rundir_hint() -> str:
    """What to shorten when a path under the run dir is too long."""
    return f"use a shorter MANETKIT_RUNDIR (now {rundir()}) or lab name"


def socket_option(value: str | None, option: str, default: Path) -> Path:
    """A command line's socket path (``option``'s ``value``, else ``default`` under the
    run dir), refused as :func:`check_socket_path` when too long for AF_UNIX."""
    if value:
        return check_socket_path(value, option)
    return check_socket_path(default, f"{option} (default)", rundir_hint())


def check_socket_paths(sockets: list[Path]) -> None:
    """Refuse (ValueError naming it) the longest of a lab's socket paths when it is over
    AF_UNIX's 107 bytes (:func:`check_socket_path`)."""
    if sockets:
        longest = max(sockets, key=lambda p: len(os.fsencode(p)))
        check_socket_path(longest, hint=rundir_hint())
