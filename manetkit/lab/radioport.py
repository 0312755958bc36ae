"""One node's end of the lab's air: its TAP ``radio0``, station table and control socket.

A :class:`RadioPort` is what a node's radio *is*, whoever runs it: the medium process
owns every node's port in a namespace lab (``manetkit.lab.sharedradios``, no process per
node), a radio process owns one in a docker lab or with ``lab up --radios process``
(``manetkit.lab.radio``, which relays over a datagram socket). Either way the node sees
the same thing:

- a TAP ``radio0`` (IFF_TAP|IFF_NO_PI, no offloads: every frame read is complete) with
  MAC ``protocol.node_mac(I)``, MTU 1500, carrier off until it is on the air (like a
  Wi-Fi card that has not joined the IBSS yet);
- frames the medium delivers written to the TAP; other nodes' unicasts that it lets the
  node overhear only while ``radio0`` is promiscuous (IFF_PROMISC, polled every
  ``PROMISC_POLL_S``), as a mac80211 IBSS interface does;
- the station table (``manetkit.lab.stations``) fed by delivered frames' signal levels
  and by the medium's tx status, served on a JSON-lines control socket
  (``paths.radio_control_socket``: ``stations``, ``stats``, ``ping``, and ``subscribe``
  for the typed events of :mod:`manetkit.radioevents`) to the node's software (the
  daemon's ``lab`` link-sensing backend);
- counters of the frames the lab lost outside the medium's model (:meth:`unmodelled`):
  writes the TAP refused, frames the kernel dropped because the TAP's queue was full
  (the relay read too slowly: ``tx_dropped`` of ``radio0`` in ``/proc/net/dev``), events
  a slow subscriber missed, and (a radio process) frames its socket could not send.

The hot paths (:meth:`read_tap`, :meth:`deliver`) do no parsing beyond the bytes the
station table needs and no per-frame allocation beyond the frame itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import struct
import time

from manetkit import jsonlines
from manetkit.lab.medium import protocol
from manetkit.lab.stations import DEFAULT_EXPIRY_S, StationTable
from manetkit.macaddr import format_mac
from manetkit.radioevents import RadioEvent, StationGone, StationNew, TxFailed, to_wire
from manetkit.tuntap import open_tap, set_carrier

log = logging.getLogger("manetkit.lab.radio")

INTERFACE = "radio0"
MTU = 1500
# Frames read from the TAP per readiness callback before yielding to the other fds;
# large enough that the syscalls dominate, small enough to stay responsive.
BURST = 256
# Events queued per control-socket subscriber; beyond this they are dropped and counted.
SUBSCRIBER_QUEUE = 4096
# How often radio0's IFF_PROMISC is read (an ioctl; netlink would need a monitor socket
# for one bit). A daemon that turns promiscuous mode on overhears within this delay.
PROMISC_POLL_S = 0.5

# linux/sockios.h, linux/if.h, linux/if_arp.h
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
SIOCSIFMTU = 0x8922
SIOCSIFHWADDR = 0x8924
IFF_UP = 0x1
IFF_PROMISC = 0x100
ARPHRD_ETHER = 1


def node_id_of(node: str) -> int:
    """``n7`` -> 7 (node names are n1..nN)."""
    if len(node) < 2 or node[0] != "n" or not node[1:].isdigit() or int(node[1:]) < 1:
        raise ValueError(f"node name {node!r}: expected n1, n2, ...")
    return int(node[1:])


def _ifreq(name: str, payload: bytes = b"") -> bytes:
    return struct.pack("16s", name.encode()) + payload.ljust(24, b"\0")


def interface_flags(sock: socket.socket, name: str) -> int:
    """``name``'s flags (SIOCGIFFLAGS) in the namespace ``sock`` was created in.

    It reports the flags set by ``ip link set promisc on`` / netlink (dev->gflags), not
    the counter packet sockets raise for tcpdump, so a capture does not turn overhearing
    on."""
    res = fcntl.ioctl(sock, SIOCGIFFLAGS, _ifreq(name))
    return struct.unpack_from("16xH", res)[0]


def configure_link(sock: socket.socket, name: str, mac: bytes, mtu: int = MTU) -> None:
    """MAC, MTU and admin state up (netdevice(7) ioctls, as ``ip link set`` does them),
    in the namespace ``sock`` was created in."""
    fcntl.ioctl(sock, SIOCSIFHWADDR, _ifreq(name, struct.pack("H6s", ARPHRD_ETHER, mac)))
    fcntl.ioctl(sock, SIOCSIFMTU, _ifreq(name, struct.pack("i", mtu)))
    flags = interface_flags(sock, name)
    fcntl.ioctl(sock, SIOCSIFFLAGS, _ifreq(name, struct.pack("H", flags | IFF_UP)))


def netdev_tx_dropped(text: str, name: str) -> int | None:
    """``tx_dropped`` of interface ``name`` in a ``/proc/net/dev`` text (None if absent).

    Columns after ``name:``: 8 receive counters, then bytes, packets, errs, drop of
    transmit (proc_net(5))."""
    for line in text.splitlines()[2:]:
        iface, sep, rest = line.partition(":")
        if sep and iface.strip() == name:
            fields = rest.split()
            return int(fields[11]) if len(fields) >= 12 else None
    return None


class TapLost(OSError):
    """radio0 was deleted under its reader (``ip link del``: the fd reads EBADFD)."""


class RadioPort:
    """One node's radio: see the module docstring. Used by an asyncio shell (the medium
    process or a radio process), which owns the loop and calls in with ``now``."""

    def __init__(
        self,
        lab: str,
        node: str,
        *,
        control_path: os.PathLike | str,
        interface: str = INTERFACE,
        station_expiry_s: float = DEFAULT_EXPIRY_S,
    ) -> None:
        self.lab = lab
        self.node = node
        self.node_id = node_id_of(node)
        self.mac = protocol.node_mac(self.node_id)
        self.interface = interface
        self.stations = StationTable(station_expiry_s)
        self.on_air = False  # carrier on: the medium takes this node's frames
        self.promiscuous = False  # radio0's IFF_PROMISC, as last polled
        self.tap_fd = -1
        self._ifsock: socket.socket | None = None  # ioctls on radio0's namespace
        self._netdev_fd = -1  # /proc/self/net/dev of radio0's namespace
        self._kernel_drops_base = 0  # tx_dropped of an earlier radio0 (re-created)
        self._kernel_drops_seen = 0
        self.counters = {
            "tx_frames": 0,  # TAP -> medium
            "rx_frames": 0,  # medium -> TAP
            "tx_dropped": 0,  # not sent to the medium (a radio process: socket refused)
            "rx_dropped": 0,  # the TAP refused the write
            "malformed": 0,  # datagrams from the medium that did not parse
            "tx_failed": 0,  # unicast failures the medium reported
            "rx_overheard": 0,  # other nodes' unicasts written to the TAP (promiscuous)
            "rx_overheard_dropped": 0,  # ... that arrived while radio0 was not promiscuous
            "attach_sent": 0,  # ATTACHes a radio process sent (until the medium answers)
            "medium_unreachable": 0,  # ... refused: no medium there (UDP: ICMP unreachable)
        }
        self.control = jsonlines.LineServer(
            control_path,
            self.handle_request,
            subscribe=True,
            queue_lines=SUBSCRIBER_QUEUE,
            name=f"{node}'s radio control socket",
        )

    # --- the TAP ----------------------------------------------------------------------

    def create_tap(self) -> None:
        """Make radio0 in the current network namespace, carrier off (blocking: before
        the event loop runs, or inside ``netns.entered``)."""
        if self._netdev_fd >= 0:
            self._kernel_drops_base = self.kernel_drops()
            os.close(self._netdev_fd)
        if self._ifsock is not None:
            self._ifsock.close()
        self.tap_fd = open_tap(self.interface)
        set_carrier(self.tap_fd, False)
        self._ifsock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        configure_link(self._ifsock, self.interface, self.mac)
        self._netdev_fd = os.open("/proc/self/net/dev", os.O_RDONLY | os.O_CLOEXEC)

    def set_on_air(self, on: bool) -> None:
        """Carrier on (the medium accepted the node) or off."""
        self.on_air = on
        if self.tap_fd >= 0:
            set_carrier(self.tap_fd, on)

    def close_tap(self) -> None:
        """Close radio0's fd: the TAP is not persistent and disappears with it."""
        if self.tap_fd >= 0:
            os.close(self.tap_fd)
            self.tap_fd = -1
        self.on_air = False

    def close(self) -> None:
        self.close_tap()
        if self._ifsock is not None:
            self._ifsock.close()
            self._ifsock = None
        if self._netdev_fd >= 0:
            os.close(self._netdev_fd)
            self._netdev_fd = -1

    def read_tap(self, limit: int = BURST) -> list[bytes]:
        """The frames the node sent, until EAGAIN or ``limit``; unicasts are counted in
        the station table. Raises :class:`TapLost` (with what was read before lost) when
        radio0 was deleted."""
        tap = self.tap_fd
        read = os.read
        sent = self.stations.sent
        frames: list[bytes] = []
        append = frames.append
        try:
            for _ in range(limit):
                frame = read(tap, 65536)
                if not frame[0] & 1:  # unicast: the station table counts it
                    sent(frame[:6], len(frame))
                append(frame)
        except BlockingIOError:
            pass
        except OSError as exc:
            self.counters["tx_frames"] += len(frames)
            lost = TapLost(exc.errno, exc.strerror)
            lost.frames = frames  # type: ignore[attr-defined]
            raise lost from None
        self.counters["tx_frames"] += len(frames)
        return frames

    def deliver(self, signal_dbm: float, frame: bytes | memoryview, now: float) -> None:
        """A frame the medium delivered to this node (to it, broadcast, or overheard)."""
        if not frame[0] & 1 and frame[:6] != self.mac:
            self._overheard(signal_dbm, frame, now)
            return
        src = bytes(frame[6:12])
        st = self.stations.by_mac.get(src)
        if st is None:
            self.stations.received(src, signal_dbm, len(frame), now)
            self.emit(StationNew(src, signal_dbm))
        else:  # inline StationTable.received for the common case
            st.signal_dbm = signal_dbm
            st.signal_avg_dbm += (signal_dbm - st.signal_avg_dbm) / 8
            st.last_active = now
            st.rx_packets += 1
            st.rx_bytes += len(frame)
            st.rx_signal_frames += 1
            st.rx_signal_sum_dbm += signal_dbm
        try:
            os.write(self.tap_fd, frame)
            self.counters["rx_frames"] += 1
        except OSError:
            self.counters["rx_dropped"] += 1

    def _overheard(self, signal_dbm: float, frame: bytes | memoryview, now: float) -> None:
        """Another node's unicast: to the TAP only while radio0 is promiscuous."""
        if not self.promiscuous:
            self.counters["rx_overheard_dropped"] += 1
            return
        src = bytes(frame[6:12])
        if self.stations.overheard(src, signal_dbm, now):
            self.emit(StationNew(src, signal_dbm))
        try:
            os.write(self.tap_fd, frame)
            self.counters["rx_overheard"] += 1
        except OSError:
            self.counters["rx_dropped"] += 1

    def tx_status(self, dst_mac: bytes, retries: int, ok: bool, frame: bytes, now: float) -> None:
        """The medium's report of a unicast's fate (802.11 tx status)."""
        self.stations.tx_status(dst_mac, retries, ok, now)
        if not ok:
            self.counters["tx_failed"] += 1
            self.emit(TxFailed(dst_mac, retries, frame))

    def poll_promiscuous(self) -> bool:
        """Read radio0's IFF_PROMISC; True if it changed."""
        try:
            promisc = bool(interface_flags(self._ifsock, self.interface) & IFF_PROMISC)
        except (OSError, TypeError) as exc:
            log.debug("cannot read %s's flags: %s", self.interface, exc)
            promisc = False
        if promisc == self.promiscuous:
            return False
        log.info("%s %s promiscuous %s", self.node, self.interface, "on" if promisc else "off")
        self.promiscuous = promisc
        return True

    def expire(self, now: float) -> None:
        """Forget silent stations (mac80211's sta cleanup timer), telling subscribers."""
        for mac in self.stations.expire(now):
            self.emit(StationGone(mac, "inactive"))

    # --- what the lab lost outside the model --------------------------------------------

    def kernel_drops(self) -> int:
        """Frames the kernel dropped on their way into the TAP (its queue was full: the
        relay did not read in time), over every radio0 this port made."""
        if self._netdev_fd < 0:
            return self._kernel_drops_base
        with contextlib.suppress(OSError, ValueError):
            text = os.pread(self._netdev_fd, 1 << 16, 0).decode()
            got = netdev_tx_dropped(text, self.interface)
            if got is not None:
                self._kernel_drops_seen = got
        return self._kernel_drops_base + self._kernel_drops_seen

    def unmodelled(self) -> dict[str, int]:
        """Frames (and events) lost that the medium's model did not decide to lose; the
        keys are the ones ``manetkit.lab.fidelity`` sums over the lab's radios."""
        c = self.counters
        return {
            "radio_socket_drops": c["tx_dropped"],
            "radio_tap_write_drops": c["rx_dropped"],
            "radio_tap_kernel_drops": self.kernel_drops(),
            "radio_event_drops": self.control.dropped,
        }

    # --- control socket ---------------------------------------------------------------

    def emit(self, ev: RadioEvent) -> None:
        if self.control.subscribers:
            self.control.publish(to_wire(ev))

    def stats(self) -> dict:
        return {
            "ok": True,
            "lab": self.lab,
            "node": self.node,
            "interface": self.interface,
            "mac": format_mac(self.mac),
            "attached": self.on_air,
            "stations": len(self.stations.by_mac),
            "promiscuous": self.promiscuous,
            **self.counters,
            "subscriber_drops": self.control.dropped,
            "unmodelled": self.unmodelled(),
        }

    def handle_request(self, req: dict) -> dict:
        cmd = req["cmd"]
        if cmd == "stations":
            return {"ok": True, "stations": self.stations.dump(time.monotonic())}
        if cmd in ("stats", "ping"):
            return self.stats()
        raise ValueError(f"unknown cmd {cmd!r} (stations, stats, ping, subscribe)")


def sum_unmodelled(ports: list[dict[str, int]]) -> dict[str, int]:
    """Per-radio :meth:`RadioPort.unmodelled` counters summed over a lab's radios."""
    out: dict[str, int] = {}
    for d in ports:
        for k, v in d.items():
            out[k] = out.get(k, 0) + int(v)
    return out
