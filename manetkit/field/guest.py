"""The rig's guest side: runs inside qemu, in a chroot of the host's root.

Three mac80211_hwsim radios, one network namespace each, form a 2-hop chain through
hwsim's debugfs ``group`` bitmasks (radios hear each other when their groups share a
bit: 1, 3, 2 gives 1-2-3 with 1 and 3 out of range). Each radio joins one IBSS with a
fixed BSSID through ``field-tests/ibss-up``, the script users run on laptops. The steps
then check traffic from radio 1 to radio 3 and what nl80211 reports, and write
``result.json`` (``{"steps": [{"name", "ok", "seconds", "detail"}], ...}``) for the host.

Run as ``python -m manetkit.field.guest PLAN.json``; ``python -m manetkit.field.guest
sense IF SECONDS`` is the helper that runs the nl80211 backend inside a namespace.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

RESULTS = Path("/tmp/results")
DEBUGFS = Path("/sys/kernel/debug/ieee80211")
NODES = 3
GROUPS = {1: 1, 2: 3, 3: 2}  # node -> hwsim group bitmask: a chain 1-2-3
SSID, FREQ, BSSID = "manetkit-rig", "2412", "02:ca:fe:00:00:01"


def ns(node: int) -> str:
    return f"mkv-n{node}"


def addr(node: int) -> str:
    return f"10.99.0.{node}"


class StepFailed(Exception):
    pass


class Guest:
    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.python: list[str] = plan["python"]  # interpreter argv
        self.repo = Path(plan["repo"])
        self.steps: list[dict[str, Any]] = []
        self.facts: dict[str, Any] = {}
        self.wlan: dict[int, str] = {}  # node -> interface
        self.phy: dict[int, str] = {}
        self.mac: dict[int, str] = {}
        self.procs: list[subprocess.Popen] = []
        self.daemons: list[subprocess.Popen] = []

    # -- helpers -----------------------------------------------------------------------
    def sh(self, *argv: str, node: int | None = None, check: bool = True, timeout: float = 60):
        if node is not None:
            argv = ("ip", "netns", "exec", ns(node), *argv)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise StepFailed(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
        return done

    def step(self, name: str, fn, *args) -> Any:
        t0 = time.monotonic()
        print(f"[guest] step {name}", flush=True)
        try:
            detail = fn(*args)
            ok = True
        except Exception as exc:  # the report names the step and the reason
            detail = f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, StepFailed):
                detail += "\n" + traceback.format_exc()
            ok = False
        self.steps.append(
            {"name": name, "ok": ok, "seconds": round(time.monotonic() - t0, 2), "detail": detail}
        )
        print(f"[guest] step {name}: {'ok' if ok else 'FAILED'} {detail}", flush=True)
        if not ok:
            raise StepFailed(name)
        return detail

    def wait_for(self, what: str, cond, timeout: float = 30.0, every: float = 0.25) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = cond()
            if value:
                return value
            if time.monotonic() > deadline:
                raise StepFailed(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(every)

    # -- steps -------------------------------------------------------------------------
    def radios(self) -> dict:
        nets = sorted(p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith("wlan"))
        if len(nets) != NODES:
            raise StepFailed(f"expected {NODES} hwsim interfaces, found {nets}")
        for node, dev in enumerate(nets, 1):
            self.wlan[node] = dev
            self.phy[node] = Path(f"/sys/class/net/{dev}/phy80211/name").read_text().strip()
            self.mac[node] = Path(f"/sys/class/net/{dev}/address").read_text().strip()
        # what a process start costs here (TCG): explains the step times in the report
        for name, argv in (
            ("true", ["true"]),
            ("python", [*self.python, "-c", "pass"]),
            ("python-ibss", [*self.python, "-c", "import manetkit.field.ibss"]),
        ):
            t = time.monotonic()
            self.sh(*argv)
            self.facts[f"spawn_{name}_s"] = round(time.monotonic() - t, 3)
        self.facts["debugfs"] = sorted(p.name for p in (DEBUGFS / self.phy[1] / "hwsim").iterdir())
        return {"wlan": self.wlan, "phy": self.phy, "mac": self.mac}

    def topology(self) -> dict:
        for node in range(1, NODES + 1):
            (DEBUGFS / self.phy[node] / "hwsim" / "group").write_text(f"{GROUPS[node]}\n")
            self.sh("ip", "netns", "add", ns(node))
            self.sh("iw", "phy", self.phy[node], "set", "netns", "name", ns(node))
            self.sh("ip", "link", "set", "lo", "up", node=node)
        return {"groups": GROUPS}

    def ibss_up(self) -> str:
        # One ibss-up per radio, as on three laptops; concurrently, because a Python
        # start costs seconds under TCG.
        script = str(self.repo / "field-tests" / "ibss-up")
        procs = [
            subprocess.Popen(
                [
                    *self.python,
                    script,
                    "-i",
                    self.wlan[node],
                    "--netns",
                    ns(node),
                    "--ssid",
                    SSID,
                    "--freq",
                    FREQ,
                    "--bssid",
                    BSSID,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )  # fmt: skip
            for node in range(1, NODES + 1)
        ]
        for node, proc in enumerate(procs, 1):
            out, _ = proc.communicate(timeout=120)
            if proc.returncode != 0:
                raise StepFailed(f"ibss-up on node {node}: exit {proc.returncode}: {out}")
        return f"{NODES} radios joined {SSID} on {FREQ} MHz, BSSID {BSSID}"

    def peers(self, node: int) -> set[str]:
        from manetkit.daemon.linksense.iw import parse_station_dump

        text = self.sh("iw", "dev", self.wlan[node], "station", "dump", node=node).stdout
        return {":".join(f"{b:02x}" for b in s.info.mac) for s in parse_station_dump(text)}

    def chain_formed(self) -> dict:
        want = {1: {self.mac[2]}, 2: {self.mac[1], self.mac[3]}, 3: {self.mac[2]}}
        self.wait_for("stations 1-2 and 2-3 (iw station dump)",
                      lambda: all(self.peers(n) >= want[n] for n in want))  # fmt: skip
        got = {n: sorted(self.peers(n)) for n in want}
        if self.mac[3] in got[1] or self.mac[1] in got[3]:
            raise StepFailed(f"radios 1 and 3 hear each other: {got}")
        return got

    def record_samples(self) -> str:
        text = self.sh("iw", "dev", self.wlan[2], "station", "dump", node=2).stdout
        (RESULTS / "hwsim_ibss.txt").write_text(text)
        raw = self.sh(
            *self.python, "-m", "manetkit.field.guest", "rawdump", self.wlan[2], node=2
        ).stdout
        (RESULTS / "hwsim_station_dump.json").write_text(raw)
        return f"{len(text.splitlines())} lines of iw, {len(json.loads(raw)['messages'])} messages"

    def static_routes(self) -> str:
        for node in range(1, NODES + 1):
            self.sh("ip", "addr", "add", f"{addr(node)}/24", "dev", self.wlan[node], node=node)
        self.sh("sysctl", "-qw", "net.ipv4.ip_forward=1", node=2)
        self.sh("sysctl", "-qw", f"net.ipv4.conf.{self.wlan[2]}.send_redirects=0", node=2)
        self.sh("sysctl", "-qw", "net.ipv4.conf.all.send_redirects=0", node=2)
        self.sh("ip", "route", "add", addr(3), "via", addr(2), node=1)
        self.sh("ip", "route", "add", addr(1), "via", addr(2), node=3)
        return "kernel forwarding on radio 2"

    def ping(self, src: int, dst: int) -> str:
        done = self.sh("ping", "-c", "3", "-i", "0.2", "-W", "3", addr(dst), node=src, check=False)
        if done.returncode != 0:
            raise StepFailed(f"ping {addr(dst)} from node {src}: {done.stdout[-300:]}")
        return done.stdout.strip().splitlines()[-1]

    def http(self, src: int, dst: int, address=addr) -> dict:
        root = Path(f"/tmp/www{dst}-{len(self.procs)}")
        root.mkdir(exist_ok=True)
        payload = os.urandom(64 * 1024)
        (root / "blob").write_bytes(payload)
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns(dst), *self.python, "-m", "http.server", "8080",
             "--bind", address(dst), "--directory", str(root)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.procs.append(server)
        url = f"http://{address(dst)}:8080/blob"
        got = self.wait_for(
            f"HTTP GET {url}",
            lambda: self.sh("curl", "-sf", "--max-time", "10", "-o", "/tmp/got", url,
                            node=src, check=False).returncode == 0,
            timeout=60, every=1,
        )  # fmt: skip
        data = Path("/tmp/got").read_bytes()
        server.terminate()
        server.wait()
        if hashlib.sha256(data).digest() != hashlib.sha256(payload).digest():
            raise StepFailed(f"HTTP body differs: {len(data)} of {len(payload)} bytes")
        return {"bytes": len(data), "ok": got}

    def nl80211_signal(self) -> dict:
        """The nl80211 backend on radio 2 sees radio 1's signal change when radio 1's
        transmit signal (debugfs ``rx_rssi``, applied to the frames it sends) changes."""
        rssi = DEBUGFS / self.phy[1] / "hwsim" / "rx_rssi"
        # debugfs shows and takes the value as an unsigned 64-bit number
        old = int(rssi.read_text()) - (1 << 64 if int(rssi.read_text()) >= 1 << 63 else 0)
        new = old - 25
        watcher = subprocess.Popen(
            ["ip", "netns", "exec", ns(2), *self.python, "-m", "manetkit.field.guest",
             "watch", self.wlan[2]],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.procs.append(watcher)
        assert watcher.stdout is not None

        def next_signal(deadline: float) -> float | None:
            while time.monotonic() < deadline:
                line = watcher.stdout.readline()
                if not line:
                    raise StepFailed("the nl80211 watcher exited")
                ev = json.loads(line)
                if ev["event"] == "StationSeen" and ev["mac"] == self.mac[1]:
                    return ev["signal_dbm"]
            raise StepFailed("no StationSeen for radio 1 from the nl80211 backend")

        before = next_signal(time.monotonic() + 60)
        rssi.write_text(f"{new & 0xFFFFFFFFFFFFFFFF}\n")
        deadline = time.monotonic() + 20
        after = next_signal(deadline)
        while after is not None and before is not None and abs(after - (before + new - old)) > 2:
            after = next_signal(deadline)
        watcher.kill()
        self.facts["rx_rssi"] = {"old": old, "new": new}
        return {"before_dbm": before, "after_dbm": after, "rx_rssi_change_db": new - old}

    # -- the manetkit daemon ------------------------------------------------------------
    def mesh(self, node: int) -> str:
        return f"10.42.0.{node}"

    def socket(self, node: int, protocol: str) -> str:
        return f"/run/mkv-{protocol}-{node}.sock"

    def status(self, node: int, protocol: str) -> dict | None:
        from manetkit.daemon.statuscli import fetch
        from manetkit.errors import UserError

        try:
            return fetch(self.socket(node, protocol))
        except UserError:
            return None

    def daemons_up(self, protocol: str) -> dict:
        for node in range(1, NODES + 1):
            self.sh("ip", "addr", "flush", "dev", self.wlan[node], node=node)  # radio: no IP
            conf = Path(f"/tmp/daemon-{protocol}-{node}.yaml")
            conf.write_text(
                f"address: {self.mesh(node)}\nprefix: 10.42.0.0/16\nprotocol: {protocol}\n"
                f"radio_interface: {self.wlan[node]}\nlink_sensing:\n  backend: nl80211\n"
                f"event_socket: {self.socket(node, protocol)}\nlog_level: info\n"
            )
            log = (RESULTS / f"daemon-{protocol}-{node}.log").open("w")
            self.daemons.append(
                subprocess.Popen(
                    [
                        "ip",
                        "netns",
                        "exec",
                        ns(node),
                        *self.python,
                        "-m",
                        "manetkit.cli",
                        "daemon",
                        "--config",
                        str(conf),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )  # fmt: skip
            )

        def neighbours_with_signal() -> dict | None:
            sts = {n: self.status(n, protocol) for n in range(1, NODES + 1)}
            self.facts[f"{protocol}-last-status"] = sts  # what the report shows on a timeout
            for proc in self.daemons:
                if proc.poll() is not None:
                    raise StepFailed(f"a daemon exited with {proc.returncode} (see its log)")
            want = {1: 1, 2: 2, 3: 1}
            for n, st in sts.items():
                if st is None:
                    return None
                seen = [x for x in st["neighbours"] if x["up"] and x["signal_dbm"] is not None]
                if len(seen) < want[n]:
                    return None
            return sts

        sts = self.wait_for("daemons up with neighbours and nl80211 signal",
                            neighbours_with_signal, timeout=90, every=1)  # fmt: skip
        return {n: [(x["address"], x["signal_dbm"]) for x in st["neighbours"]]
                for n, st in sts.items()}  # fmt: skip

    def status_cli(self, protocol: str) -> dict:
        out = self.sh(*self.python, "-m", "manetkit.cli", "status", "--json", "--socket",
                      self.socket(2, protocol)).stdout  # fmt: skip
        st = json.loads(out)
        by_addr = {x["address"]: x for x in st["neighbours"]}
        for n in (1, 3):
            row = by_addr.get(self.mesh(n))
            if row is None or row["signal_dbm"] is None or row["mac"] != self.mac[n]:
                raise StepFailed(f"status of node 2 lacks {self.mesh(n)} with a signal: {st}")
        if st.get("link_sensing") != "nl80211":
            raise StepFailed(f"link sensing is {st.get('link_sensing')!r}, not nl80211")
        return {a: {"mac": r["mac"], "signal_dbm": r["signal_dbm"]} for a, r in by_addr.items()}

    def mesh_ping(self) -> str:
        done = self.wait_for(
            "ping 1 -> 3 over the mesh",
            lambda: (d := self.sh("ping", "-c", "3", "-i", "0.3", "-W", "3", self.mesh(3),
                                  node=1, check=False)).returncode == 0 and d,
            timeout=60, every=1,
        )  # fmt: skip
        return done.stdout.strip().splitlines()[-1]

    def daemon_signal(self, protocol: str) -> dict:
        """Node 2's daemon reports node 1's new signal after rx_rssi changes."""
        rssi = DEBUGFS / self.phy[1] / "hwsim" / "rx_rssi"
        raw = int(rssi.read_text())
        old = raw - (1 << 64 if raw >= 1 << 63 else 0)
        new = old + 15 if old < -60 else old - 15

        def signal_of_1() -> float | None:
            st = self.status(2, protocol) or {"neighbours": []}
            row = next((x for x in st["neighbours"] if x["address"] == self.mesh(1)), None)
            return row["signal_dbm"] if row else None

        before = self.wait_for("node 1's signal at node 2", signal_of_1, timeout=20)
        rssi.write_text(f"{new & 0xFFFFFFFFFFFFFFFF}\n")
        after = self.wait_for(
            "node 1's changed signal in node 2's status",
            lambda: (v := signal_of_1()) is not None and abs(v - (before + new - old)) <= 2 and v,
            timeout=30, every=0.5,
        )  # fmt: skip
        return {"before_dbm": before, "after_dbm": after, "rx_rssi_change_db": new - old}

    def daemons_down(self) -> str:
        for proc in self.daemons:
            proc.terminate()
        codes = []
        for proc in self.daemons:
            try:
                codes.append(proc.wait(timeout=20))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes.append("killed")
        self.daemons.clear()
        return f"exit codes {codes}"

    def run_protocol(self, protocol: str) -> None:
        self.step(f"{protocol}-daemons-up", self.daemons_up, protocol)
        try:
            self.step(f"{protocol}-status", self.status_cli, protocol)
            self.step(f"{protocol}-ping-1-3", self.mesh_ping)
            self.step(f"{protocol}-http-1-3", self.http, 1, 3, self.mesh)
            self.step(f"{protocol}-signal", self.daemon_signal, protocol)
        finally:
            self.step(f"{protocol}-daemons-down", self.daemons_down)

    # -- run ---------------------------------------------------------------------------
    def run(self) -> dict:
        t0 = time.monotonic()
        try:
            self.step("radios", self.radios)
            self.step("topology", self.topology)
            self.step("ibss-up", self.ibss_up)
            self.step("chain", self.chain_formed)
            if self.plan.get("record"):
                self.step("record-samples", self.record_samples)
            self.step("nl80211-signal", self.nl80211_signal)
            for protocol in self.plan["protocols"]:
                if protocol == "static":
                    self.step("static-routes", self.static_routes)
                    self.step("ping-1-3", self.ping, 1, 3)
                    self.step("http-1-3", self.http, 1, 3)
                else:
                    self.run_protocol(protocol)
        except StepFailed:
            pass
        finally:
            for p in self.procs + self.daemons:
                p.kill()
        return {
            "protocols": self.plan["protocols"],
            "seconds": round(time.monotonic() - t0, 2),
            "steps": self.steps,
            "facts": self.facts,
        }


def watch_main(interface: str) -> None:
    """Run ``Nl80211Backend`` on ``interface``; print each event as a JSON line."""
    from manetkit.daemon.linksense.nl80211 import Nl80211Backend

    def sink(now: float, ev) -> None:
        row = {"event": type(ev).__name__, "mac": ":".join(f"{b:02x}" for b in ev.mac)}
        row |= {"signal_dbm": getattr(ev, "signal_dbm", None), "t": round(now, 3)}
        print(json.dumps(row), flush=True)

    asyncio.run(Nl80211Backend(interface, sink, poll_interval=0.3).run())


def rawdump_main(interface: str) -> None:
    """The raw NEW_STATION replies for ``interface``, as hex, for tests/data/nl80211."""
    import socket

    from manetkit.daemon.linksense.nl80211 import pyroute2_dumper

    dump, close = pyroute2_dumper()

    async def once() -> list:
        try:
            return await dump(socket.if_nametoindex(interface))
        finally:
            close()  # inside the loop: pyroute2 closes its asyncio transport

    msgs = asyncio.run(once())
    out = []
    for m in msgs:
        length = m["header"]["length"]
        out.append(bytes(m.data[m.offset : m.offset + length]).hex())
    print(json.dumps({"_source": f"kernel {os.uname().release}, mac80211_hwsim, {interface}",
                      "messages": out}))  # fmt: skip


def main(argv: list[str]) -> int:
    if argv[:1] == ["watch"]:
        watch_main(argv[1])
        return 0
    if argv[:1] == ["rawdump"]:
        rawdump_main(argv[1])
        return 0
    plan = json.loads(Path(argv[0]).read_text())
    report = Guest(plan).run()
    (RESULTS / "result.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
