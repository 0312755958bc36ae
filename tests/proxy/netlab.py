"""A 3-namespace chain for proxy tests: client -- router -- server, over plain veth.

A "route break" is a drop rule in the router's forward chain (its own table, named
without "manetkit", removed with the namespace). A fake routing daemon (a unix socket
that the test controls) feeds each proxy route-down / route-up / erdn / ersn events.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import yaml

from manetkit.events import Event, to_wire
from manetkit.jsonlines import request
from manetkit.procs import wait_for

CLIENT_IP = "10.42.1.1"
SERVER_IP = "10.42.2.1"


def sh(*cmd: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    return subprocess.run(full, check=check, capture_output=True, text=True)


class FakeDaemon:
    """A unix socket that speaks the daemon's event protocol to subscribed proxies."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.clients: list[socket.socket] = []
        self.lock = threading.Lock()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(str(path))
        self.srv.listen(8)
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            f = c.makefile("rb")
            line = f.readline()
            if json.loads(line).get("cmd") == "subscribe":
                c.sendall(b'{"ok":true,"subscribed":true}\n')
                with self.lock:
                    self.clients.append(c)
            else:
                c.sendall(b'{"ok":true,"status":{}}\n')
                c.close()

    def subscribed(self) -> bool:
        with self.lock:
            return bool(self.clients)

    def emit(self, event: Event) -> None:
        """Send a typed event (manetkit.events), as the daemon's event socket does."""
        line = (json.dumps(to_wire(event)) + "\n").encode()
        with self.lock:
            for c in self.clients:
                with contextlib.suppress(OSError):
                    c.sendall(line)

    def close(self) -> None:
        self.srv.close()
        with self.lock:
            for c in self.clients:
                c.close()
        with contextlib.suppress(OSError):
            self.path.unlink()


