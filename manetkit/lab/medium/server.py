"""``manetkit lab medium``: the asyncio shell around the sans-I/O :class:`~.mac.Medium`.

One process per lab. With ``--radios shared`` (what ``lab up`` starts for a namespace
lab) it also *is* every node's radio (``manetkit.lab.sharedradios``): it makes each
node's TAP radio0 in the node's namespace, reads the frames a node sends straight from
it and writes deliveries straight into the receivers' TAPs. With ``--radios process``
(docker labs, ``lab up --radios process``) radio processes relay instead: it accepts
their ATTACH from node ids 1..N on its datagram socket (AF_UNIX, and optionally UDP),
feeds every TX to the medium at the loop's current time, and sends out DELIVER and
TXSTATUS datagrams as the medium's virtual schedule reaches them (the socket is bound
with shared radios too; an ATTACH for a node whose radio is the medium's is refused).
A JSON-lines control socket moves nodes, forces links and reports state;
the ground-truth log records the connectivity graph whenever it changes.

Hot path: one readiness callback drains the socket (or a node's TAP) until EAGAIN (no
per-datagram callbacks); a TX is only type-checked and sliced; sends to a radio that
cannot take more (EAGAIN/ENOBUFS) are dropped and counted, never waited for.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import gc
import logging
import math
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

from manetkit import paths, runner
from manetkit.errors import UserError
from manetkit.jsonlines import Access, LineServer
from manetkit.lab.build import medium_from_scenario
from manetkit.lab.medium import protocol as proto
from manetkit.lab.medium.groundtruth import GroundTruthLog, snapshot_edges
from manetkit.lab.medium.lag import LagRecorder
from manetkit.lab.medium.mac import Delivery, Medium
from manetkit.lab.medium.realistic import RealisticMedium
from manetkit.lab.radioport import RadioPort
from manetkit.lab.scenario import Scenario, lab_name, load_scenario, parse_set_args
from manetkit.lab.sharedradios import SharedRadios

log = logging.getLogger("manetkit.medium")

SOCKET_BUFFER = 4 * 1024 * 1024
# Control commands that change the world: root or --control-group only (SO_PEERCRED).
PRIVILEGED = frozenset({"move", "link"})
GROUND_TRUTH_PERIOD_S = 0.1
# uvloop rounds timers to whole milliseconds (a 0.3 ms timer fires at once, so the loop
# would spin until the event is due). The schedule is virtual, so waking at most once a
# millisecond only delays hand-outs, never airtime; events already due run at once.
MIN_TIMER_S = 0.001
# An AF_UNIX datagram socket queues at most net.unix.max_dgram_qlen datagrams (read when
# the socket is created); the kernel default is 10, which starves the medium when ten
# radios send at once. systemd sets 512; the medium raises it to that, never lowers it.
MIN_DGRAM_QLEN = 512
_QLEN_SYSCTL = Path("/proc/sys/net/unix/max_dgram_qlen")
MAX_DATAGRAM = 65_600
# SCHED_FIFO priority: above every normal process (daemons, peers, traffic, which the
# medium wakes with every delivery and which would otherwise preempt it), below the
# kernel's own real-time threads (50 and up). Bounded by the kernel's real-time
# throttling (sched_rt_runtime_us: 95 % of a CPU by default).
DEFAULT_RT_PRIORITY = 10
_DROPPABLE = (errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS)
_GONE = (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTCONN)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", help="scenario YAML file (see docs/scenario.md)")
    parser.add_argument("--lab", help="lab name (default: the scenario's name or file name)")
    parser.add_argument(
        "--socket", help="radios' AF_UNIX datagram socket (default: in the lab's run dir)"
    )
    parser.add_argument("--udp", metavar="HOST:PORT", help="also accept radios over UDP")
    parser.add_argument("--control", help="control socket path (default: in the lab's run dir)")
    parser.add_argument(
        "--control-group",
        help="group allowed to move nodes and force links besides root (default: root only)",
    )
    parser.add_argument(
        "--ground-truth", help="ground-truth JSON-lines log (default: the lab's logs dir)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario field, e.g. --set radio.rate_mbps=11 (repeatable)",
    )
    parser.add_argument(
        "--radios",
        choices=("process", "shared"),
        default="process",
        help="shared: make every node's TAP in its namespace and serve it here (namespace "
        "labs; lab up's default); process: radio processes attach over the datagram socket",
    )
    parser.add_argument(
        "--realtime",
        type=int,
        default=DEFAULT_RT_PRIORITY,
        metavar="PRIORITY",
        help=f"run under SCHED_FIFO at this priority (1-99; default {DEFAULT_RT_PRIORITY}), so "
        "the node software this process wakes cannot delay the air's schedule; 0: normal "
        "scheduling. Refused (not root, no real-time budget): a warning, normal scheduling",
    )
    # Bench-only (``bench medium``'s capacity run): multiply every 802.11 duration by this
    # factor, so the relay's own cost, not the airtime model, limits the frame rate.
    parser.add_argument("--airtime-scale", type=float, default=1.0, help=argparse.SUPPRESS)


def parse_hostport(text: str) -> tuple[int, tuple]:
    """``--udp HOST:PORT`` to (family, sockaddr); an empty HOST binds every address."""
    try:
        return proto.udp_address(text, passive=True)
    except ValueError as exc:
        raise UserError(f"--udp {exc}") from None


def node_index(name: Any, n: int) -> int:
    """``"n3"`` (or 3) -> 3; ValueError naming the problem otherwise."""
    s = str(name)
    num = s[1:] if s.startswith("n") else s
    if not num.isdigit() or not 1 <= int(num) <= n:
        raise ValueError(f"unknown node {name!r} (nodes are n1..n{n})")
    return int(num)


def ensure_dgram_qlen(minimum: int = MIN_DGRAM_QLEN) -> int:
    """Raise net.unix.max_dgram_qlen (of this network namespace) to ``minimum``."""
    try:
        current = int(_QLEN_SYSCTL.read_text())
        if current < minimum:
            _QLEN_SYSCTL.write_text(str(minimum))
            log.info("raised net.unix.max_dgram_qlen from %d to %d", current, minimum)
            return minimum
        return current
    except (OSError, ValueError) as exc:
        log.warning("cannot raise net.unix.max_dgram_qlen (%s): radios may see EAGAIN", exc)
        return -1


class MediumServer:
    def __init__(
        self,
        scenario: Scenario,
        lab: str,
        socket_path: Path,
        control_path: Path,
        ground_truth: Path | None,
        udp: tuple[int, tuple] | None = None,
        airtime_scale: float = 1.0,
        control_group: str | None = None,
        radios: SharedRadios | None = None,
    ):
        self.scenario = scenario
        self.lab = lab
        self.n = scenario.nodes
        self.socket_path = socket_path
        self.control_path = control_path
        self.control_group = control_group
        self.ground_truth_path = ground_truth
        self.udp = udp
        self.medium: Medium | RealisticMedium = medium_from_scenario(
            scenario, airtime_scale=airtime_scale
        )
        for i in range(1, self.n + 1):
            self.medium.set_attached(i, False)  # until its radio says ATTACH
        self.radios = radios
        self.scheduling = "normal"  # what set_realtime() obtained (shown in stats)
        # index = node id: the port of a node whose radio is this process, else None
        self.local: list[RadioPort | None] = (
            list(radios.ports) if radios is not None else [None] * (self.n + 1)
        )
        self.addr_node: dict[Any, int] = {}
        self.node_addr: dict[int, tuple[socket.socket, Any]] = {}
        self.counters = {
            "datagrams_in": 0,
            "malformed": 0,
            "unknown_sender": 0,
            "refused": 0,
            "sent": 0,
            "send_drops": 0,
            "send_errors": 0,
            "undeliverable": 0,
            "tap_frames_in": 0,
        }
        self.lag = LagRecorder()
        self._socks: list[socket.socket] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._gt: GroundTruthLog | None = None
        self._gt_file = None
        self.t0 = 0.0
        self.loop: asyncio.AbstractEventLoop | None = None

    # --- time -----------------------------------------------------------------------

    def now(self) -> float:
        # time.monotonic(), not loop.time(): uvloop's clock has 1 ms resolution and is
        # cached per loop iteration, coarser than a 54 Mbps frame (~0.25 ms).
        return time.monotonic() - self.t0

    # --- sockets --------------------------------------------------------------------

    def _bind_unix(self) -> socket.socket:
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        ensure_dgram_qlen()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(str(self.socket_path))
        return s

    def _tune(self, s: socket.socket) -> None:
        s.setblocking(False)
        for opt, force in ((socket.SO_SNDBUF, 32), (socket.SO_RCVBUF, 33)):  # *BUFFORCE
            try:
                s.setsockopt(socket.SOL_SOCKET, force, SOCKET_BUFFER)
            except OSError:
                s.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)

    def _on_readable(self, sock: socket.socket) -> None:
        now = self.now()
        medium = self.medium
        addr_node = self.addr_node
        c = self.counters
        n = 0
        while True:
            try:
                data, addr = sock.recvfrom(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                log.warning("receive error: %s", exc)
                break
            n += 1
            if data and data[0] == proto.TX:
                node = addr_node.get(addr)
                if node is None:
                    c["unknown_sender"] += 1
                elif len(data) < 1 + proto.MIN_FRAME:
                    c["malformed"] += 1
                else:
                    medium.transmit(now, node, data[1:])
            else:
                self._on_other(sock, data, addr)
        c["datagrams_in"] += n
        self._pump(now)

    def _on_other(self, sock: socket.socket, data: bytes, addr: Any) -> None:
        try:
            msg = proto.parse(data)
        except proto.ProtocolError:
            self.counters["malformed"] += 1
            return
        if isinstance(msg, proto.Attach):
            if not addr:
                self.counters["malformed"] += 1  # unbound sender: no address to reply to
                return
            if not 1 <= msg.node_id <= self.n:
                self.counters["refused"] += 1
                self._send(
                    sock,
                    addr,
                    proto.refused(f"node id {msg.node_id} is not in this lab (n1..n{self.n})"),
                )
                return
            if self.local[msg.node_id] is not None:
                self.counters["refused"] += 1
                self._send(sock, addr, proto.refused(f"n{msg.node_id}'s radio is the medium's own"))
                return
            old = self.node_addr.get(msg.node_id)
            if old is not None:
                self.addr_node.pop(old[1], None)
            self.addr_node[addr] = msg.node_id
            self.node_addr[msg.node_id] = (sock, addr)
            self.medium.set_attached(msg.node_id, True)
            self.medium.set_overhear(msg.node_id, False)  # until the radio asks again
            self._send(sock, addr, proto.attached(msg.node_id))
            log.info("n%d attached from %s", msg.node_id, addr)
        elif isinstance(msg, proto.Overhear):
            node = self.addr_node.get(addr)
            if node is None:
                self.counters["unknown_sender"] += 1
            else:
                self.medium.set_overhear(node, msg.on)
                log.info("n%d overhearing %s", node, "on" if msg.on else "off")
        elif isinstance(msg, proto.Detach):
            node = self.addr_node.pop(addr, None)
            if node is not None:
                self.node_addr.pop(node, None)
                self.medium.set_attached(node, False)
        else:
            self.counters["malformed"] += 1  # medium->radio message sent to the medium

    def _send(self, sock: socket.socket, addr: Any, data: bytes) -> bool:
        try:
            sock.sendto(data, addr)
            self.counters["sent"] += 1
            return True
        except OSError as exc:
            if exc.errno in _DROPPABLE:
                self.counters["send_drops"] += 1
            else:
                self.counters["send_errors"] += 1
                if exc.errno in _GONE:
                    node = self.addr_node.pop(addr, None)
                    if node is not None:
                        self.node_addr.pop(node, None)
                        self.medium.set_attached(node, False)
                        log.info("n%d's radio is gone (%s); detached", node, exc.strerror)
            return False

    def _pump(self, now: float) -> None:
        """Hand out what the medium produced, then re-arm the one timer."""
        medium = self.medium
        medium.handle_timer(now)
        node_addr = self.node_addr
        next_event = medium.next_event
        record = self.lag.record
        local = self.local
        mono = now + self.t0  # the ports' station tables run on time.monotonic()
        while (ev := next_event()) is not None:
            record(now, ev.at)
            port = local[ev.node]
            if port is not None:
                if type(ev) is Delivery:
                    port.deliver(ev.rssi_dbm, ev.frame, mono)
                else:
                    port.tx_status(ev.dst_mac, ev.retries, ev.ok, ev.frame, mono)
                continue
            to = node_addr.get(ev.node)
            if type(ev) is Delivery:
                if to is None:
                    self.counters["undeliverable"] += 1
                else:
                    self._send(to[0], to[1], proto.deliver(ev.rssi_dbm, ev.frame))
            elif to is not None:
                self._send(to[0], to[1], proto.txstatus(ev.dst_mac, ev.retries, ev.ok, ev.frame))
        when = medium.get_timer()
        if when is None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer, self._timer_at = None, math.inf
            return
        if when != self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = when
            delay = self.t0 + when - time.monotonic()
            delay = 0.0 if delay <= 0 else max(delay, MIN_TIMER_S)
            self._timer = self.loop.call_later(delay, self._on_timer)

    def on_local_frames(self, node: int, frames: list[bytes]) -> None:
        """Frames node ``node`` sent on its TAP (shared radios): onto the air."""
        now = self.now()
        transmit = self.medium.transmit
        ok = 0
        for frame in frames:
            if len(frame) < proto.MIN_FRAME:
                self.counters["malformed"] += 1
                continue
            transmit(now, node, frame)
            ok += 1
        self.counters["tap_frames_in"] += ok
        self._pump(now)

    def _on_timer(self) -> None:
        self._timer, self._timer_at = None, math.inf
        self._pump(self.now())

    # --- ground truth ---------------------------------------------------------------

    def _observe_graph(self, force: bool = False) -> None:
        now = self.now()
        snap = self.medium.refresh(now, force=force)
        if self._gt is not None:
            self._gt.observe(now, snapshot_edges(snap))

    async def _ground_truth_task(self) -> None:
        while True:
            self._observe_graph()
            await asyncio.sleep(GROUND_TRUTH_PERIOD_S)

    # --- control --------------------------------------------------------------------

    def command(self, req: dict) -> dict:
        """Execute one control request (see docs/medium.md)."""
        cmd = req.get("cmd")
        now = self.now()
        world = self.medium.world
        if cmd == "ping":
            return {"ok": True, "lab": self.lab, "t": now, "nodes": self.n}
        if cmd == "positions":
            return {
                "ok": True,
                "t": now,
                "positions": {
                    f"n{i + 1}": [round(x, 3), round(y, 3)]
                    for i, (x, y) in enumerate(world.positions(now))
                },
            }
        if cmd == "neighbours":
            node = node_index(req["node"], self.n)
            x0, y0 = world.position(node - 1, now)
            out = []
            for j, dbm in self.medium.neighbours(node, now):
                x, y = world.position(j - 1, now)
                out.append(
                    {
                        "node": f"n{j}",
                        "rssi_dbm": round(dbm, 2),
                        "distance_m": round(math.hypot(x - x0, y - y0), 2),
                    }
                )
            return {"ok": True, "t": now, "node": f"n{node}", "neighbours": out}
        if cmd == "move":
            node = node_index(req["node"], self.n)
            x, y = float(req["x"]), float(req["y"])
            speed = req.get("speed")
            if speed is not None:
                speed = float(speed)
                if speed <= 0:
                    raise ValueError("speed must be > 0 (or null to jump)")
            world.move(node - 1, x, y, now, speed)
            self.medium.handle_timer(now)
            self._observe_graph(force=True)
            return {"ok": True, "t": now}
        if cmd == "link":
            a, b = node_index(req["a"], self.n), node_index(req["b"], self.n)
            state = req.get("state")
            world.set_link(a - 1, b - 1, state)
            self._observe_graph(force=True)
            return {"ok": True, "t": now}
        if cmd == "stats":
            cpu = os.times()
            return {
                "ok": True,
                "t": now,
                "cpu_s": round(cpu.user + cpu.system, 3),
                "attached": [f"n{k}" for k in sorted(self.attached_nodes())],
                "server": dict(self.counters),
                "medium": self.medium.stats(),
                "graph_changes": self._gt.changes if self._gt else None,
                "radios": self.radios_design(),
                "scheduling": self.scheduling,
                **({"shared_radios": self.radios.stats()} if self.radios else {}),
                "fidelity": {"lag_ms": self.lag.summary(now), "drops": self.drops()},
            }
        if cmd == "links":
            return {"ok": True, "t": now, **self.medium.link_table(now, bool(req.get("cs")))}
        if cmd == "fidelity":
            since = req.get("since")
            if since is not None and not isinstance(since, int | float):
                raise ValueError(f"fidelity: since must be a number of seconds, not {since!r}")
            lag = self.lag.to_wire(since=None if since is None else int(since))
            return {
                "ok": True,
                "t": now,
                "radios": self.radios_design(),
                "lag": lag,
                "drops": self.drops(),
            }
        raise ValueError(
            f"unknown cmd {cmd!r} (ping, positions, neighbours, links, move, link, stats, fidelity)"
        )

    def drops(self) -> dict[str, dict[str, int]]:
        """Frames lost by the model's decision (physics, queues) and outside it (the
        shell could not hand a DELIVER or TXSTATUS to a radio): lab/fidelity.py."""
        c = self.medium.counters
        unmodelled = {
            "medium_send_drops": self.counters["send_drops"],
            "medium_send_errors": self.counters["send_errors"],
        }
        if self.radios is not None:
            unmodelled.update(self.radios.unmodelled())
        return {
            "modelled": {k: c[k] for k in self.medium.MODELLED_DROPS},
            "unmodelled": unmodelled,
        }

    def attached_nodes(self) -> set[int]:
        """Nodes on the air: attached radio processes and the shared radios' TAPs."""
        local = {p.node_id for p in self.local if p is not None and p.on_air}
        return set(self.node_addr) | local

    def radios_design(self) -> str:
        """``shared``: the nodes' radios are this process's; ``process``: radio processes."""
        return "shared" if self.radios is not None else "process"

    # --- lifecycle ------------------------------------------------------------------

    async def serve(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        self.t0 = time.monotonic()
        wall0 = time.time()
        control_server = LineServer(
            self.control_path,
            self.command,
            privileged=PRIVILEGED,
            access=Access(self.control_group),
            name="medium control socket",
        )
        tasks: list[asyncio.Task] = []
        try:
            unix = self._bind_unix()
            self._socks.append(unix)
            if self.udp:
                family, sockaddr = self.udp
                u = socket.socket(family, socket.SOCK_DGRAM)
                self._socks.append(u)
                try:
                    u.bind(sockaddr)
                except OSError as exc:
                    raise UserError(f"--udp: cannot bind {sockaddr}: {exc.strerror}") from None
            for s in self._socks:
                self._tune(s)
                self.loop.add_reader(s.fileno(), self._on_readable, s)
            if self.radios is not None:
                try:
                    self.radios.create()
                except OSError as exc:
                    raise UserError(f"--radios shared: {exc}") from None
                for port in self.radios:
                    self.medium.set_attached(port.node_id, True)
                self.radios.on_promiscuous = self.medium.set_overhear
                self.radios.on_air = self.medium.set_attached  # a deleted radio0
                await self.radios.start(self.on_local_frames)
            if self.ground_truth_path is not None:
                self.ground_truth_path.parent.mkdir(parents=True, exist_ok=True)
                self._gt_file = open(self.ground_truth_path, "a")  # noqa: SIM115 (closed below)
                self._gt = GroundTruthLog(self._gt_file, wall0, self.medium.link_rule())
            self._observe_graph(force=True)
            tasks.append(asyncio.create_task(self._ground_truth_task()))
            # What start-up made (imports, the scenario, the MAC's tables, the radios)
            # lives as long as the process: keep the cyclic garbage collector from
            # scanning it again and again. A full collection of a 100-node medium's
            # ~54,000 objects took 18 ms on the 2-core machine: a lag spike each time.
            gc.collect()
            gc.freeze()
            # The control socket is bound last: once it answers, everything is up.
            await control_server.start()
            log.info(
                "medium of lab %s: %d nodes on %s%s",
                self.lab,
                self.n,
                self.socket_path,
                f" and udp {self.udp[1]}" if self.udp else "",
            )
            if ready is not None:
                ready.set()
            await stop.wait()
        finally:
            for t in tasks:
                t.cancel()
            await control_server.close()
            if self.radios is not None:
                await self.radios.close()
            if self._timer is not None:
                self._timer.cancel()
            for s in self._socks:
                with contextlib.suppress(Exception):
                    self.loop.remove_reader(s.fileno())
                s.close()
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()
            if self._gt_file is not None:
                self._gt_file.close()


def server_from_args(args: argparse.Namespace) -> MediumServer:
    scenario = load_scenario(args.scenario, parse_set_args(args.set))
    lab = args.lab or lab_name(scenario, args.scenario)
    airtime_scale = getattr(args, "airtime_scale", 1.0)
    if not airtime_scale > 0:
        raise UserError("--airtime-scale must be > 0")
    try:
        paths.check_lab_name(lab)
        sock = paths.socket_option(args.socket, "--socket", paths.medium_socket(lab))
        control = paths.socket_option(args.control, "--control", paths.medium_control_socket(lab))
    except ValueError as exc:
        raise UserError(str(exc)) from None
    radios = None
    if getattr(args, "radios", "process") == "shared":
        try:
            nodes = [f"n{i}" for i in range(1, scenario.nodes + 1)]
            for node in nodes:
                paths.check_socket_path(
                    paths.radio_control_socket(lab, node), "radio socket", paths.rundir_hint()
                )
        except ValueError as exc:
            raise UserError(str(exc)) from None
        radios = SharedRadios(lab, scenario.nodes)
    return MediumServer(
        scenario,
        lab,
        sock,
        control,
        Path(args.ground_truth) if args.ground_truth else paths.ground_truth_log(lab),
        parse_hostport(args.udp) if args.udp else None,
        airtime_scale,
        getattr(args, "control_group", None),
        radios,
    )


def set_realtime(priority: int) -> str:
    """Put this process under SCHED_FIFO at ``priority`` (0: leave it alone); what it
    runs under, for ``stats`` (the refusal's reason included)."""
    if priority == 0:
        return "normal"
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except OSError as exc:
        log.warning(
            "SCHED_FIFO %d refused (%s): normal scheduling; under load the lab's lag grows",
            priority,
            exc.strerror,
        )
        return f"normal (SCHED_FIFO {priority} refused: {exc.strerror})"
    return f"fifo {priority}"


async def _main(server: MediumServer) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.serve(stop)


def run(args: argparse.Namespace) -> int:
    """Run the medium until SIGTERM/SIGINT; exit 0 after removing its sockets."""
    server = server_from_args(args)
    priority = getattr(args, "realtime", 0)
    if not 0 <= priority <= 99:
        raise UserError("--realtime must be 0 (off) or a priority 1..99")
    server.scheduling = set_realtime(priority)
    runner.run(_main(server))
    return 0


def standalone_argv(
    scenario: Path | str, *, lab: str, socket: Path, control: Path, ground_truth: Path
) -> list[str]:
    """The command line of a medium started without ``lab up`` (the medium bench, the
    server's tests): :func:`main` on these sockets; append any further options."""
    import sys

    return [
        sys.executable, "-m", "manetkit.lab.medium.server", str(scenario), "--lab", lab,
        "--socket", str(socket), "--control", str(control), "--ground-truth", str(ground_truth),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """``python -m manetkit.lab.medium.server``: the medium without the lab CLI."""
    import sys

    parser = argparse.ArgumentParser(prog="manetkit-medium", description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    try:
        return run(args)
    except UserError as exc:
        print(f"manetkit: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
