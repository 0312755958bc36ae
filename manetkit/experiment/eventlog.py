"""Every daemon's events during a run, as the daemons emitted them.

A run whose metrics need them (``metrics: [atra]``, ``[flap]``) subscribes to every
node's daemon event socket (``{"cmd": "subscribe"}``, docs/daemon.md) once the warm-up is
over, and keeps each event with its node (``{"node": "n3", "event": "route-down", ...}``,
:func:`manetkit.events.to_wire`'s fields) in memory and in ``events.jsonl`` in the run's
work directory: the evidence of which route-down / route-up / predicted-failure / erdn /
ersn each node emitted, and when (``time``: Unix time, the ground truth's clock).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from pathlib import Path
from typing import Any

from manetkit import paths


class EventLog:
    """Subscribes to the daemons of ``nodes`` (those that answer) and records their
    events until :meth:`close`."""

    def __init__(self, lab: str, nodes: list[str], out: Path) -> None:
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._file = out.open("w")
        self._socks: list[socket.socket] = []
        for n in nodes:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(paths.daemon_socket(lab, n)))
                s.sendall(b'{"cmd":"subscribe"}\n')
            except OSError:
                s.close()
                continue
            self._socks.append(s)
            threading.Thread(target=self._read, args=(n, s), daemon=True).start()

    @property
    def subscribed(self) -> int:
        return len(self._socks)

    def _read(self, node: str, s: socket.socket) -> None:
        buf = b""
        with contextlib.suppress(OSError):
            while chunk := s.recv(65536):
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(ev, dict) and "event" in ev:
                        rec = {"node": node, **ev}
                        with self._lock:
                            self.events.append(rec)
                            if not self._file.closed:
                                self._file.write(json.dumps(rec) + "\n")

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def close(self) -> None:
        for s in self._socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        with self._lock:
            self._file.close()


def node_of(address: str) -> str:
    """``n7`` of a lab address ``10.42.0.7`` (10.42.(I // 256).(I % 256) beyond 254)."""
    parts = address.split(".")
    return f"n{int(parts[2]) * 256 + int(parts[3])}"
