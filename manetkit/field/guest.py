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
import contextlib
import hashlib
import json
import math
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from manetkit.procs import wait_for

if TYPE_CHECKING:  # imported where used: a start under TCG costs seconds per module
    from manetkit.daemonstatus import AodvRoute, DaemonStatus, DsrPath

RESULTS = Path("/tmp/results")
DEBUGFS = Path("/sys/kernel/debug/ieee80211")
NODES = 3
GROUPS = {1: 1, 2: 3, 3: 2}  # node -> hwsim group bitmask: a chain 1-2-3
SSID, FREQ, BSSID = "manetkit-rig", "2412", "02:ca:fe:00:00:01"
# protocol -> (second octet of its 10.X.0.0/16 mesh prefix, ethertype, TUN name).
# 0x88B5 and 0x88B6 are IEEE 802's two local experimental ethertypes.
# What a running daemon imports (the launcher loads them before forking).
DAEMON_MODULES = ["manetkit.daemon.cli", "manetkit.daemon.shell", "manetkit.daemon.engines.aodv",
                  "manetkit.daemon.engines.dsr", "manetkit.daemon.linksense.nl80211",
                  "pyroute2.iwutil", "uvloop"]  # fmt: skip
# Atra RFP in the rig: the power at which a link is taken to end at RFP_RANGE_M, with a
# log-distance exponent of 3; rfp-walk moves radio 1 away from radio 2 at RFP_WALK_MPS
# from RFP_WALK_FROM_M. hwsim reports rx_rssi + the sender's tx power (20 dBm) and takes
# rx_rssi down to -100 only, so the edge sits at -75 dBm (cards differ: -75..-85).
RFP_EDGE_DBM = -75.0
RFP_RANGE_M = 120.0
RFP_EXPONENT = 3.0
RFP_WALK_MPS = 8.0
RFP_WALK_FROM_M = 20.0
MESH_NET = {"aodv": (42, 0x88B5, "mk-aodv"), "dsr": (43, 0x88B6, "mk-dsr")}


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
        self.launcher: subprocess.Popen | None = None  # daemons_main, see daemons_start
        self.daemon_pids: dict[str, int] = {}  # "aodv-1" -> pid
        self.status_procs: dict[str, subprocess.Popen] = {}
        self.www = Path("/tmp/www")
        self.payload = b""

    # -- helpers -----------------------------------------------------------------------
    def rx_rssi(self) -> int:
        """Radio 1's debugfs ``rx_rssi`` (hwsim puts it, plus the sender's tx power, in
        the rx status of every frame radio 1 sends); debugfs shows it as a u64."""
        raw = int((DEBUGFS / self.phy[1] / "hwsim" / "rx_rssi").read_text())
        return raw - (1 << 64 if raw >= 1 << 63 else 0)

    def set_rx_rssi(self, dbm: int) -> None:
        (DEBUGFS / self.phy[1] / "hwsim" / "rx_rssi").write_text(f"{dbm & 0xFFFFFFFFFFFFFFFF}\n")

    def signal_of_1_at_2(self, protocol: str) -> float | None:
        """Node 1's signal in node 2's ``protocol`` daemon's neighbour table."""
        st = self.status(2, protocol)
        row = st.neighbour(self.mesh(1, protocol)) if st else None
        return row.signal_dbm if row else None

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
            if not isinstance(exc, StepFailed | TimeoutError):  # wait_for's names what
                detail += "\n" + traceback.format_exc()
            ok = False
        self.steps.append(
            {"name": name, "ok": ok, "seconds": round(time.monotonic() - t0, 2), "detail": detail}
        )
        print(f"[guest] step {name}: {'ok' if ok else 'FAILED'} {detail}", flush=True)
        if not ok:
            raise StepFailed(name)
        return detail

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
        ):
            t = time.monotonic()
            self.sh(*argv)
            self.facts[f"spawn_{name}_s"] = round(time.monotonic() - t, 3)
        if self.plan.get("profile"):
            self.profile_daemon_start()
        self.facts["debugfs"] = sorted(p.name for p in (DEBUGFS / self.phy[1] / "hwsim").iterdir())
        return {"wlan": self.wlan, "phy": self.phy, "mac": self.mac}

    def profile_daemon_start(self) -> None:
        """``--profile``: where a daemon's start-up time goes under TCG (import times and
        a cProfile of ``manetkit daemon --check``), saved next to result.json."""
        check = ["-m", "manetkit.daemon", "--check", "--config", str(self.daemon_config(1, "aodv"))]
        t = time.monotonic()
        done = self.sh(*self.python, "-X", "importtime", *check)
        self.facts["spawn_daemon-check_s"] = round(time.monotonic() - t, 3)
        (RESULTS / "importtime-daemon.txt").write_text(done.stderr)
        self.sh(*self.python, "-m", "cProfile", "-o", str(RESULTS / "daemon-check.prof"), *check)

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
        from manetkit.macaddr import format_mac

        text = self.sh("iw", "dev", self.wlan[node], "station", "dump", node=node).stdout
        return {format_mac(s.info.mac) for s in parse_station_dump(text)}

    def chain_formed(self) -> dict:
        want = {1: {self.mac[2]}, 2: {self.mac[1], self.mac[3]}, 3: {self.mac[2]}}
        wait_for(lambda: all(self.peers(n) >= want[n] for n in want), 30,
                 "stations 1-2 and 2-3 (iw station dump)", interval=0.25)  # fmt: skip
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
        """GET 64 KiB from node ``dst``'s server (``http_server``), compare the bytes."""
        url = f"http://{address(dst)}:8080/blob"
        got = Path(f"/tmp/got-{src}-{dst}")
        wait_for(
            lambda: self.sh("curl", "-sf", "--max-time", "10", "-o", str(got), url,
                            node=src, check=False).returncode == 0,
            60, f"HTTP GET {url}", interval=1,
        )  # fmt: skip
        data = got.read_bytes()
        if hashlib.sha256(data).digest() != hashlib.sha256(self.payload).digest():
            raise StepFailed(f"HTTP body differs: {len(data)} of {len(self.payload)} bytes")
        return {"bytes": len(data), "url": url}

    def nl80211_signal(self) -> dict:
        """The nl80211 backend on radio 2 sees radio 1's signal change when radio 1's
        transmit signal (debugfs ``rx_rssi``, applied to the frames it sends) changes."""
        old = self.rx_rssi()
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
        self.set_rx_rssi(new)
        deadline = time.monotonic() + 20
        after = next_signal(deadline)
        while after is not None and before is not None and abs(after - (before + new - old)) > 2:
            after = next_signal(deadline)
        watcher.kill()
        self.facts["rx_rssi"] = {"old": old, "new": new}
        return {"before_dbm": before, "after_dbm": after, "rx_rssi_change_db": new - old}

    # -- the manetkit daemon ------------------------------------------------------------
    # Every protocol's daemons run at once, each pair on the same radio but apart: own
    # ethertype (the packet socket only gets its own frames), TUN and mesh prefix. Under
    # TCG a daemon start costs seconds of CPU, so they start together, right after
    # ibss-up, and import while the cell forms.
    def mesh(self, node: int, protocol: str) -> str:
        return f"10.{MESH_NET[protocol][0]}.0.{node}"

    def socket(self, node: int, protocol: str) -> str:
        return f"/run/mkv-{protocol}-{node}.sock"

    def status(self, node: int, protocol: str) -> DaemonStatus | None:
        from manetkit.daemonstatus import StatusError, fetch_status

        try:
            return fetch_status(self.socket(node, protocol))
        except StatusError:
            return None

    def daemon_config(self, node: int, protocol: str) -> Path:
        net, ethertype, tun = MESH_NET[protocol]
        conf = Path(f"/tmp/daemon-{protocol}-{node}.yaml")
        conf.write_text(
            f"address: {self.mesh(node, protocol)}\nprefix: 10.{net}.0.0/16\n"
            f"protocol: {protocol}\nradio_interface: {self.wlan[node]}\n"
            f"ethertype: {ethertype:#06x}\ntun_name: {tun}\n"
            # 0.5 s polls: six daemons share two emulated CPUs
            "link_sensing:\n  backend: nl80211\n  poll_s: 0.5\n"
            f"event_socket: {self.socket(node, protocol)}\nlog_level: info\n"
            # Atra RFP with the log-distance model for real Wi-Fi (docs/atra.md); the
            # rfp-walk step expects a prediction. Under TCG the 0.5 s polls
            # come late: a longer fit window and two confirming samples.
            f"atra:\n  rfp: true\n  rx_threshold_dbm: {RFP_EDGE_DBM}\n"
            f"  range_m: {RFP_RANGE_M}\n  path_loss_exponent: {RFP_EXPONENT}\n"
            "  window_s: 8\n  confirm: 2\n"
        )
        return conf

    def daemons_start(self, protocols: list[str]) -> dict:
        """Start every (protocol, node) daemon through one launcher process
        (``daemons_main``): it imports the daemon once and forks per daemon."""
        specs = []
        for protocol in protocols:
            for node in range(1, NODES + 1):
                conf = self.daemon_config(node, protocol)
                log = RESULTS / f"daemon-{protocol}-{node}.log"
                specs.append({"name": f"{protocol}-{node}", "netns": ns(node),
                              "argv": ["--config", str(conf)], "log": str(log)})  # fmt: skip
        self.launcher = subprocess.Popen(
            [*self.python, "-m", "manetkit.field.guest", "daemons", json.dumps(specs)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.procs.append(self.launcher)
        return {"daemons": [s["name"] for s in specs]}

    def launcher_line(self, timeout: float) -> dict:
        """The launcher's next JSON line (``pids`` once forked, ``exit`` at the end)."""
        assert self.launcher is not None and self.launcher.stdout is not None
        if not select.select([self.launcher.stdout], [], [], timeout)[0]:
            raise StepFailed(f"the daemon launcher said nothing for {timeout:.0f} s")
        line = self.launcher.stdout.readline()
        if not line:
            raise StepFailed(f"the daemon launcher exited ({self.launcher.wait()})")
        return json.loads(line)

    def daemons_up(self, protocols: list[str]) -> dict:
        want = {1: 1, 2: 2, 3: 1}

        self.daemon_pids = self.launcher_line(timeout=120)["pids"]

        def neighbours_with_signal() -> dict | None:
            for name, pid in self.daemon_pids.items():
                if not Path(f"/proc/{pid}").exists():  # the launcher reaps at once
                    raise StepFailed(f"daemon {name} exited (see daemon-{name}.log)")
            sts = {(p, n): self.status(n, p) for p in protocols for n in range(1, NODES + 1)}
            self.facts["last-status"] = {
                f"{p}-{n}": st.to_wire() if st else None for (p, n), st in sts.items()
            }
            for (_, n), st in sts.items():
                if st is None:
                    return None
                seen = [x for x in st.neighbours if x.up and x.signal_dbm is not None]
                if len(seen) < want[n]:
                    return None
            return sts

        sts = wait_for(neighbours_with_signal, 120,
                       "daemons up with neighbours and nl80211 signal", interval=0.5)  # fmt: skip
        self.facts.pop("last-status", None)
        return {f"{p}-{n}": [(x.address, x.signal_dbm) for x in st.neighbours]
                for (p, n), st in sts.items()}  # fmt: skip

    def status_cli_start(self, protocols: list[str]) -> None:
        """``manetkit status --json`` of node 2 for every protocol, started together (a
        Python start costs seconds here); ``status_cli`` reads each."""
        for p in protocols:
            self.status_procs[p] = subprocess.Popen(
                [*self.python, "-m", "manetkit.cli", "status", "--json", "--socket",
                 self.socket(2, p)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            self.procs.append(self.status_procs[p])

    def status_cli(self, protocol: str) -> dict:
        """Node 2's ``manetkit status --json``: both neighbours, their MACs and the
        signal nl80211 reported."""
        proc = self.status_procs[protocol]
        out, err = proc.communicate(timeout=60)
        if proc.returncode != 0:
            raise StepFailed(f"manetkit status: exit {proc.returncode}: {err.strip()}")
        from manetkit.daemonstatus import DaemonStatus

        st = DaemonStatus.from_wire(json.loads(out))
        if st.link_sensing != "nl80211" or st.protocol != protocol:
            raise StepFailed(f"status says {st.protocol}/{st.link_sensing}")
        for n in (1, 3):
            row = st.neighbour(self.mesh(n, protocol))
            if row is None or row.signal_dbm is None or row.mac != self.mac[n]:
                raise StepFailed(f"status of node 2 lacks node {n} with a signal: {st}")
        return {r.address: {"mac": r.mac, "signal_dbm": r.signal_dbm, "up": r.up}
                for r in st.neighbours}  # fmt: skip

    def mesh_ping(self, protocol: str) -> str:
        done = wait_for(
            lambda: (d := self.sh("ping", "-c", "3", "-i", "0.3", "-W", "3",
                                  self.mesh(3, protocol), node=1, check=False)).returncode == 0
            and d,
            60, f"ping 1 -> 3 over {protocol}", interval=1,
        )  # fmt: skip
        return done.stdout.strip().splitlines()[-1]

    def route_of(self, protocol: str) -> dict:
        """What node 1's engine holds for node 3 (AODV route / DSR path): 2 hops via 2."""
        from manetkit.daemonstatus import AodvStatus, SourceRouteStatus

        st = self.status(1, protocol)
        engine = st.engine if st else None
        dst = self.mesh(3, protocol)
        rows: list[AodvRoute | DsrPath] = []
        if isinstance(engine, AodvStatus):
            rows = [r for r in engine.routes if r.dst == dst]
        elif isinstance(engine, SourceRouteStatus):
            rows = [p for p in engine.paths if p.dst == dst]
        if not rows or rows[0].hops != 2 or rows[0].next_hop != self.mesh(2, protocol):
            raise StepFailed(f"node 1 has no 2-hop route to {dst} via node 2: {engine}")
        return rows[0].model_dump(mode="json")

    def daemon_signal(self, protocols: list[str]) -> dict:
        """Node 2's daemons report node 1's new signal after radio 1's ``rx_rssi``
        (the signal its frames arrive with) changes."""
        old = self.rx_rssi()
        new = old + 15 if old < -60 else old - 15
        signal_of_1 = self.signal_of_1_at_2

        before = {p: wait_for(lambda p=p: signal_of_1(p), 20, f"node 1's signal at node 2 ({p})",
                              interval=0.25) for p in protocols}  # fmt: skip
        self.set_rx_rssi(new)
        out: dict[str, Any] = {"rx_rssi_change_db": new - old}
        for p in protocols:
            after = wait_for(
                lambda p=p: (v := signal_of_1(p)) is not None
                and abs(v - (before[p] + new - old)) <= 2 and v,
                30, f"node 1's changed signal in node 2's status ({p})", interval=0.5,
            )  # fmt: skip
            out[p] = {"before_dbm": before[p], "after_dbm": after}
        return out

    def rfp_walk(self, protocols: list[str]) -> dict:
        """Atra's route failure prediction (RFP) over nl80211: radio 1 walks away from radio
        2 at a steady speed, its signal (debugfs ``rx_rssi``) following the log-distance
        model the daemons are configured with; node 2's daemons predict the link's
        failure before radio 1 reaches the range edge (their ``atra.predictions``
        counter). hwsim still delivers the frames, so the prediction ends as a false
        alarm; the signal is put back afterwards."""
        start = self.rx_rssi()

        def predictions(p: str) -> int:
            st = self.status(2, p)
            atra = st.atra if st else None
            return atra.predictions if atra else 0

        def power_at(d: float) -> float:
            return RFP_EDGE_DBM - 10 * RFP_EXPONENT * math.log10(d / RFP_RANGE_M)

        def seen_at_2() -> float | None:
            return self.signal_of_1_at_2(protocols[0])

        # node 2 hears rx_rssi + radio 1's tx power: write power - that offset
        offset = wait_for(seen_at_2, 20, "node 1's signal at node 2", interval=0.25) - start

        def rx_rssi_for(d: float) -> int:
            return max(-100, min(-1, round(power_at(d) - offset)))  # what debugfs accepts

        base = {p: predictions(p) for p in protocols}
        got: dict[str, float] = {}
        samples: list[tuple[int, int, float | None]] = []  # (m, dBm meant, dBm node 2 saw)
        t0 = time.monotonic()
        d = RFP_WALK_FROM_M
        try:
            while d < 1.5 * RFP_RANGE_M and len(got) < len(protocols):
                d = RFP_WALK_FROM_M + RFP_WALK_MPS * (time.monotonic() - t0)
                self.set_rx_rssi(rx_rssi_for(d))
                for p in protocols:
                    if p not in got and predictions(p) > base[p]:
                        got[p] = round(d, 1)
                samples.append((round(d), round(power_at(d)), seen_at_2()))
                time.sleep(0.25)  # the walk's own pace (motion), not a protocol timer
        finally:
            self.set_rx_rssi(start)
        missing = [p for p in protocols if p not in got]
        if missing:
            seen = {p: st.atra if (st := self.status(2, p)) else None for p in missing}
            raise StepFailed(
                f"no predicted failure at node 2 for {missing} out to {d:.0f} m; "
                f"their atra status: {seen}; signals heard: {samples}"
            )
        return {"speed_mps": RFP_WALK_MPS, "range_m": RFP_RANGE_M, "predicted_at_m": got}

    def daemons_down(self) -> dict:
        """SIGTERM to the launcher, which passes it on and reports each exit code."""
        assert self.launcher is not None
        self.launcher.terminate()
        codes = self.launcher_line(timeout=30)["exit"]
        self.launcher.wait(timeout=10)
        if any(c != 0 for c in codes.values()):
            raise StepFailed(f"daemons did not stop cleanly: {codes}")
        return codes

    def http_server(self) -> None:
        """One HTTP server on node 3 (all addresses) for every protocol's transfer."""
        self.www.mkdir(exist_ok=True)
        self.payload = os.urandom(64 * 1024)
        (self.www / "blob").write_bytes(self.payload)
        self.procs.append(subprocess.Popen(
            ["ip", "netns", "exec", ns(3), *self.python, "-m", "http.server", "8080",
             "--directory", str(self.www)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))  # fmt: skip

    # -- run ---------------------------------------------------------------------------
    def run(self) -> dict:
        t0 = time.monotonic()
        protocols = [p for p in self.plan["protocols"] if p != "static"]
        try:
            self.step("radios", self.radios)
            self.step("topology", self.topology)
            self.step("ibss-up", self.ibss_up)
            if protocols:
                self.step("daemons-start", self.daemons_start, protocols)
            self.http_server()
            self.step("chain", self.chain_formed)
            if self.plan.get("record"):
                self.step("record-samples", self.record_samples)
            if "static" in self.plan["protocols"]:
                self.step("static-routes", self.static_routes)
                self.step("ping-1-3", self.ping, 1, 3)
                self.step("http-1-3", self.http, 1, 3)
            if not protocols:
                self.step("nl80211-signal", self.nl80211_signal)
                return self.report(t0)
            self.step("daemons-up", self.daemons_up, protocols)
            self.status_cli_start(protocols)  # they import while the traffic runs
            for p in protocols:
                self.step(f"{p}-ping-1-3", self.mesh_ping, p)
                self.step(f"{p}-http-1-3", self.http, 1, 3, lambda n, p=p: self.mesh(n, p))
                self.step(f"{p}-route", self.route_of, p)
            for p in protocols:
                self.step(f"{p}-status", self.status_cli, p)
            self.step("daemon-signal", self.daemon_signal, protocols)
            self.step("rfp-walk", self.rfp_walk, protocols)
            self.step("daemons-down", self.daemons_down)
        except StepFailed:
            pass
        finally:
            for pid in self.daemon_pids.values():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            for proc in self.procs:
                proc.kill()
        return self.report(t0)

    def report(self, t0: float) -> dict:
        return {
            "protocols": self.plan["protocols"],
            "seconds": round(time.monotonic() - t0, 2),
            "steps": self.steps,
            "facts": self.facts,
        }


def watch_main(interface: str) -> None:
    """Run ``Nl80211Backend`` on ``interface``; print each event as a JSON line."""
    from manetkit.daemon.linksense.nl80211 import Nl80211Backend
    from manetkit.macaddr import format_mac

    def sink(now: float, ev) -> None:
        row = {"event": type(ev).__name__, "mac": format_mac(ev.mac)}
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


def daemons_main(specs: list[dict[str, Any]]) -> int:
    """``guest daemons SPECS_JSON``: run several ``manetkit daemon`` in their namespaces.

    Under TCG importing the daemon (pydantic models, pyroute2, uvloop, the engines) costs
    about 15 s of emulated CPU per process; six daemons importing at once on two vCPUs
    took a minute. So this process imports once and forks per daemon; each child enters
    its node's network namespace (``setns``, as ``ip netns exec`` does) and runs
    ``manetkit.cli.main(["daemon", *argv])``, the ``manetkit`` console script's entry
    point, with its output in its log file. Prints ``{"pids": ...}``; on
    SIGTERM passes it to every daemon and prints ``{"exit": {name: code}}``.
    """
    import ctypes
    import importlib

    from manetkit.cli import main as manetkit_main

    for name in DAEMON_MODULES:  # what every child needs, imported once
        importlib.import_module(name)

    libc = ctypes.CDLL(None, use_errno=True)
    clone_newnet = 0x40000000
    children: dict[int, str] = {}

    def forward(signum: int, frame: Any) -> None:
        for pid in children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)  # before forking: no orphan on an early TERM
    sys.stdout.flush()
    for spec in specs:
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                fd = os.open(f"/run/netns/{spec['netns']}", os.O_RDONLY)
                if libc.setns(fd, clone_newnet) != 0:
                    raise OSError(ctypes.get_errno(), f"setns {spec['netns']}")
                os.close(fd)
                log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(log, 1)
                os.dup2(log, 2)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                code = manetkit_main(["daemon", *spec["argv"]])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 2
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        children[pid] = spec["name"]
    print(json.dumps({"pids": {name: pid for pid, name in children.items()}}), flush=True)
    codes: dict[str, int] = {}
    while len(codes) < len(children):
        pid, status = os.wait()
        codes[children[pid]] = os.waitstatus_to_exitcode(status)
    print(json.dumps({"exit": codes}), flush=True)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["watch"]:
        watch_main(argv[1])
        return 0
    if argv[:1] == ["daemons"]:
        return daemons_main(json.loads(argv[1]))
    if argv[:1] == ["rawdump"]:
        rawdump_main(argv[1])
        return 0
    plan = json.loads(Path(argv[0]).read_text())
    report = Guest(plan).run()
    (RESULTS / "result.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