class Chain:
    """client -- router -- server namespaces, each name unique to this test run."""

    def __init__(self, tag: str, workdir: Path) -> None:
        self.tag = f"{tag}{os.getpid() % 10000}"
        self.client = f"mkt-{self.tag}-c"
        self.router = f"mkt-{self.tag}-r"
        self.server = f"mkt-{self.tag}-s"
        self.dir = workdir
        self.procs: list[subprocess.Popen[bytes]] = []
        self.daemons: dict[str, FakeDaemon] = {}

    def up(self) -> None:
        for ns in (self.client, self.router, self.server):
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
        sh(
            "ip",
            "link",
            "add",
            "a0",
            "netns",
            self.client,
            "type",
            "veth",
            "peer",
            "name",
            "a1",
            "netns",
            self.router,
        )
        sh(
            "ip",
            "link",
            "add",
            "b0",
            "netns",
            self.server,
            "type",
            "veth",
            "peer",
            "name",
            "b1",
            "netns",
            self.router,
        )
        sh("ip", "addr", "add", f"{CLIENT_IP}/24", "dev", "a0", ns=self.client)
        sh("ip", "addr", "add", "10.42.1.2/24", "dev", "a1", ns=self.router)
        sh("ip", "addr", "add", "10.42.2.2/24", "dev", "b1", ns=self.router)
        sh("ip", "addr", "add", f"{SERVER_IP}/24", "dev", "b0", ns=self.server)
        for ns, dev in (
            (self.client, "a0"),
            (self.router, "a1"),
            (self.router, "b1"),
            (self.server, "b0"),
        ):
            sh("ip", "link", "set", dev, "up", ns=ns)
        sh("ip", "route", "add", "default", "via", "10.42.1.2", ns=self.client)
        sh("ip", "route", "add", "default", "via", "10.42.2.2", ns=self.server)
        sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=self.router)
        # small socket buffers (as on a 2 Mbit/s radio): a 10 MB transfer cannot hide in
        # kernel buffers, so a route break really stalls it
        for ns in (self.client, self.server):
            sh("sysctl", "-qw", "net.ipv4.tcp_rmem=4096 131072 262144", ns=ns)
            sh("sysctl", "-qw", "net.ipv4.tcp_wmem=4096 16384 262144", ns=ns)
        sh("nft", "add table inet mkt_break", ns=self.router)
        sh(
            "nft",
            "add chain inet mkt_break brk { type filter hook forward priority 0; }",
            ns=self.router,
        )

    def down(self) -> None:
        self.stop_proxies()
        for d in self.daemons.values():
            d.close()
        self.daemons.clear()
        for ns in (self.client, self.router, self.server):
            sh("ip", "netns", "pids", ns, check=False)
            pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            sh("ip", "netns", "del", ns, check=False)

    def break_route(self) -> None:
        sh("nft", "add rule inet mkt_break brk drop", ns=self.router)

    def restore_route(self) -> None:
        sh("nft", "flush chain inet mkt_break brk", ns=self.router)

    # --- an HTTP server ----------------------------------------------------------------------

    def start_httpd(self, port: int) -> None:
        """tests/proxy/httpd.py on the server, listening on ``port`` when this returns."""
        log = open(self.dir / "httpd.log", "wb")  # noqa: SIM115 - kept for the process's life
        httpd = subprocess.Popen(
            ["ip", "netns", "exec", self.server, sys.executable, "-m", "tests.proxy.httpd",
             str(port)],
            cwd=Path(__file__).resolve().parents[2], stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.procs.append(httpd)
        wait_for(
            lambda: sh("ss", "-ltn", f"sport = :{port}", ns=self.server).stdout.count("LISTEN"),
            10, "httpd",
        )  # fmt: skip

    # --- proxies ---------------------------------------------------------------------------

    def status_path(self, ns: str) -> Path:
        return self.dir / f"{ns}.status.sock"

    def start_proxy(self, ns: str, **overrides: object) -> subprocess.Popen[bytes]:
        events = self.dir / f"{ns}.events.sock"
        if ns not in self.daemons:
            self.daemons[ns] = FakeDaemon(events)
        with self.daemons[ns].lock:
            self.daemons[ns].clients.clear()  # a previous proxy's subscription is gone
        cfg = {
            "mesh_prefix": "10.42.0.0/16",
            "mode": "elfn",
            "status_socket": str(self.status_path(ns)),
            "daemon_socket": str(events),
            "partition_timeout": 30,
        }
        cfg.update(overrides)
        path = self.dir / f"{ns}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        log = open(self.dir / f"{ns}.log", "ab")  # noqa: SIM115 - kept for the process's life
        proc = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                ns,
                sys.executable,
                "-m",
                "manetkit.cli",
                "-v",
                "proxy",
                "--config",
                str(path),
            ],
            stdout=log,
            stderr=log,
        )
        self.procs.append(proc)
        wait_for(lambda: self._answers(ns) or proc.poll() is not None, 10, f"proxy in {ns}")
        assert proc.poll() is None, (self.dir / f"{ns}.log").read_text()
        if cfg["daemon_socket"]:
            wait_for(self.daemons[ns].subscribed, 5, f"proxy in {ns} subscribing")
        return proc

    def _answers(self, ns: str) -> bool:
        try:
            return bool(request(self.status_path(ns), {"cmd": "status"}, timeout=1).get("ok"))
        except (OSError, ValueError):
            return False

    def status(self, ns: str) -> dict:
        return request(self.status_path(ns), {"cmd": "status"})["status"]

    def stop_proxies(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()

    def log(self, ns: str) -> str:
        p = self.dir / f"{ns}.log"
        return p.read_text() if p.exists() else ""


@contextlib.contextmanager
def proxied_chain(prefix: str, workdir: Path, http_port: int) -> Iterator[Chain]:
    """A chain that is up, with tests/proxy/httpd.py on the server at ``http_port`` and a
    proxy (elfn, a fake daemon) at both ends; brought down whatever happens."""
    c = Chain(prefix, workdir)
    try:
        c.up()
        c.start_httpd(http_port)
        c.start_proxy(c.client)
        c.start_proxy(c.server)
        yield c
    finally:
        c.down()
