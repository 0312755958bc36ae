"""N network namespaces on one Ethernet segment, each able to run ``manetkit daemon``.

Benchmark and test helper (it shells out to ``ip``, never used by the daemon itself). A hub namespace holds a Linux
bridge; node i (1-based) is namespace ``<prefix><i>`` with radio interface ``rad0``
(a veth whose peer is a bridge port) and mesh address 10.42.0.i. Which node talks to
which is decided by the routes (static engine), so a chain is A -> B -> C with B
forwarding in userspace; the bridge only carries the frames. No medium involved.
Everything lives in namespaces: nothing is added to the root namespace.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from manetkit.daemonstatus import DaemonStatus, fetch_status
from manetkit.jsonlines import request
from manetkit.procs import wait_for


def sh(*cmd: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=timeout)


class VethMesh:
    def __init__(self, prefix: str, n: int, workdir: Path, offloads_off: bool = True) -> None:
        if len(prefix) > 10:
            raise ValueError(f"namespace prefix {prefix!r} is longer than 10 characters")
        workdir.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.n = n
        self.workdir = workdir
        self.offloads_off = offloads_off
        self.hub = f"{prefix}h"
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def ns(self, i: int) -> str:
        return f"{self.prefix}{i}"

    @staticmethod
    def addr(i: int) -> str:
        return f"10.42.0.{i}"

    def mac(self, i: int) -> str:
        return f"02:6d:74:00:00:{i:02x}"

    def sock(self, i: int) -> Path:
        return self.workdir / f"n{i}.sock"

    def up(self) -> VethMesh:
        sh("ip", "netns", "add", self.hub)
        sh("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.hub, "link", "set", "br0", "up")
        for i in range(1, self.n + 1):
            ns = self.ns(i)
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh(
                "ip",
                "-n",
                self.hub,
                "link",
                "add",
                f"p{i}",
                "type",
                "veth",
                "peer",
                "name",
                "rad0",
                "netns",
                ns,
            )
            sh("ip", "-n", ns, "link", "set", "rad0", "address", self.mac(i))
            sh("ip", "-n", self.hub, "link", "set", f"p{i}", "master", "br0", "up")
            sh("ip", "-n", ns, "link", "set", "rad0", "up")
            if self.offloads_off:
                # docs/architecture.md "Performance notes": veth offloads hand AF_PACKET partial
                # checksums and super-sized frames; real radios do not.
                for ns_, dev in ((ns, "rad0"), (self.hub, f"p{i}")):
                    sh(
                        "ip",
                        "netns",
                        "exec",
                        ns_,
                        "ethtool",
                        "-K",
                        dev,
                        "tx",
                        "off",
                        "tso",
                        "off",
                        "gso",
                        "off",
                        "gro",
                        "off",
                        check=False,
                    )
        return self

    def config(self, i: int, **over: Any) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "address": self.addr(i),
            "protocol": "static",
            "radio_interface": "rad0",
            "event_socket": str(self.sock(i)),
            "log_level": "info",
            "link_sensing": {"backend": "hello", "hello": {"interval_s": 0.2}},
        }
        cfg.update(over)
        return cfg

    def start(self, i: int, wait: bool = True, **over: Any) -> subprocess.Popen[bytes]:
        path = self.workdir / f"n{i}.yaml"
        path.write_text(yaml.safe_dump(self.config(i, **over)))
        log = open(self.workdir / f"n{i}.log", "ab")  # noqa: SIM115 - lives with the process
        p = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                self.ns(i),
                sys.executable,
                "-m",
                "manetkit.daemon",
                "--config",
                str(path),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs[i] = p
        if wait:
            wait_for(lambda: self.alive(i), 10, f"daemon n{i} event socket")
        return p

    def alive(self, i: int) -> bool:
        p = self.procs.get(i)
        if p is not None and p.poll() is not None:
            raise AssertionError(f"daemon n{i} exited with {p.returncode}: {self.log(i)}")
        try:
            return bool(request(self.sock(i), {"cmd": "ping"}, timeout=1).get("ok"))
        except (OSError, ValueError):
            return False

    def log(self, i: int) -> str:
        with contextlib.suppress(OSError):
            return (self.workdir / f"n{i}.log").read_text()[-3000:]
        return ""

    def status(self, i: int) -> DaemonStatus:
        return fetch_status(self.sock(i))

    def stop(self, i: int, sig: int = signal.SIGTERM, timeout: float = 10) -> int:
        p = self.procs.pop(i)
        if p.poll() is None:
            # `ip netns exec` execs the daemon, so the pid is the daemon's own.
            os.kill(p.pid, sig)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return p.returncode

    def run(
        self, i: int, *cmd: str, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return sh("ip", "netns", "exec", self.ns(i), *cmd, check=check, timeout=timeout)

    def neighbours_up(self, i: int, want: set[str]) -> bool:
        return want <= self.status(i).up_neighbours()

    def down(self) -> None:
        for i in list(self.procs):
            with contextlib.suppress(Exception):
                self.stop(i, timeout=5)
        for ns in [self.ns(i) for i in range(1, self.n + 1)] + [self.hub]:
            sh("ip", "netns", "del", ns, check=False)

    def __enter__(self) -> VethMesh:
        try:
            return self.up()
        except BaseException:
            self.down()
            raise

    def __exit__(self, *exc: object) -> None:
        self.down()


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, default=str)
