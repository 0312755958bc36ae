"""Socket glue shared by the relay and the server: the asyncio protocol of one side, the
ways a TCP socket is closed (clean FIN, or RST so an app never reads a cut stream as
complete), and the kernel calls behind :mod:`manetkit.proxy.modes`' plain values
(setsockopt of a mode's knobs, getsockopt of TCP_INFO)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable
from typing import Protocol

from manetkit.proxy import modes

HIGH_WATER = 1 << 20  # bytes queued on a socket before the other side pauses

_LINGER_RST = struct.pack("ii", 1, 0)
_LINGER_OFF = struct.pack("ii", 0, 0)


def apply_options(sock: socket.socket, opts: list[modes.SockOpt]) -> None:
    for o in opts:
        sock.setsockopt(o.level, o.name, o.value)


def tcp_info(sock: socket.socket) -> modes.TcpInfo | None:
    """TCP_INFO of a connected socket, None if the kernel does not say."""
    try:
        raw = sock.getsockopt(modes.IPPROTO_TCP, modes.TCP_INFO, modes.TCP_INFO_STRUCT.size)
    except OSError:
        return None
    return modes.parse_tcp_info(raw)


def arm_rst_on_close(sock: socket.socket) -> None:
    """App sockets close with RST unless the session ended cleanly: even when the proxy
    is killed (SIGKILL), the kernel then resets the app instead of sending a FIN that
    would read as a complete stream."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)


def graceful_close(transport: asyncio.Transport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.fileno() >= 0:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_OFF)
    transport.close()


def reset_socket(transport: asyncio.Transport | None) -> None:
    """Close with RST (SO_LINGER 0): the app sees 'connection reset', never a clean EOF."""
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.fileno() >= 0:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
    transport.abort()


class Owner(Protocol):
    """What a :class:`Side` reports to (the relay)."""

    def on_data(self, side: Side, data: bytes) -> None: ...
    def on_eof(self, side: Side) -> bool: ...
    def on_lost(self, side: Side, exc: Exception | None) -> None: ...
    def on_pause(self, side: Side, paused: bool) -> None: ...


class Side(asyncio.Protocol):
    """Protocol glue: forwards callbacks to the relay, tagged with which side it is."""

    def __init__(
        self, owner: Owner, kind: str, on_made: Callable[[Side], None] | None = None
    ) -> None:
        self.owner = owner
        self.kind = kind  # "app" or "mesh"
        self.transport: asyncio.Transport | None = None
        self.lost = False
        # runs inside connection_made: an event loop may deliver data in the same
        # iteration, so the relay must know this side before the first data_received
        self.on_made = on_made

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        transport.set_write_buffer_limits(high=HIGH_WATER)  # type: ignore[attr-defined]
        if self.on_made is not None:
            self.on_made(self)

    def data_received(self, data: bytes) -> None:
        self.owner.on_data(self, data)

    def eof_received(self) -> bool:
        return self.owner.on_eof(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.owner.on_lost(self, exc)

    def pause_writing(self) -> None:
        self.owner.on_pause(self, True)

    def resume_writing(self) -> None:
        self.owner.on_pause(self, False)
