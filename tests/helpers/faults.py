"""Fault injection in a running lab, for tests/lab/test_faults_netns.py.

A verified transfer (:class:`Transfer`: paced sender in one node, SHA-256 of what the
receiver got in another) and the faults: SIGKILL and restart of a lab process (daemon,
proxy, radio, medium), deleting an interface in a node. Processes are found, and
restarted, from the lab's ``state.json`` (the argv ``lab up`` used, log appended), so
``lab down`` still finds every one of them by its ``--lab`` argument.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from manetkit import paths
from manetkit.lab import nodes
from manetkit.procs import alive, stop_all, wait_for

RECEIVER = r"""
import hashlib, json, socket, sys, time
out, port = sys.argv[1], int(sys.argv[2])
res = {"bytes": 0, "sha256": None, "error": None}
h = hashlib.sha256()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", port))
s.listen(1)
s.settimeout(30)
open(out + ".ready", "w").close()
last = 0
try:
    c, _ = s.accept()
    c.settimeout(30)
    while True:
        b = c.recv(65536)
        if not b:
            break
        h.update(b)
        res["bytes"] += len(b)
        if res["bytes"] - last >= 32768:
            last = res["bytes"]
            open(out + ".progress", "w").write(str(last))
    c.sendall(h.hexdigest().encode())  # the application's own end-to-end check
    c.close()
except OSError as e:
    res["error"] = repr(e)
res["sha256"] = h.hexdigest()
open(out, "w").write(json.dumps(res))
"""

SENDER = r"""
import hashlib, json, random, socket, sys, time
dst, port, total, rate, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
data = random.Random(total).randbytes(total)
res = {"sent": 0, "sha256": hashlib.sha256(data).hexdigest(), "error": None, "ack": None}
t0 = time.monotonic()
try:
    s = socket.create_connection((dst, port), timeout=30)
    for off in range(0, total, 16384):
        s.sendall(data[off : off + 16384])
        res["sent"] = min(off + 16384, total)
        ahead = res["sent"] / rate - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)
    s.shutdown(socket.SHUT_WR)
    ack = b""
    while b := s.recv(128):
        ack += b
    res["ack"] = ack.decode()
except OSError as e:
    res["error"] = repr(e)
res["elapsed_s"] = round(time.monotonic() - t0, 2)
open(out, "w").write(json.dumps(res))
"""


def ns_popen(lab: str, node: str, *cmd: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["ip", "netns", "exec", paths.netns_name(lab, node), *cmd],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def ns_run(lab: str, node: str, *cmd: str) -> str:
    return subprocess.run(
        ["ip", "netns", "exec", paths.netns_name(lab, node), *cmd],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout


@dataclass
class Transfer:
    """``total`` bytes from ``src`` to ``dst_addr`` (in ``dst``) at ``rate`` B/s."""

    lab: str
    src: str
    dst: str
    dst_addr: str
    port: int
    total: int
    rate: float
    workdir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.recv_out = self.workdir / f"recv-{self.port}.json"
        self.send_out = self.workdir / f"send-{self.port}.json"

    def start(self) -> None:
        self.procs.append(
            ns_popen(self.lab, self.dst, sys.executable, "-c", RECEIVER, str(self.recv_out),
                     str(self.port))
        )  # fmt: skip
        wait_for(lambda: Path(f"{self.recv_out}.ready").exists(), 10, "receiver listening")
        self.procs.append(
            ns_popen(self.lab, self.src, sys.executable, "-c", SENDER, self.dst_addr,
                     str(self.port), str(self.total), str(self.rate), str(self.send_out))
        )  # fmt: skip

    def received(self) -> int:
        try:
            return int(Path(f"{self.recv_out}.progress").read_text() or 0)
        except (OSError, ValueError):
            return 0

    def wait(self, timeout: float) -> tuple[dict, dict]:
        """(sender's result, receiver's result), after both ended (killed at timeout)."""
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        sent = _json(self.send_out) or {"error": "sender did not finish", "sent": 0}
        got = _json(self.recv_out) or {"error": "receiver did not finish", "bytes": 0}
        return sent, got

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def verdict(sent: dict, got: dict, total: int) -> str:
    """``complete`` (every byte, hash equal), ``error`` (an app saw an error), or
    ``TRUNCATED``: the receiver saw a clean end of stream without all the bytes."""
    if got.get("error") is None:
        if got.get("bytes") == total and got.get("sha256") == sent.get("sha256"):
            return "complete"
        return "TRUNCATED"
    return "error"


class LabProcs:
    """The lab's processes by name (``daemon-n2``, ``proxy-n4``, ``radio-n3``,
    ``medium``): kill, restart with the same argv, wait until gone."""

    def __init__(self, lab: str) -> None:
        self.lab = lab
        state = nodes.read_state(lab)
        assert state is not None, f"lab {lab} has no state.json"
        self.info = {p.name: p for p in state.processes}
        self.pid = {p.name: p.pid for p in state.processes}
        self.children: list[subprocess.Popen[bytes]] = []

    def log(self, name: str) -> str:
        return Path(self.info[name].log).read_text(errors="replace")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        pid = self.pid[name]
        os.kill(pid, sig)
        wait_for(lambda: not alive(pid), 10, f"{name} (pid {pid}) to die")

    def wait_gone(self, name: str, timeout: float = 10) -> None:
        pid = self.pid[name]
        wait_for(lambda: not alive(pid), timeout, f"{name} (pid {pid}) to exit")

    def start(self, name: str) -> None:
        """Start ``name`` again exactly as ``lab up`` did (same argv, same log)."""
        info = self.info[name]
        with open(info.log, "ab") as out:
            p = subprocess.Popen(
                info.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.children.append(p)
        self.pid[name] = p.pid

    def reap(self) -> None:
        """Stop (SIGTERM, then SIGKILL) and reap what :meth:`start` started."""
        stop_all(self.children)


def leftovers(lab: str, node: str) -> list[str]:
    """What a node's kernel holds besides what its running daemon and proxy own:
    exactly one mesh0, one prefix route on it, one proxy nft table and policy rule."""
    bad = []
    links = ns_run(lab, node, "ip", "-o", "link", "show").splitlines()
    if sum(" mesh0:" in ln for ln in links) != 1:
        bad.append(f"{node}: mesh0 links: {links}")
    routes = ns_run(lab, node, "ip", "route", "show", "10.42.0.0/16").splitlines()
    if len(routes) != 1 or "dev mesh0" not in routes[0]:
        bad.append(f"{node}: mesh routes {routes}")
    tables = ns_run(lab, node, "nft", "list", "tables").split()
    if tables.count("manetkit_proxy") != 1:
        bad.append(f"{node}: nft tables {tables}")
    rules = [r for r in ns_run(lab, node, "ip", "rule", "show").splitlines() if "4242" in r]
    if len(rules) != 1:
        bad.append(f"{node}: proxy policy rules {rules}")
    return bad
