"""The supervisor of one lab node's peer daemon (babeld or batmand), run inside the node.

``lab up`` starts ``python -m manetkit.lab.peerrun --lab LAB --node nI --config
nodes/nI/peer.json`` in the node's namespace (``manetkit.lab.peers`` writes the file and
explains the stacks). It

1. puts the node's address on ``radio0`` and sets the forwarding sysctls (``ip_forward``,
   no ICMP redirects, no reverse-path filter: a chain forwards out of the interface a
   packet came in on);
2. for babeld, makes sure ``radio0`` has IPv6 and waits until its link-local address has
   passed duplicate address detection (RFC 4862 §5.4; Babel is sent from link-local
   addresses, RFC 8966 §4, and babeld cannot send from a tentative one);
3. starts the daemon as its child with ``PR_SET_PDEATHSIG`` (it dies with this process,
   even on SIGKILL), for batmand in a private mount namespace with ``nodes/nI/run/``
   bind-mounted over ``/run`` (batmand's unix socket path is fixed);
4. passes SIGTERM/SIGINT/SIGHUP on and exits with the daemon.

Standard library only (plus the ``ip`` command): one runs per node, and pydantic and
pyroute2 would add ~30 MB and a few hundred ms of start-up CPU to each.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from manetkit.procs import wait_for

log = logging.getLogger("manetkit.lab.peerrun")

PR_SET_PDEATHSIG = 1
CLONE_NEWNS = 0x00020000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_SLAVE = 1 << 19


def _sysctl(key: str, value: str | int) -> None:
    Path("/proc/sys", *key.split(".")).write_text(f"{value}\n")


def _ip(*args: str) -> str:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def link_local_state(iface: str) -> str:
    """``ok``, ``tentative`` or ``none``: radio0's IPv6 link-local address."""
    addrs = json.loads(_ip("-j", "-6", "addr", "show", "dev", iface, "scope", "link") or "[]")
    infos = [a for link in addrs for a in link.get("addr_info", [])]
    if not infos:
        return "none"
    if any(a.get("tentative") or a.get("dadfailed") for a in infos):
        return "tentative"
    return "ok"


def configure_radio(cfg: dict[str, Any], ipv6_timeout: float = 10.0) -> None:
    """Address, forwarding sysctls and (for babeld) a usable IPv6 link-local on radio0."""
    iface = cfg["interface"]
    if not Path(f"/proc/sys/net/ipv4/conf/{iface}").exists():
        raise RuntimeError(f"no interface {iface} in this namespace (is the radio attached?)")
    _sysctl("net.ipv4.ip_forward", 1)
    for scope in ("all", "default", iface):
        _sysctl(f"net.ipv4.conf.{scope}.send_redirects", 0)
        _sysctl(f"net.ipv4.conf.{scope}.accept_redirects", 0)
        _sysctl(f"net.ipv4.conf.{scope}.rp_filter", 0)
    addr = ["addr", "replace", f"{cfg['address']}/{cfg['prefixlen']}", "dev", iface]
    if cfg.get("broadcast"):
        addr += ["broadcast", cfg["broadcast"]]
    _ip(*addr)
    if not cfg.get("wait_ipv6"):
        return
    v6 = Path(f"/proc/sys/net/ipv6/conf/{iface}/disable_ipv6")
    if not v6.exists():
        raise RuntimeError("babeld needs IPv6 (link-local on radio0): this kernel has none")
    if v6.read_text().strip() != "0":
        log.info("enabling IPv6 on %s (babeld speaks over link-local)", iface)
        v6.write_text("0\n")
    try:
        wait_for(lambda: link_local_state(iface) == "ok", ipv6_timeout, "IPv6 link-local")
    except TimeoutError:
        raise RuntimeError(
            f"{iface} has no usable IPv6 link-local address after {ipv6_timeout:g} s "
            f"({link_local_state(iface)}): babeld cannot send"
        ) from None


def _child_setup(private_run: str | None) -> Callable[[], None]:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)

    def setup() -> None:  # runs in the child between fork and exec
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if private_run:
            run = os.path.realpath("/var/run").encode()
            if libc.unshare(CLONE_NEWNS) != 0:
                raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
            # our mounts must not propagate back to the host's namespace
            if libc.mount(None, b"/", None, MS_REC | MS_SLAVE, None) != 0:
                raise OSError(ctypes.get_errno(), "mount --make-rslave /")
            if libc.mount(private_run.encode(), run, None, MS_BIND, None) != 0:
                raise OSError(ctypes.get_errno(), f"mount --bind {private_run} {run.decode()}")

    return setup


def supervise(cfg: dict[str, Any]) -> int:
    """Start the daemon, pass signals on, return its exit status."""
    argv = cfg["argv"]
    child: subprocess.Popen[bytes] | None = None
    stopping = False

    def forward(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signum)

    # before the daemon exists: a SIGTERM in between must still stop it
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    log.info("starting %s", " ".join(argv))
    try:
        child = subprocess.Popen(
            argv, cwd=cfg.get("cwd"), preexec_fn=_child_setup(cfg.get("private_run"))
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.error("cannot start %s: %s", argv[0], exc)
        return 1
    if stopping:
        child.terminate()
    rc = child.wait()
    log.info("%s exited with %s", argv[0], rc)
    if stopping:
        return 0
    return rc if rc > 0 else 1  # the daemon ending by itself is a failure


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m manetkit.lab.peerrun",
        description="run one lab node's babeld or batmand on radio0 (lab up starts it)",
    )
    p.add_argument("--lab", required=True)
    p.add_argument("--node", required=True)
    p.add_argument("--config", required=True, help="nodes/nI/peer.json written by lab up")
    args = p.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s peers {args.node} %(levelname)s %(message)s"
    )
    try:
        cfg = json.loads(Path(args.config).read_text())
        configure_radio(cfg)
    except (OSError, ValueError, RuntimeError, KeyError, subprocess.TimeoutExpired) as exc:
        log.error("%s: %s", args.config, exc)
        return 1
    return supervise(cfg)


if __name__ == "__main__":
    sys.exit(main())
