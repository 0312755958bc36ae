"""What a peer proxy may ask of this one (the acceptor), so it is no open relay.

* A session's destination (OPEN) must lie in the configured mesh prefix: the acceptor
  then reaches only what a direct TCP connection over the mesh could reach. Loopback,
  unspecified, multicast and broadcast addresses are refused whatever the prefix, and
  the host's other local addresses (outside the prefix: a LAN, a container bridge) only
  pass with ``allow_local: true``.
* RESUME (and a repeated OPEN) is honoured only for a session created by the same peer
  address; session ids are 128 random bits (``secrets.token_bytes``), so they cannot be
  guessed either.
* A RESUME whose delivered offset lies outside what was sent and not yet acknowledged
  is refused with RESET before the live leg is touched (``Session.resume_refusal``);
  such offsets on a live leg (ACK, DATA) reset the session (:mod:`manetkit.proxy.session`).

Each refusal is counted in status and logged once per (reason, peer), not per packet.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Network

log = logging.getLogger("manetkit.proxy")

LOGGED_MAX = 1024  # distinct (reason, peer) pairs remembered for log-once


def is_local_address(addr: IPv4Address) -> bool:
    """True if ``addr`` is one of this host's (namespace's) addresses: bind(2) to it
    without IP_FREEBIND succeeds only then (EADDRNOTAVAIL otherwise)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((str(addr), 0))
        return True
    except OSError:
        return False
    finally:
        s.close()


def destination_refusal(
    addr: IPv4Address,
    mesh_prefix: IPv4Network,
    allow_local: bool,
    is_local: Callable[[IPv4Address], bool] = is_local_address,
) -> str | None:
    """Why a peer may not ask for ``addr`` (None: it may)."""
    if addr.is_unspecified or addr.is_multicast or addr == IPv4Address("255.255.255.255"):
        return f"destination {addr} is not a host address"
    if addr in mesh_prefix and addr != mesh_prefix.broadcast_address:
        if addr.is_loopback and not allow_local:
            return f"destination {addr} is loopback (allow_local is off)"
        return None
    if allow_local and (addr.is_loopback or is_local(addr)):
        return None
    if addr.is_loopback or is_local(addr):
        return f"destination {addr} is a local address outside {mesh_prefix} (allow_local is off)"
    return f"destination {addr} is outside the mesh prefix {mesh_prefix}"


class Refusals:
    """Counts refusals by reason and logs each (reason, peer) once."""

    def __init__(self, counters: dict[str, int]) -> None:
        self.counters = counters
        self._logged: set[tuple[str, str]] = set()

    def refuse(self, counter: str, peer: str, detail: str) -> None:
        self.counters[counter] = self.counters.get(counter, 0) + 1
        key = (counter, peer)
        if key in self._logged:
            return
        if len(self._logged) >= LOGGED_MAX:
            self._logged.clear()  # bounded: a new burst is logged again, once
        self._logged.add(key)
        with contextlib.suppress(Exception):
            log.warning("refused %s from %s: %s (logged once)", counter, peer, detail)
