"""The node side of the lab's air: TAP ``radio0`` <-> the medium, plus a station table.

One radio process runs inside each node's namespace
(``ip netns exec mk-<lab>-<node> manetkit lab radio --lab L --node nI``). It

- creates the TAP ``radio0`` (IFF_TAP|IFF_NO_PI, no offloads: every frame the kernel hands
  us is complete) with MAC ``protocol.node_mac(I)``, MTU 1500, and keeps its carrier off
  until the medium has accepted the ATTACH (like a Wi-Fi card that has not joined the
  IBSS yet);
- relays frames: TAP read -> TX datagram, DELIVER -> TAP write. The hot path is two
  readiness callbacks that drain their fd in a loop, with no per-frame task or parse
  beyond the bytes the station table needs (docs/architecture.md, "Performance notes");
- passes other nodes' unicasts that the medium lets it overhear to the TAP only while
  ``radio0`` is promiscuous (IFF_PROMISC, polled every ``PROMISC_POLL_S``), as a
  mac80211 IBSS interface does, and tells the medium (OVERHEAR) whether it wants them,
  so labs whose software never sets promiscuous mode pay nothing for overhearing;
- keeps the station table (``manetkit.lab.stations``) from DELIVER signal levels and the
  medium's TXSTATUS reports, and serves it on a JSON-lines control socket, with a
  ``subscribe`` command that streams ``tx-failed`` / ``station-new`` / ``station-gone``
  events to the node's software (the daemon's ``lab`` link-sensing backend).

The wire format towards the medium is ``manetkit.lab.medium.protocol``, over the medium's
AF_UNIX datagram socket (namespace labs) or, with ``--medium-udp HOST:PORT``, over UDP
(docker labs, where the medium's socket file is not shared); the control protocol is
documented in docs/lab.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import signal
import socket
import struct
import sys
import time
from pathlib import Path

from manetkit import jsonlines, paths, runner
from manetkit.lab.medium import protocol
from manetkit.lab.stations import DEFAULT_EXPIRY_S, StationTable
from manetkit.macaddr import format_mac
from manetkit.tuntap import open_tap, set_carrier

log = logging.getLogger("manetkit.lab.radio")

# linux/sockios.h, linux/if.h
SIOCGIFFLAGS = 0x8913
IFF_PROMISC = 0x100
# How often radio0's IFF_PROMISC is read (an ioctl; netlink would need a monitor socket
# for one bit). A daemon that turns promiscuous mode on overhears within this delay.
PROMISC_POLL_S = 0.5

INTERFACE = "radio0"
MTU = 1500
# Largest datagram from the medium: type + rssi + an MTU-sized frame with its header
# (bigger ones would be truncated by recv_into and are counted as malformed).
RECV_BUF = 1 + 2 + 14 + 65535
# Frames relayed per readiness callback before yielding to the other fd and the control
# socket; large enough that the syscalls dominate, small enough to stay responsive.
BURST = 256
# Events queued per control-socket subscriber; beyond this they are dropped and counted.
SUBSCRIBER_QUEUE = 4096
_I16 = struct.Struct("!h")
_MEDIUM_GONE = (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTCONN)


def node_id_of(node: str) -> int:
    """``n7`` -> 7 (node names are n1..nN)."""
    if len(node) < 2 or node[0] != "n" or not node[1:].isdigit() or int(node[1:]) < 1:
        raise ValueError(f"node name {node!r}: expected n1, n2, ...")
    return int(node[1:])


def is_promiscuous(name: str) -> bool:
    """Whether interface ``name`` (in this namespace) has IFF_PROMISC set.

    SIOCGIFFLAGS reports the flag set by ``ip link set promisc on`` / netlink (dev->gflags),
    not the counter packet sockets raise for tcpdump, so a capture does not turn
    overhearing on.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        res = fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sh22x", name.encode(), 0))
    return bool(struct.unpack_from("16xh", res)[0] & IFF_PROMISC)


def configure_link(name: str, mac: bytes) -> None:
    """MAC, MTU and admin state up, through netlink (pyroute2)."""
    from pyroute2 import IPRoute  # imported here: only the radio process needs it

    with IPRoute() as ipr:
        idx = ipr.link_lookup(ifname=name)[0]
        ipr.link("set", index=idx, address=format_mac(mac), mtu=MTU, state="up")


