"""The daemon's asyncio shell: wires data plane, engine, link sensing and event socket.

aioquic's shape (docs/style.md, "The core contract"): every input is fed to the engine
with ``now=loop.time()``, then :meth:`Daemon._transmit` drains ``next_event()`` and
re-arms ONE timer at ``get_timer()``. The hot path (radio and TUN readiness) handles whole batches per
callback; nothing per packet touches asyncio.

Link sensing speaks MACs; the shell maps them to mesh addresses (``NeighbourTable``,
filled by beacons and the engines), applies the hysteresis (``LinkMonitor``) and feeds
the engine ``LinkUp``/``LinkDown``/``TxFailed``/``SignalSample``, publishing
neighbour-up/down on the event socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from ipaddress import IPv4Address
from typing import Any, TypeVar

from manetkit import events as ev
from manetkit import runner
from manetkit.daemon.auth import Authenticator, Handled, Rejected, is_data
from manetkit.daemon.config import DaemonConfig
from manetkit.daemon.dataplane import BROADCAST_MAC, DataPlane
from manetkit.daemon.engines.base import (
    BeaconHeard,
    Deliver,
    Dropped,
    LinkDown,
    LinkUp,
    Notify,
    RoutingEngine,
    SendFrame,
    SignalSample,
    TxFailed,
    TxReport,
)
from manetkit.daemon.eventsocket import EventServer
from manetkit.daemon.kernel import KernelGlue
from manetkit.daemon.linksense.base import (
    LinkSenseBackend,
    StationEvent,
    StationGone,
    StationSeen,
    StationTxFailed,
    StationTxStats,
)
from manetkit.daemon.linksense.hello import HelloBackend, is_hello, parse_hello
from manetkit.daemon.linksense.hysteresis import Decision, Down, LinkMonitor, Signal, Up
from manetkit.daemon.neighbours import NeighbourTable
from manetkit.daemonstatus import (
    DaemonCounters,
    DaemonStatus,
    Flows,
    Neighbour,
    SendBufferStatus,
    engine_status,
)
from manetkit.errors import UserError
from manetkit.jsonlines import Access, socket_alive
from manetkit.macaddr import format_mac, parse_mac

log = logging.getLogger("manetkit.daemon")

_ETH_HLEN = 14
RADIO_RETRY_S = 0.2  # how often a vanished radio interface is looked for
MAC_CHECK_S = 0.5  # how often the radio's MAC is re-read (it may change under us)
T = TypeVar("T")


def make_engine(cfg: DaemonConfig, neighbours: NeighbourTable) -> RoutingEngine:
    if cfg.protocol == "static":
        from manetkit.daemon.engines.static import StaticEngine

        return StaticEngine(cfg.address, cfg.static_routes, neighbours)
    mod = importlib.import_module(f"manetkit.daemon.engines.{cfg.protocol}")
    engine_cls = getattr(mod, f"{cfg.protocol.capitalize()}Engine")
    # send_buffer: and atra: reach the engine through its config (DaemonConfig.engine_config).
    # With authentication required, data (never signed) may not teach the engine.
    trust_data = cfg.auth is None or not cfg.auth.required
    return engine_cls(cfg.address, cfg.engine_config(), neighbours, trust_data=trust_data)


class Daemon:
    def __init__(self, cfg: DaemonConfig) -> None:
        self.cfg = cfg
        self.neighbours = NeighbourTable(cfg.max_neighbours)
        self.engine = make_engine(cfg, self.neighbours)
        for addr, mac in cfg.static_neighbours.items():
            self.neighbours.pin(addr, parse_mac(mac))
        self.dp: DataPlane | None = None
        self.kernel: KernelGlue | None = None
        # Frames between other nodes: to the engine if it learns from them, else dropped.
        self._overheard = self._overheard_frame if self.engine.wants_overheard else None
        self.events = EventServer(
            cfg.event_socket,
            lambda: self.status().to_wire(),
            discover=self._rediscover,
            access=Access(cfg.control_group),
        )
        hy = cfg.link_sensing.hysteresis
        if cfg.link_sensing.backend == "hello":
            self.monitor = LinkMonitor.for_hello(
                cfg.link_sensing.hello.interval_s,
                hy.missed_hellos,
                tx_failures=hy.tx_failures,
                min_signal_dbm=hy.min_signal_dbm,
                capacity=cfg.max_neighbours,
            )
        else:
            self.monitor = LinkMonitor(
                hy.inactive_s, hy.tx_failures, hy.min_signal_dbm, capacity=cfg.max_neighbours
            )
        self.backend: LinkSenseBackend | None = None
        self.beacon: HelloBackend | None = None
        self.drops: Counter[str] = Counter()
        self.counters: Counter[str] = Counter()
        self._announced: set[bytes] = set()
        self._macs: dict[int, bytes] = {}
        self._macs_version = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._now = 0.0
        self._engine_timer: asyncio.TimerHandle | None = None
        self._engine_deadline: float | None = None
        self._monitor_timer: asyncio.TimerHandle | None = None
        self._monitor_deadline: float | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._kexec = ThreadPoolExecutor(1, thread_name_prefix="kernel")
        self._stop = asyncio.Event()
        self._fatal: str | None = None  # why the daemon stops on its own (exit non-zero)
        self._recovering: set[str] = set()  # "tun", "radio": a recovery task is running
        self._hello_port = cfg.link_sensing.hello.port
        # Control bytes are counted here, on what goes on the air; the engine's wire
        # says which frames are control (the engines count control packets by kind).
        self._is_control = self.engine.is_control_frame
        # Control-plane MACs (docs/security.md): verified before the engine, signed after.
        self.auth = (
            Authenticator.from_config(cfg.auth, self._hello_port, cfg.address) if cfg.auth else None
        )
        self.started_at = time.time()

    # -- lifecycle --------------------------------------------------------------------
    async def run(self) -> None:
        """Set up, serve until SIGTERM/SIGINT or :meth:`stop`, and undo everything."""
        loop = self._loop = asyncio.get_running_loop()
        cfg = self.cfg
        # Refuse before touching the kernel: removing a "stale" mesh0 would break a
        # daemon that is still running. The socket itself opens last, so a client that
        # gets an answer knows the data plane is ready.
        if socket_alive(cfg.event_socket):
            raise UserError(
                f"event_socket: {cfg.event_socket} is in use: is another daemon running?"
            )
        try:
            kernel = self.kernel = await self._kcall(
                KernelGlue,
                cfg.tun_name,
                cfg.address,
                cfg.prefix,
                cfg.tun_mtu(),
                cfg.radio_interface,
            )
            try:
                await self._kcall(kernel.check_radio)
            except LookupError as exc:
                raise UserError(f"radio_interface: {exc}") from None
            # Promiscuous receive (RFC 4728 8.4.4) for route shortening.
            if self.engine.wants_overheard and await self._kcall(kernel.set_radio_promiscuous):
                log.info("%s set promiscuous (overhearing)", cfg.radio_interface)
            await self._kcall(kernel.remove_stale_tun)
            self.dp = DataPlane.open(cfg.tun_name, cfg.radio_interface, cfg.ethertype)
            await self._kcall(kernel.configure_tun)
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._stop.set)
            loop.add_reader(self.dp.radio.fileno(), self._on_radio)
            loop.add_reader(self.dp.tun_fd, self._on_tun)
            self._start_link_sensing()
            self._tasks.append(asyncio.create_task(self._watch_mac()))
            try:
                await self.events.start()
            except OSError as exc:
                raise UserError(f"event_socket: {exc}") from None
            log.info(
                "%s daemon up: %s on %s, radio %s (%s), mtu %d",
                cfg.protocol,
                cfg.address,
                cfg.tun_name,
                cfg.radio_interface,
                format_mac(self.dp.mac),
                cfg.tun_mtu(),
            )
            await self._stop.wait()
        finally:
            await self._shutdown()
        if self._fatal is not None:
            raise UserError(self._fatal)

    async def _kcall(self, fn: Callable[..., T], *args: Any) -> T:
        """Run kernel glue in its own thread: pyroute2's sync API runs its own event
        loop, which cannot nest inside ours, and netlink calls are rare (setup/undo)."""
        assert self._loop is not None
        return await self._loop.run_in_executor(self._kexec, lambda: fn(*args))

    def stop(self) -> None:
        self._stop.set()

    async def _shutdown(self) -> None:
        loop = self._loop
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for h in (self._engine_timer, self._monitor_timer):
            if h:
                h.cancel()
        if loop is not None:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(sig)
        if self.dp is not None and loop is not None:
            with contextlib.suppress(Exception):
                loop.remove_reader(self.dp.radio.fileno())
            with contextlib.suppress(Exception):
                loop.remove_reader(self.dp.tun_fd)
        if self.kernel is not None:
            await self._kcall(self.kernel.undo)
            await self._kcall(self.kernel.restore_radio)
        if self.dp is not None:
            self.dp.close()  # closing the fd deletes the (non-persistent) TUN
            self.dp = None
        if self.kernel is not None:
            await self._kcall(self.kernel.close)
        self._kexec.shutdown(wait=False)
        await self.events.close()
        log.info("daemon stopped, %s removed", self.cfg.tun_name)

    def _start_link_sensing(self) -> None:
        cfg = self.cfg
        ls = cfg.link_sensing
        assert self._loop is not None
        # Beacons always run: they give every backend the MAC <-> address mapping.
        self.beacon = HelloBackend(
            cfg.radio_interface,
            self._on_station,
            cfg.address,
            ls.hello.interval_s,
            self._send_broadcast,
            self._loop.time,
            ls.hello.port,
            capacity=cfg.max_neighbours,
        )
        self._tasks.append(asyncio.create_task(self.beacon.run()))
        if ls.backend == "hello":
            self.backend = self.beacon
        elif ls.backend == "lab":
            from manetkit.daemon.linksense.lab import LabBackend
            from manetkit.paths import radio_control_socket

            assert cfg.lab is not None
            self.backend = LabBackend(
                cfg.radio_interface,
                self._on_station,
                radio_control_socket(cfg.lab.name, cfg.lab.node),
                self._loop.time,
                ls.poll_s,
            )
            self._tasks.append(asyncio.create_task(self.backend.run()))
        else:
            from manetkit.daemon.linksense.nl80211 import Nl80211Backend

            self.backend = Nl80211Backend(
                cfg.radio_interface,
                self._on_station,
                poll_interval=ls.poll_s,
                inactive_limit_ms=int(ls.hysteresis.inactive_s * 1000),
            )
            self._tasks.append(asyncio.create_task(self.backend.run()))

    # -- hot path ---------------------------------------------------------------------
    def _on_radio(self) -> None:
        assert self._loop is not None and self.dp is not None
        self._now = self._loop.time()
        self.dp.drain_radio(self._rx_frame, overheard=self._overheard)
        self._transmit()
        if self.dp.radio_lost is not None:
            self._radio_lost()

    def _rx_frame(self, mac: bytes, packet: bytes) -> None:
        auth = self.auth
        if auth is not None and not is_data(packet, self._hello_port):  # data: never signed
            out = auth.verify(self._now, packet, mac)
            if type(out) is not bytes:
                self._refused(mac, out)  # type: ignore[arg-type]
                return
            packet = out
        if packet[16] == 255 and is_hello(packet, self._hello_port):
            self._on_hello(mac, packet)
            return
        self.engine.receive_frame(self._now, packet, mac)

    def _verified(self, mac: bytes, packet: bytes) -> bytes | None:
        """The packet for the engine, or None: dropped (counted) or a challenge."""
        assert self.auth is not None
        out = self.auth.verify(self._now, packet, mac)
        if type(out) is bytes:
            return out
        self._refused(mac, out)  # type: ignore[arg-type]
        return None

    def _refused(self, mac: bytes, out: Rejected | Handled) -> None:
        """A frame the engine does not get: count a refusal, send any challenge."""
        auth = self.auth
        assert auth is not None
        if type(out) is Rejected:
            self.drops[f"auth-{out.reason}"] += 1
        # RFC 8967 4.3's challenges: requests for a new index, replies to ours.
        while (c := auth.next_event()) is not None:
            self._send_signed(c.mac, c.packet)

    def _send_signed(self, mac: bytes, packet: bytes) -> None:
        """A control frame of the shell's own (beacon, challenge): signed, counted."""
        if self.dp is not None:
            if self.auth is not None:
                packet = self.auth.sign(self._now, packet, self.dp.mac)
            self.counters["control-tx-frames"] += 1
            self.counters["control-tx-bytes"] += len(packet)
            self.dp.send(mac, packet)

    def _overheard_frame(self, mac: bytes, packet: bytes) -> None:
        if self.auth is not None and (packet := self._verified(mac, packet)) is None:
            return
        self.engine.overhear_frame(self._now, packet, mac)

    def _on_tun(self) -> None:
        assert self._loop is not None and self.dp is not None
        now = self._now = self._loop.time()
        send_local = self.engine.send_local
        try:
            self.dp.drain_tun(lambda p: send_local(now, p))
        except OSError as exc:  # EBADFD: someone deleted the TUN (`ip link del mesh0`)
            self._tun_lost(exc)
        self._transmit()

    # -- faults: an interface deleted under the daemon (docs/daemon.md) -----------------
    def _tun_lost(self, exc: OSError) -> None:
        """The TUN was deleted: its fd polls EPOLLERR and reads EBADFD for ever. Say so
        once, stop reading it, and create it again (address, MTU, route)."""
        assert self._loop is not None and self.dp is not None
        self._loop.remove_reader(self.dp.tun_fd)
        if "tun" in self._recovering:
            return
        self._recovering.add("tun")
        log.warning("%s was deleted (%s); re-creating it", self.cfg.tun_name, exc.strerror)
        self._tasks.append(asyncio.create_task(self._recreate_tun()))

    async def _recreate_tun(self) -> None:
        assert self._loop is not None and self.dp is not None and self.kernel is not None
        name = self.cfg.tun_name
        try:
            await self._kcall(self.kernel.undo)  # what went with the device: forget it
            await self._kcall(self.kernel.remove_stale_tun)
            self.dp.reopen_tun(name)
            await self._kcall(self.kernel.configure_tun)
        except (OSError, LookupError) as exc:  # NetlinkError is an OSError
            self._die(f"{name} was deleted and cannot be re-created: {exc}")
            return
        finally:
            self._recovering.discard("tun")
        self._loop.add_reader(self.dp.tun_fd, self._on_tun)
        log.info("%s re-created (%s/32, route to %s)", name, self.cfg.address, self.cfg.prefix)

    def _radio_lost(self) -> None:
        """The radio interface went away (unplugged, ``ip link del``): the packet
        socket reported ENETDOWN/ENXIO once and is deaf from then on. Say so once and
        wait for an interface of that name to come back, then re-open the socket."""
        assert self._loop is not None and self.dp is not None
        if "radio" in self._recovering:
            return
        self._recovering.add("radio")
        err = self.dp.radio_lost
        self._loop.remove_reader(self.dp.radio.fileno())
        log.warning(
            "radio interface %s is gone (%s); waiting for it to come back",
            self.cfg.radio_interface,
            err.strerror if err else "?",
        )
        self._tasks.append(asyncio.create_task(self._await_radio()))

    async def _await_radio(self) -> None:
        assert self._loop is not None and self.dp is not None and self.kernel is not None
        name = self.cfg.radio_interface
        seen = False
        try:
            while True:
                await asyncio.sleep(RADIO_RETRY_S)
                try:
                    await self._kcall(self.kernel.check_radio)  # exists? then bring it up
                except LookupError:
                    seen = False
                    continue
                if not seen:  # just created: let its owner set it up (MAC) first
                    seen = True
                    continue
                if self.engine.wants_overheard:
                    await self._kcall(self.kernel.set_radio_promiscuous)
                try:
                    self.dp.reopen_radio(name)
                except OSError as exc:
                    log.debug("%s not usable yet: %s", name, exc)
                    continue
                break
        except OSError as exc:
            self._die(f"radio interface {name} came back but cannot be used: {exc}")
            return
        finally:
            self._recovering.discard("radio")
        self._macs.clear()
        self._loop.add_reader(self.dp.radio.fileno(), self._on_radio)
        log.info("radio interface %s is back (MAC %s)", name, format_mac(self.dp.mac))

    async def _watch_mac(self) -> None:
        """Follow the radio's MAC: frames to the old one would read as not for us."""
        while True:
            await asyncio.sleep(MAC_CHECK_S)
            if self.dp is not None and self.dp.refresh_mac():
                log.info(
                    "radio interface %s has MAC %s now",
                    self.cfg.radio_interface,
                    format_mac(self.dp.mac),
                )

    def _die(self, why: str) -> None:
        """A fault the daemon cannot recover from: log it once, exit non-zero."""
        log.error("%s; exiting", why)
        self._fatal = why
        self._stop.set()

    def _transmit(self) -> None:
        """Carry out the engine's actions, then re-arm its one timer."""
        engine = self.engine
        dp = self.dp
        assert dp is not None
        nb = self.neighbours
        auth = self.auth
        macs = self._macs
        if nb.version != self._macs_version:
            macs.clear()
            self._macs_version = nb.version
        is_control = self._is_control
        hello_port = self._hello_port
        counters = self.counters
        next_event = engine.next_event
        while (a := next_event()) is not None:
            t = type(a)
            if t is SendFrame:
                hop = a.next_hop
                packet = a.packet
                if auth is not None and not is_data(packet, hello_port):
                    packet = auth.sign(self._now, packet, dp.mac)
                if is_control is not None and is_control(packet):
                    counters["control-tx-frames"] += 1
                    counters["control-tx-bytes"] += len(packet)
                if hop is None:
                    dp.send(BROADCAST_MAC, packet)
                    continue
                # IPv4Address hashes in Python (~1 us); its int hashes in C.
                mac = macs.get(hop._ip)
                if mac is None:
                    mac = nb.mac_of(hop)
                    if mac is None:
                        self.drops["no-neighbour-mac"] += 1
                        continue
                    macs[hop._ip] = mac
                dp.send(mac, packet)
            elif t is Deliver:
                dp.write_tun(a.packet)
            elif t is Notify:
                self.events.publish(a.event)
            elif t is Dropped:
                self.drops[a.reason] += 1
        self._arm_engine_timer()
        if dp.radio_lost is not None:
            self._radio_lost()

    def _arm_engine_timer(self) -> None:
        deadline = self.engine.get_timer()
        if deadline == self._engine_deadline:
            return
        if self._engine_timer is not None:
            self._engine_timer.cancel()
            self._engine_timer = None
        self._engine_deadline = deadline
        if deadline is not None and self._loop is not None:
            self._engine_timer = self._loop.call_at(deadline, self._on_engine_timer)

    def _on_engine_timer(self) -> None:
        assert self._loop is not None
        self._engine_timer = None
        self._engine_deadline = None
        self.engine.handle_timer(self._loop.time())
        self._transmit()

    def _rediscover(self, dst: IPv4Address) -> bool:
        """The event socket's ``discover`` command: the engine asks for ``dst`` now."""
        if self._loop is None or self.dp is None:
            return False
        self._now = self._loop.time()
        restarted = self.engine.rediscover(self._now, dst)
        self.counters["rediscover-restarted" if restarted else "rediscover-refused"] += 1
        self._transmit()
        return restarted

    def _send_broadcast(self, packet: bytes) -> None:
        """A link-sensing hello: routing control too (counted with the engine's frames)."""
        self._send_signed(BROADCAST_MAC, packet)

    # -- link sensing -----------------------------------------------------------------
    def _on_hello(self, mac: bytes, packet: bytes) -> None:
        hello = parse_hello(packet, self._hello_port)
        if hello is None:
            self.counters["bad-hello"] += 1
            return
        if hello.address == self.cfg.address:
            self.counters["hello-own-address"] += 1  # a duplicate address on the mesh
            return
        self.counters["hello-rx"] += 1
        self.neighbours.learn(self._now, hello.address, mac)
        if self.engine.wants_link_reports:  # link quality's hello history
            beacon = BeaconHeard(hello.address, hello.seq, hello.interval_ms / 1000)
            self.engine.link_event(self._now, beacon)
        if self.beacon is self.backend:
            self.beacon.received(self._now, mac)  # -> _on_station(StationSeen)
        elif self.monitor.is_up(mac) and mac not in self._announced:
            # The station was up before we knew its address: announce it now.
            self._apply(self._now, [Up(mac, self.monitor.signal(mac))])

    def _on_station(self, now: float, ev: StationEvent) -> None:
        if isinstance(ev, StationSeen):
            self.monitor.heard(now, ev.mac, ev.signal_dbm)
        elif isinstance(ev, StationGone):
            self.monitor.gone(now, ev.mac, ev.reason)
        elif isinstance(ev, StationTxFailed):
            self.counters["tx-failed"] += 1
            addr = self.neighbours.address_of(ev.mac)
            if addr is not None:
                self.engine.link_event(now, TxFailed(addr, self._packet_of(ev.frame)))
            self.monitor.tx_failed(now, ev.mac)
        elif isinstance(ev, StationTxStats):
            addr = self.neighbours.address_of(ev.mac)
            if addr is not None and self.engine.wants_link_reports:
                self.engine.link_event(now, TxReport(addr, ev.attempts, ev.delivered))
            return
        else:
            return
        self._apply(now, self._decisions())

    def _decisions(self) -> Iterator[Decision]:
        """The link monitor's decisions, drained."""
        while (d := self.monitor.next_event()) is not None:
            yield d

    def _packet_of(self, frame: bytes | None) -> bytes | None:
        """The IPv4 packet inside a returned failed frame (for salvaging and ELFN)."""
        if not frame or len(frame) < _ETH_HLEN + 20:
            return None
        if int.from_bytes(frame[12:14], "big") != self.cfg.ethertype:
            return None
        packet = frame[_ETH_HLEN:]
        total = int.from_bytes(packet[2:4], "big")
        return packet[:total] if 20 <= total <= len(packet) else None

    def _apply(self, now: float, decisions: Iterable[Decision]) -> None:
        for d in decisions:
            addr = self.neighbours.address_of(d.mac)
            mac_s = format_mac(d.mac)
            if isinstance(d, Up):
                if addr is None:
                    continue  # announced once a beacon or the engine maps the MAC
                self._announced.add(d.mac)
                n = self.neighbours.get(addr)
                if n is not None:
                    n.up = True
                    if d.signal_dbm is not None:
                        n.signal_dbm = d.signal_dbm
                self.engine.link_event(now, LinkUp(addr, d.signal_dbm))
                self.events.publish(
                    ev.NeighbourUp(neighbour=str(addr), mac=mac_s, signal_dbm=d.signal_dbm)
                )
            elif isinstance(d, Down):
                if addr is None or d.mac not in self._announced:
                    continue
                self._announced.discard(d.mac)
                n = self.neighbours.get(addr)
                if n is not None:
                    n.up = False
                self.engine.link_event(now, LinkDown(addr, d.reason))
                silent = round(now - d.last_heard, 3) if d.last_heard is not None else None
                self.events.publish(
                    ev.NeighbourDown(
                        neighbour=str(addr), mac=mac_s, reason=d.reason, silent_s=silent
                    )
                )
            elif isinstance(d, Signal) and addr is not None:
                n = self.neighbours.get(addr)
                if n is not None:
                    n.signal_dbm = d.signal_dbm
                self.engine.link_event(now, SignalSample(addr, d.signal_dbm, now))
        if self.dp is not None:
            self._transmit()
        self._arm_monitor_timer()

    def _arm_monitor_timer(self) -> None:
        deadline = self.monitor.get_timer()
        if deadline == self._monitor_deadline or self._loop is None:
            return
        if self._monitor_timer is not None:
            self._monitor_timer.cancel()
        self._monitor_deadline = deadline
        self._monitor_timer = (
            self._loop.call_at(deadline, self._on_monitor_timer) if deadline is not None else None
        )

    def _on_monitor_timer(self) -> None:
        assert self._loop is not None
        self._monitor_timer = None
        self._monitor_deadline = None
        now = self._loop.time()
        self.monitor.handle_timer(now)
        self._apply(now, self._decisions())

    # -- status -----------------------------------------------------------------------
    def status(self) -> DaemonStatus:
        """What ``{"cmd": "status"}`` answers (:mod:`manetkit.daemonstatus`)."""
        now = self._loop.time() if self._loop else 0.0
        stations = {st.mac: st for st in (self.backend.stations() if self.backend else [])}
        neighbours = []
        for n in self.neighbours:
            st = stations.get(n.mac)
            neighbours.append(
                Neighbour(
                    address=str(n.address),
                    mac=format_mac(n.mac),
                    up=n.up and self.monitor.is_up(n.mac),
                    signal_dbm=n.signal_dbm,
                    last_heard_s=round(now - n.last_heard, 3) if n.last_heard else None,
                    tx_failed=st.tx_failed if st else None,
                )
            )
        buf = getattr(self.engine, "send_buffer", None)
        if buf is None:
            send_buffer = SendBufferStatus(packets=0, limit=self.cfg.send_buffer.packets)
        else:
            send_buffer = SendBufferStatus(
                packets=len(buf),
                limit=buf.max_packets,
                timeout_s=buf.timeout,
                destinations={str(d): buf.waiting(d) for d in buf.destinations()},
                drops=dict(buf.drops),
            )
        return DaemonStatus(
            address=str(self.cfg.address),
            protocol=self.cfg.protocol,
            tun=self.cfg.tun_name,
            radio_interface=self.cfg.radio_interface,
            link_sensing=self.cfg.link_sensing.backend,
            uptime_s=round(time.time() - self.started_at, 1),
            neighbours=neighbours,
            # the engine reports in its wire form; the model checks it here
            engine=engine_status(self.engine.status()),
            send_buffer=send_buffer,
            # packets and bytes our apps sent per destination / we delivered per source
            flows=Flows(
                originated=self.dp.originated.to_json() if self.dp else {},
                delivered=self.dp.delivered.to_json() if self.dp else {},
            ),
            counters=DaemonCounters(
                dataplane=self.dp.counters() if self.dp else {},
                drops=dict(self.drops),
                shell=dict(self.counters),
                events=self.events.counters(),
                beacons_sent=self.beacon.sent if self.beacon else 0,
                links_evicted=self.monitor.evicted,
                static_neighbour_remaps_refused=self.neighbours.refused,
                hello_stations_evicted=self.beacon.evicted if self.beacon else 0,
                auth=dict(self.auth.counters) if self.auth else None,
            ),
        )


def run_daemon(cfg: DaemonConfig) -> None:
    """Run until SIGTERM/SIGINT (on uvloop, :mod:`manetkit.runner`)."""
    runner.run(Daemon(cfg).run())
