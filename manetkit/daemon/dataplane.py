"""The data plane: TUN ``mesh0`` on one side, the radio (AF_PACKET) on the other.

Frames on the air are plain Ethernet II: ``dst MAC | src MAC | ethertype | IPv4 packet``
(docs/architecture.md "Processes and data flow"; 0x88B5 is IEEE 802's local experimental ethertype). The packet
socket is bound with that ethertype as its protocol, so the kernel filters out every
other frame before it reaches Python, and PACKET_IGNORE_OUTGOING stops our own
transmissions from looping back.

Frames whose destination MAC is neither ours nor a group address (a promiscuous radio
overheard them) never reach the normal receive path: they go to a separate
``overheard`` handler when the engine wants them, else they are counted (``not_for_us``)
and dropped.

The hot path is a tight loop (docs/architecture.md "Performance notes"): on readiness each fd is
drained until EAGAIN, each frame costs one recv and one slice, checked with a few byte
comparisons, and handed to a callback. Counters are plain int attributes (a Counter's
hashing costs more than the check it counts). No per-packet asyncio work.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
from collections.abc import Callable

from manetkit.daemon.flowcount import FlowCounter
from manetkit.tuntap import open_tun

# linux/if_packet.h
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
# asm-generic/socket.h
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
SOCKET_BUFFER = 4 << 20

ETH_HLEN = 14
BROADCAST_MAC = b"\xff" * 6
MAX_FRAME = 65536
# Frames handled per readiness event before yielding to the loop, so one busy fd cannot
# starve the other or the timers (the kernel keeps the rest queued).
BATCH = 256

RadioHandler = Callable[[bytes, bytes], None]  # (src_mac, ipv4 packet)
TunHandler = Callable[[bytes], None]  # (ipv4 packet)

# errno of a packet socket whose interface was deleted (or went down): ENETDOWN once on
# recv, then silence; ENXIO/ENODEV on send. The shell re-opens the socket (docs/daemon.md).
RADIO_GONE = frozenset({errno.ENETDOWN, errno.ENXIO, errno.ENODEV})


def open_radio(interface: str, ethertype: int) -> socket.socket:
    """A raw packet socket on ``interface`` that receives only ``ethertype`` frames."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ethertype))
    try:
        sock.bind((interface, ethertype))
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        for force, plain in (
            (SO_RCVBUFFORCE, socket.SO_RCVBUF),
            (SO_SNDBUFFORCE, socket.SO_SNDBUF),
        ):
            try:
                # FORCE variants (root) exceed net.core.*mem_max; bursts of a TCP window
                # must not overflow while the loop is busy with the other fd.
                sock.setsockopt(socket.SOL_SOCKET, force, SOCKET_BUFFER)
            except OSError:
                sock.setsockopt(socket.SOL_SOCKET, plain, SOCKET_BUFFER)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class DataPlane:
    """Frames in and out. Owns the TUN fd and the packet socket (not their configuration)."""

    def __init__(self, tun_fd: int, radio: socket.socket, ethertype: int) -> None:
        self.tun_fd = tun_fd
        self.radio = radio
        self.ethertype = ethertype
        self._etype = struct.pack("!H", ethertype)
        self.mac: bytes = radio.getsockname()[4][:6]
        self._headers: dict[bytes, bytes] = {}
        # counters (read by status)
        self.rx_frames = 0
        self.rx_bytes = 0
        self.tx_frames = 0
        self.tx_bytes = 0
        self.tun_rx = 0
        self.tun_tx = 0
        self.malformed_short = 0
        self.malformed_ethertype = 0
        self.malformed_ipv4 = 0
        self.tun_not_ipv4 = 0
        self.tx_errors = 0
        self.tun_write_errors = 0
        self.not_for_us = 0
        self.rx_overheard = 0
        self.radio_lost: OSError | None = None  # set when the radio interface went away
        # per destination of our apps' packets, per source of the packets we deliver
        self.originated = FlowCounter()
        self.delivered = FlowCounter()

    @classmethod
    def open(cls, tun_name: str, interface: str, ethertype: int) -> DataPlane:
        fd = open_tun(tun_name)
        try:
            sock = open_radio(interface, ethertype)
        except OSError:
            os.close(fd)
            raise
        return cls(fd, sock, ethertype)

    def close(self) -> None:
        self.radio.close()
        if self.tun_fd >= 0:
            os.close(self.tun_fd)
            self.tun_fd = -1

    # -- radio side
    def drain_radio(
        self, handler: RadioHandler, batch: int = BATCH, overheard: RadioHandler | None = None
    ) -> int:
        """Receive up to ``batch`` frames, handing each valid IPv4 packet to ``handler``
        (frames to our MAC or a group address) or to ``overheard`` (unicasts to others)."""
        recv = self.radio.recv
        etype = self._etype
        me = self.mac
        n = 0
        while n < batch:
            try:
                frame = recv(MAX_FRAME)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno in RADIO_GONE:
                    self.radio_lost = exc
                    break
                raise
            n += 1
            other = not frame[0] & 1 and frame[:6] != me
            if other and overheard is None:
                self.not_for_us += 1
                continue
            flen = len(frame)
            if flen < ETH_HLEN + 20:
                self.malformed_short += 1
                continue
            if frame[12:14] != etype:
                self.malformed_ethertype += 1
                continue
            # IPv4 sanity: version 4, IHL >= 5, total length within the frame (an
            # Ethernet frame may be padded to 60 bytes: the IP length trims that).
            vihl = frame[14]
            total = (frame[16] << 8) | frame[17]
            if vihl >> 4 != 4 or (vihl & 15) < 5 or total < (vihl & 15) * 4 or total > flen - 14:
                self.malformed_ipv4 += 1
                continue
            if other:
                self.rx_overheard += 1
                overheard(frame[6:12], frame[14 : 14 + total])
                continue
            self.rx_frames += 1
            self.rx_bytes += total
            handler(frame[6:12], frame[14 : 14 + total])
        return n

    def send(self, mac: bytes, packet: bytes) -> bool:
        """Transmit ``packet`` to ``mac`` (BROADCAST_MAC for everyone); False if refused."""
        hdr = self._headers.get(mac)
        if hdr is None:
            hdr = self._headers[mac] = mac + self.mac + self._etype
        try:
            self.radio.send(hdr + packet)
        except OSError as exc:
            # ENOBUFS/EAGAIN: the interface queue is full; like a full 802.11 queue, drop.
            self.tx_errors += 1
            if exc.errno in RADIO_GONE:
                self.radio_lost = exc
            return False
        self.tx_frames += 1
        self.tx_bytes += len(packet)
        return True

    # -- TUN side
    def reopen_radio(self, interface: str) -> None:
        """A new packet socket on ``interface`` (it was deleted and came back)."""
        sock = open_radio(interface, self.ethertype)
        self.radio.close()
        self.radio = sock
        self.mac = sock.getsockname()[4][:6]
        self._headers.clear()
        self.radio_lost = None

    def refresh_mac(self) -> bool:
        """Re-read the radio's MAC (getsockname reads the device's current address);
        True if it changed. A re-plugged interface may get its address only after it
        appeared (the lab radio sets it after creating the TAP; ``ip link set address``)."""
        try:
            mac = self.radio.getsockname()[4][:6]
        except OSError:
            return False
        if mac == self.mac:
            return False
        self.mac = mac
        self._headers.clear()
        return True

    def reopen_tun(self, tun_name: str) -> None:
        """A new TUN ``tun_name`` (the old one was deleted: its fd reads EBADFD)."""
        if self.tun_fd >= 0:
            os.close(self.tun_fd)
            self.tun_fd = -1
        self.tun_fd = open_tun(tun_name)

    def drain_tun(self, handler: TunHandler, batch: int = BATCH) -> int:
        """Read up to ``batch`` packets; an OSError other than EAGAIN (EBADFD: the TUN
        was deleted) propagates to the shell."""
        read = os.read
        fd = self.tun_fd
        n = 0
        while n < batch:
            try:
                packet = read(fd, MAX_FRAME)
            except BlockingIOError:
                break
            n += 1
            # IPv6 or anything else the kernel routes to mesh0 is not ours to carry.
            if len(packet) < 20 or packet[0] >> 4 != 4:
                self.tun_not_ipv4 += 1
                continue
            self.tun_rx += 1
            self.originated.add(packet[16:20], len(packet))
            handler(packet)
        return n

    def write_tun(self, packet: bytes) -> None:
        try:
            os.write(self.tun_fd, packet)
        except OSError:
            self.tun_write_errors += 1
            return
        self.tun_tx += 1
        self.delivered.add(packet[12:16], len(packet))

    def counters(self) -> dict[str, int]:
        return {
            "rx_frames": self.rx_frames,
            "rx_bytes": self.rx_bytes,
            "tx_frames": self.tx_frames,
            "tx_bytes": self.tx_bytes,
            "tun_rx": self.tun_rx,
            "tun_tx": self.tun_tx,
            "malformed_short": self.malformed_short,
            "malformed_ethertype": self.malformed_ethertype,
            "malformed_ipv4": self.malformed_ipv4,
            "tun_not_ipv4": self.tun_not_ipv4,
            "tx_errors": self.tx_errors,
            "tun_write_errors": self.tun_write_errors,
            "not_for_us": self.not_for_us,
            "rx_overheard": self.rx_overheard,
        }