class Radio:
    """The asyncio shell of one node's radio."""

    def __init__(
        self,
        lab: str,
        node: str,
        *,
        medium_path: Path | None,
        socket_path: Path,
        control_path: Path,
        interface: str = INTERFACE,
        station_expiry_s: float = DEFAULT_EXPIRY_S,
        medium_udp: tuple[int, tuple] | None = None,
    ) -> None:
        self.lab = lab
        self.node = node
        self.node_id = node_id_of(node)
        self.mac = protocol.node_mac(self.node_id)
        self.interface = interface
        # Where the medium listens: its AF_UNIX path, or (family, sockaddr) for UDP.
        if (medium_path is None) == (medium_udp is None):
            raise ValueError("give exactly one of medium_path and medium_udp")
        self.medium_path = medium_path
        self.medium_udp = medium_udp
        self.medium_addr: str | tuple = (
            str(medium_path) if medium_path is not None else medium_udp[1]
        )
        self.socket_path = socket_path
        self.control_path = control_path
        self.stations = StationTable(station_expiry_s)
        self.attached = False
        self.tap_lost = False  # radio0 was deleted: exit non-zero
        self.counters = {
            "tx_frames": 0,  # TAP -> medium
            "rx_frames": 0,  # medium -> TAP
            "tx_dropped": 0,  # not sent (not attached, medium gone)
            "rx_dropped": 0,  # TAP refused the write
            "malformed": 0,  # datagrams from the medium that did not parse
            "tx_failed": 0,  # unicast failures the medium reported
            "rx_overheard": 0,  # other nodes' unicasts written to the TAP (promiscuous)
            "rx_overheard_dropped": 0,  # ... that arrived while radio0 was not promiscuous
        }
        self.promiscuous = False  # radio0's IFF_PROMISC, as last polled
        self._medium_overhear = False  # what the medium was last told (OVERHEAR)
        self.control = jsonlines.LineServer(
            control_path,
            self.handle_request,
            subscribe=True,
            queue_lines=SUBSCRIBER_QUEUE,
            name="radio control socket",
        )
        self._attached_event: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        self._pending: bytes | None = None  # one frame waiting for the socket to drain
        self._refused: str | None = None
        self.tap_fd = -1
        self.sock: socket.socket | None = None
        self._buf = bytearray(RECV_BUF)
        self._mv = memoryview(self._buf)

    # --- set-up and tear-down ---------------------------------------------------------

    def create_interface(self) -> None:
        """Make radio0 (before the event loop runs: pyroute2's sync API runs its own loop)."""
        self.tap_fd = open_tap(self.interface)
        set_carrier(self.tap_fd, False)
        configure_link(self.interface, self.mac)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self._attached_event = asyncio.Event()
        self._stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)

        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        if self.medium_udp is None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self.sock.bind(str(self.socket_path))
        else:
            # UDP: connect() picks the local port, and the kernel then drops datagrams
            # from anyone but the medium; an ICMP port-unreachable (medium gone) comes
            # back as ECONNREFUSED on the next send/recv, like a vanished unix socket.
            self.sock = socket.socket(self.medium_udp[0], socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self.sock.setblocking(False)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        loop.add_reader(self.sock.fileno(), self._on_medium_readable)
        await self.control.start()
        housekeeping = asyncio.create_task(self._housekeeping())
        promisc_watch = asyncio.create_task(self._watch_promiscuous())
        attacher = asyncio.create_task(self._attach_loop())
        log.info(
            "radio %s of lab %s: %s %s, medium at %s",
            self.node,
            self.lab,
            self.interface,
            format_mac(self.mac),
            self.medium_addr,
        )
        try:
            await self._stop.wait()
        finally:
            attacher.cancel()
            housekeeping.cancel()
            promisc_watch.cancel()
            await self.control.close()
            self._shutdown(loop)
        if self._refused:
            log.error("medium refused the ATTACH: %s", self._refused)
            return 1
        return 1 if self.tap_lost else 0

    def _shutdown(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.sock is not None:
            loop.remove_reader(self.sock.fileno())
            loop.remove_writer(self.sock.fileno())
            if self.attached:
                with contextlib.suppress(OSError):
                    self.sock.send(protocol.detach())
            self.sock.close()
        if self.tap_fd >= 0:
            loop.remove_reader(self.tap_fd)
            os.close(self.tap_fd)  # the TAP is not persistent: it disappears with the fd
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    async def _attach_loop(self) -> None:
        """(Re-)ATTACH until the medium answers; again whenever it is lost."""
        assert self._attached_event is not None
        delay = 0.05
        last_log = time.monotonic()
        while not self.attached:
            try:
                self.sock.connect(self.medium_addr)
                self.sock.send(protocol.attach(self.node_id))
            except OSError as exc:
                if time.monotonic() - last_log > 5:
                    log.warning("waiting for the medium at %s: %s", self.medium_addr, exc)
                    last_log = time.monotonic()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._attached_event.wait(), delay)
            delay = min(delay * 2, 1.0)

    def _on_attached(self, msg: protocol.Attached) -> None:
        if msg.node_id != self.node_id:
            self.counters["malformed"] += 1
            return
        if msg.mac != self.mac:
            log.warning(
                "medium gives MAC %s, radio0 has %s", format_mac(msg.mac), format_mac(self.mac)
            )
        self._medium_overhear = False  # every ATTACH resets it in the medium
        self._sync_overhear()
        if not self.attached:
            self.attached = True
            set_carrier(self.tap_fd, True)
            asyncio.get_running_loop().add_reader(self.tap_fd, self._on_tap_readable)
            log.info("attached to the medium at %s", self.medium_addr)
        assert self._attached_event is not None
        self._attached_event.set()

    def _on_medium_lost(self, exc: OSError) -> None:
        """The medium went away (restart, crash): carrier off, try to ATTACH again."""
        if not self.attached:
            return
        log.warning("medium lost (%s); re-attaching", exc)
        self.attached = False
        assert self._attached_event is not None
        self._attached_event.clear()
        loop = asyncio.get_running_loop()
        loop.remove_reader(self.tap_fd)
        loop.remove_writer(self.sock.fileno())
        self._pending = None
        set_carrier(self.tap_fd, False)
        loop.create_task(self._attach_loop())

    # --- hot path ---------------------------------------------------------------------

    def _on_tap_readable(self) -> None:
        tap = self.tap_fd
        send = self.sock.sendmsg
        hdr = (bytes([protocol.TX]),)
        sent = self.stations.sent
        n = 0
        try:
            for n in range(BURST):  # noqa: B007 - n counts frames for the stats below
                try:
                    frame = os.read(tap, 65536)
                except BlockingIOError:
                    return
                except OSError as exc:
                    self._tap_lost(exc)
                    return
                if not frame[0] & 1:  # unicast: the station table counts it
                    sent(frame[:6], len(frame))
                try:
                    send((*hdr, frame))
                except BlockingIOError:
                    # The medium's queue is full: hold this frame and stop reading the TAP
                    # until the socket is writable, so the kernel's queue absorbs the burst.
                    self._pending = frame
                    loop = asyncio.get_running_loop()
                    loop.remove_reader(tap)
                    loop.add_writer(self.sock.fileno(), self._on_medium_writable)
                    return
                except OSError as exc:
                    if exc.errno in _MEDIUM_GONE:
                        self.counters["tx_dropped"] += 1
                        self._on_medium_lost(exc)
                        return
                    raise
        finally:
            self.counters["tx_frames"] += n

    def _tap_lost(self, exc: OSError) -> None:
        """radio0 was deleted under us (``ip link del``, like a Wi-Fi card unplugged):
        the TAP fd polls EPOLLERR and reads EBADFD for ever. Say so once and exit
        non-zero; starting the radio again re-creates radio0 (issue 12 fault tests)."""
        log.error(
            "%s was removed (%s): exiting; start the radio again to re-create it",
            self.interface,
            exc.strerror,
        )
        self.tap_lost = True
        asyncio.get_running_loop().remove_reader(self.tap_fd)
        assert self._stop is not None
        self._stop.set()

    def _on_medium_writable(self) -> None:
        loop = asyncio.get_running_loop()
        if self._pending is not None:
            try:
                self.sock.sendmsg((bytes([protocol.TX]), self._pending))
            except BlockingIOError:
                return
            except OSError as exc:
                self.counters["tx_dropped"] += 1
                self._on_medium_lost(exc)
                return
            self._pending = None
        loop.remove_writer(self.sock.fileno())
        loop.add_reader(self.tap_fd, self._on_tap_readable)

    def _on_medium_readable(self) -> None:
        sock = self.sock
        buf = self._buf
        mv = self._mv
        tap = self.tap_fd
        stations = self.stations.by_mac
        counters = self.counters
        mac = self.mac
        now = time.monotonic()
        rx = 0
        for _ in range(BURST):
            try:
                n = sock.recv_into(buf)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno in _MEDIUM_GONE:  # UDP: ICMP port unreachable
                    self._on_medium_lost(exc)
                    break
                counters["malformed"] += 1
                continue
            if n >= 17 and buf[0] == protocol.DELIVER:
                signal_dbm = _I16.unpack_from(buf, 1)[0] / 100.0
                src = bytes(buf[9:15])  # frame = buf[3:]; its source MAC is frame[6:12]
                if not buf[3] & 1 and buf[3:9] != mac:
                    self._overheard(src, signal_dbm, mv[3:n], now)
                    continue
                st = stations.get(src)
                if st is None:
                    self.stations.received(src, signal_dbm, n - 3, now)
                    self._emit(
                        {"event": "station-new", "mac": format_mac(src), "signal_dbm": signal_dbm}
                    )
                else:  # inline StationTable.received for the common case
                    st.signal_dbm = signal_dbm
                    st.signal_avg_dbm += (signal_dbm - st.signal_avg_dbm) / 8
                    st.last_active = now
                    st.rx_packets += 1
                    st.rx_bytes += n - 3
                    st.rx_signal_frames += 1
                    st.rx_signal_sum_dbm += signal_dbm
                try:
                    os.write(tap, mv[3:n])
                    rx += 1
                except OSError:
                    counters["rx_dropped"] += 1
                continue
            try:
                msg = protocol.parse(bytes(mv[:n]))
            except protocol.ProtocolError as exc:
                counters["malformed"] += 1
                log.debug("malformed datagram from the medium: %s", exc)
                continue
            if isinstance(msg, protocol.TxStatus):
                self._on_tx_status(msg, now)
            elif isinstance(msg, protocol.Attached):
                self._on_attached(msg)
            elif isinstance(msg, protocol.Refused):
                self._refused = msg.reason
                assert self._stop is not None
                self._stop.set()
            else:  # a radio -> medium message, or a DELIVER without a frame
                counters["malformed"] += 1
        counters["rx_frames"] += rx

    def _overheard(self, src: bytes, signal_dbm: float, frame: memoryview, now: float) -> None:
        """Another node's unicast: to the TAP only while radio0 is promiscuous."""
        if not self.promiscuous:
            self.counters["rx_overheard_dropped"] += 1
            return
        if self.stations.overheard(src, signal_dbm, now):
            self._emit({"event": "station-new", "mac": format_mac(src), "signal_dbm": signal_dbm})
        try:
            os.write(self.tap_fd, frame)
            self.counters["rx_overheard"] += 1
        except OSError:
            self.counters["rx_dropped"] += 1

    def _sync_overhear(self) -> None:
        """Tell the medium whether to send us other nodes' unicasts (radio0 promiscuous)."""
        if self._medium_overhear == self.promiscuous or self.sock is None:
            return
        try:
            self.sock.send(protocol.overhear(self.promiscuous))
        except OSError as exc:
            log.debug("OVERHEAR not sent: %s", exc)  # re-sent after the next ATTACH
            return
        self._medium_overhear = self.promiscuous

    async def _watch_promiscuous(self) -> None:
        while True:
            try:
                promisc = is_promiscuous(self.interface)
            except OSError as exc:
                log.debug("cannot read %s's flags: %s", self.interface, exc)
                promisc = False
            if promisc != self.promiscuous:
                log.info("%s promiscuous %s", self.interface, "on" if promisc else "off")
                self.promiscuous = promisc
            if self.attached:
                self._sync_overhear()
            await asyncio.sleep(PROMISC_POLL_S)

    def _on_tx_status(self, msg: protocol.TxStatus, now: float) -> None:
        self.stations.tx_status(msg.dst_mac, msg.retries, msg.ok, now)
        if not msg.ok:
            self.counters["tx_failed"] += 1
            self._emit(
                {
                    "event": "tx-failed",
                    "mac": format_mac(msg.dst_mac),
                    "retries": msg.retries,
                    "frame": msg.frame.hex(),
                }
            )

    # --- control socket ---------------------------------------------------------------

    def _emit(self, event: dict) -> None:
        if self.control.subscribers:
            self.control.publish(event)

    async def _housekeeping(self) -> None:
        """Expire silent stations once a second (mac80211's sta cleanup timer)."""
        while True:
            await asyncio.sleep(1.0)
            for mac in self.stations.expire(time.monotonic()):
                self._emit({"event": "station-gone", "mac": format_mac(mac), "reason": "inactive"})

    def stats(self) -> dict:
        return {
            "ok": True,
            "lab": self.lab,
            "node": self.node,
            "interface": self.interface,
            "mac": format_mac(self.mac),
            "attached": self.attached,
            "stations": len(self.stations.by_mac),
            "promiscuous": self.promiscuous,
            **self.counters,
            "subscriber_drops": self.control.dropped,
        }

    def handle_request(self, req: dict) -> dict:
        cmd = req["cmd"]
        if cmd == "stations":
            return {"ok": True, "stations": self.stations.dump(time.monotonic())}
        if cmd in ("stats", "ping"):
            return self.stats()
        raise ValueError(f"unknown cmd {cmd!r} (stations, stats, ping, subscribe)")


# --- client ---------------------------------------------------------------------------


def request(control_path: Path | str, req: dict, timeout: float = 3.0) -> dict:
    """Send one JSON request to a radio's control socket and return its reply."""
    return jsonlines.request(control_path, req, timeout)


# --- command line -------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lab", required=True, help="lab name")
    parser.add_argument("--node", required=True, help="node name (n1, n2, ...)")
    parser.add_argument("--interface", default=INTERFACE, help="TAP name (default radio0)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--medium", help="medium socket path (default: the lab's medium.sock under the rundir)"
    )
    where.add_argument(
        "--medium-udp",
        metavar="HOST:PORT",
        help="reach the medium over UDP instead (docker labs; the medium's --udp)",
    )
    parser.add_argument(
        "--station-expiry",
        type=float,
        default=DEFAULT_EXPIRY_S,
        metavar="S",
        help="forget a station after S seconds without frames (default 60, as mac80211 IBSS)",
    )


def run(args: argparse.Namespace) -> int:
    from manetkit.errors import UserError

    try:
        paths.check_lab_name(args.lab)
        node_id_of(args.node)
        # AF_UNIX's 107 bytes: the sockets it binds, and the medium's it connects to
        bound = [paths.radio_control_socket(args.lab, args.node)]
        medium_path = None
        if not getattr(args, "medium_udp", None):
            bound.append(paths.radio_socket(args.lab, args.node))
            medium_path = paths.socket_option(
                args.medium, "--medium", paths.medium_socket(args.lab)
            )
        for sock in bound:
            paths.check_socket_path(sock, "radio socket", paths.rundir_hint())
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    if args.station_expiry <= 0:
        raise UserError("--station-expiry must be > 0 seconds")
    medium_udp = None
    if getattr(args, "medium_udp", None):
        try:
            medium_udp = protocol.udp_address(args.medium_udp)
        except ValueError as exc:
            raise UserError(f"--medium-udp {exc}") from None
    radio = Radio(
        args.lab,
        args.node,
        medium_path=medium_path,
        medium_udp=medium_udp,
        socket_path=paths.radio_socket(args.lab, args.node),
        control_path=paths.radio_control_socket(args.lab, args.node),
        interface=args.interface,
        station_expiry_s=args.station_expiry,
    )
    radio.create_interface()
    return runner.run(radio.run())


def main(argv: list[str] | None = None) -> int:
    """``python -m manetkit.lab.radio``: the same as ``manetkit lab radio``, lighter to start."""
    parser = argparse.ArgumentParser(prog="manetkit lab radio", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from manetkit.errors import UserError

    try:
        return run(args)
    except UserError as exc:
        print(f"manetkit: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
