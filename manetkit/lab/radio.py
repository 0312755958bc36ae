"""A radio process: one node's :class:`~manetkit.lab.radioport.RadioPort` relayed to the
medium over a datagram socket.

Docker labs run one per container (``manetkit lab radio --lab L --node nI --medium-udp
HOST:PORT``), since the medium cannot reach into another container's namespace; a
namespace lab runs one per node only with ``lab up --radios process`` (by default the
medium process owns every node's TAP itself: ``manetkit.lab.sharedradios``). It

- creates radio0 (``RadioPort.create_tap``) and keeps its carrier off until the medium
  has accepted the ATTACH;
- relays frames: TAP read -> TX datagram, DELIVER -> ``RadioPort.deliver``. The hot path
  is two readiness callbacks that drain their fd in a loop, with no per-frame task or
  parse beyond the bytes the station table needs;
- tells the medium (OVERHEAR) whether radio0 is promiscuous, so labs whose software never
  sets promiscuous mode pay nothing for overhearing;
- serves the port's control socket (stations, stats, typed events).

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
import logging
import signal
import socket
import struct
import sys
import time
from pathlib import Path

from manetkit import jsonlines, paths, runner
from manetkit.lab.medium import protocol
from manetkit.lab.radioport import (
    BURST,
    INTERFACE,
    PROMISC_POLL_S,
    RadioPort,
    TapLost,
    node_id_of,
)
from manetkit.lab.stations import DEFAULT_EXPIRY_S
from manetkit.macaddr import format_mac

log = logging.getLogger("manetkit.lab.radio")

__all__ = ["INTERFACE", "Radio", "node_id_of", "request"]

# Largest datagram from the medium: type + rssi + an MTU-sized frame with its header
# (bigger ones would be truncated by recv_into and are counted as malformed).
RECV_BUF = 1 + 2 + 14 + 65535
_I16 = struct.Struct("!h")
_MEDIUM_GONE = (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTCONN)


class Radio:
    """The asyncio shell of one node's radio process."""

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
        self.port = RadioPort(
            lab,
            node,
            control_path=control_path,
            interface=interface,
            station_expiry_s=station_expiry_s,
        )
        self.node_id = self.port.node_id
        self.mac = self.port.mac
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
        self.tap_lost = False  # radio0 was deleted: exit non-zero
        self._medium_overhear = False  # what the medium was last told (OVERHEAR)
        self._attached_event: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        self._pending: list[bytes] = []  # frames read, waiting for the socket to drain
        self._refused: str | None = None
        self.sock: socket.socket | None = None
        self._buf = bytearray(RECV_BUF)
        self._mv = memoryview(self._buf)

    @property
    def attached(self) -> bool:
        return self.port.on_air

    @property
    def counters(self) -> dict[str, int]:
        return self.port.counters

    # --- set-up and tear-down ---------------------------------------------------------

    def create_interface(self) -> None:
        """Make radio0 (before the event loop runs)."""
        self.port.create_tap()

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
        await self.port.control.start()
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
            await self.port.control.close()
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
        if self.port.tap_fd >= 0:
            loop.remove_reader(self.port.tap_fd)
        self.port.close()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    async def _attach_loop(self) -> None:
        """(Re-)ATTACH until the medium answers; again whenever it is lost."""
        assert self._attached_event is not None
        loop = asyncio.get_running_loop()
        fd = self.sock.fileno()
        delay = 0.05
        started = last_log = time.monotonic()
        while not self.attached:
            # uvloop closes for good a reader whose socket reports an error (EPOLLERR: the
            # ICMP port unreachable of a medium that is not up yet, or restarting): the
            # reply would then sit unread. Arm the reader afresh with every ATTACH.
            loop.remove_reader(fd)
            loop.add_reader(fd, self._on_medium_readable)
            why = "no answer"  # UDP to a host that drops it fails silently: say so too
            try:
                self.sock.connect(self.medium_addr)
                self.sock.send(protocol.attach(self.node_id))
                self.counters["attach_sent"] += 1
            except OSError as exc:
                why = str(exc)
                if exc.errno in _MEDIUM_GONE:
                    self.counters["medium_unreachable"] += 1
            if time.monotonic() - last_log > 5:
                log.warning(
                    "waiting for the medium at %s for %.0f s: %s",
                    self.medium_addr,
                    time.monotonic() - started,
                    why,
                )
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
            self.port.set_on_air(True)
            asyncio.get_running_loop().add_reader(self.port.tap_fd, self._on_tap_readable)
            log.info("attached to the medium at %s", self.medium_addr)
        assert self._attached_event is not None
        self._attached_event.set()

    def _on_medium_lost(self, exc: OSError) -> None:
        """The medium went away (restart, crash): carrier off, try to ATTACH again."""
        if not self.attached:
            return
        log.warning("medium lost (%s); re-attaching", exc)
        assert self._attached_event is not None
        self._attached_event.clear()
        loop = asyncio.get_running_loop()
        loop.remove_reader(self.port.tap_fd)
        loop.remove_writer(self.sock.fileno())
        self._pending = []
        self.port.set_on_air(False)
        loop.create_task(self._attach_loop())

    # --- hot path ---------------------------------------------------------------------

    def _on_tap_readable(self) -> None:
        try:
            frames = self.port.read_tap(BURST)
        except TapLost as exc:
            frames = exc.frames  # type: ignore[attr-defined]
            self._send_frames(frames)
            self._tap_lost(exc)
            return
        self._send_frames(frames)

    def _send_frames(self, frames: list[bytes]) -> None:
        send = self.sock.sendmsg
        hdr = (bytes([protocol.TX]),)
        for k, frame in enumerate(frames):
            try:
                send((*hdr, frame))
            except BlockingIOError:
                # The medium's queue is full: hold the rest of the burst and stop reading
                # the TAP until the socket is writable, so the kernel's queue absorbs what
                # follows (what it cannot hold shows as radio0's tx_dropped).
                self._pending = frames[k:]
                if self.port.tap_fd >= 0:
                    loop = asyncio.get_running_loop()
                    loop.remove_reader(self.port.tap_fd)
                    loop.add_writer(self.sock.fileno(), self._on_medium_writable)
                return
            except OSError as exc:
                if exc.errno in _MEDIUM_GONE:
                    self.counters["tx_dropped"] += len(frames) - k
                    self._on_medium_lost(exc)
                    return
                raise

    def _tap_lost(self, exc: OSError) -> None:
        """radio0 was deleted under us (``ip link del``, like a Wi-Fi card unplugged):
        the TAP fd polls EPOLLERR and reads EBADFD for ever. Say so once and exit
        non-zero; starting the radio again re-creates radio0."""
        log.error(
            "%s was removed (%s): exiting; start the radio again to re-create it",
            self.interface,
            exc.strerror,
        )
        self.tap_lost = True
        asyncio.get_running_loop().remove_reader(self.port.tap_fd)
        assert self._stop is not None
        self._stop.set()

    def _on_medium_writable(self) -> None:
        loop = asyncio.get_running_loop()
        hdr = bytes([protocol.TX])
        while self._pending:
            try:
                self.sock.sendmsg((hdr, self._pending[0]))
            except BlockingIOError:
                return
            except OSError as exc:
                self.counters["tx_dropped"] += len(self._pending)
                self._pending = []
                self._on_medium_lost(exc)
                return
            self._pending.pop(0)
        loop.remove_writer(self.sock.fileno())
        loop.add_reader(self.port.tap_fd, self._on_tap_readable)

    def _on_medium_readable(self) -> None:
        sock = self.sock
        buf = self._buf
        mv = self._mv
        deliver = self.port.deliver
        counters = self.counters
        now = time.monotonic()
        for _ in range(BURST):
            try:
                n = sock.recv_into(buf)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno in _MEDIUM_GONE:  # UDP: ICMP port unreachable
                    counters["medium_unreachable"] += 1
                    self._on_medium_lost(exc)
                    break
                counters["malformed"] += 1
                continue
            if n >= 17 and buf[0] == protocol.DELIVER:
                deliver(_I16.unpack_from(buf, 1)[0] / 100.0, mv[3:n], now)
                continue
            try:
                msg = protocol.parse(bytes(mv[:n]))
            except protocol.ProtocolError as exc:
                counters["malformed"] += 1
                log.debug("malformed datagram from the medium: %s", exc)
                continue
            if isinstance(msg, protocol.TxStatus):
                self.port.tx_status(msg.dst_mac, msg.retries, msg.ok, msg.frame, now)
            elif isinstance(msg, protocol.Attached):
                self._on_attached(msg)
            elif isinstance(msg, protocol.Refused):
                self._refused = msg.reason
                assert self._stop is not None
                self._stop.set()
            else:  # a radio -> medium message, or a DELIVER without a frame
                counters["malformed"] += 1

    def _sync_overhear(self) -> None:
        """Tell the medium whether to send us other nodes' unicasts (radio0 promiscuous)."""
        promisc = self.port.promiscuous
        if self._medium_overhear == promisc or self.sock is None:
            return
        try:
            self.sock.send(protocol.overhear(promisc))
        except OSError as exc:
            log.debug("OVERHEAR not sent: %s", exc)  # re-sent after the next ATTACH
            return
        self._medium_overhear = promisc

    async def _watch_promiscuous(self) -> None:
        while True:
            self.port.poll_promiscuous()
            if self.attached:
                self._sync_overhear()
            await asyncio.sleep(PROMISC_POLL_S)

    async def _housekeeping(self) -> None:
        """Expire silent stations once a second (mac80211's sta cleanup timer)."""
        while True:
            await asyncio.sleep(1.0)
            self.port.expire(time.monotonic())

    def stats(self) -> dict:
        return self.port.stats()


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
