"""What a peer proxy may ask of this one (the acceptor), so it is no open relay and
cannot be turned on itself.

* Who may connect: the mesh-leg listener is bound to this node's mesh address, and a
  leg is accepted only from an address inside the mesh prefix that is not one of this
  host's own (a local process dialling our mesh address arrives over ``lo``, past any
  per-interface firewall rule, and could chain the proxy into itself).
* A session's destination (OPEN) must be this node: the address the leg was dialled on
  (the initiator always dials the destination's own proxy), on any port but the proxy's
  own two (``listen_port``, ``peer_port``): otherwise an OPEN could make the acceptor
  connect to another host, or to itself in a loop.
* A RESUME (and a repeated OPEN) must prove the session key and carry the exact next
  epoch (:mod:`manetkit.proxy.channel`, ``Session.check_hello``), from the peer address
  that opened the session; its delivered offset must lie in what was sent and not yet
  acknowledged. Anything else is refused with RESET (or a tagged STALE) before the live
  leg is touched.

Each refusal is counted in status and logged once per (reason, peer), not per packet.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Network, IPv6Address

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


def peer_refusal(
    peer: IPv4Address,
    mesh_prefix: IPv4Network,
    is_local: Callable[[IPv4Address], bool] = is_local_address,
) -> str | None:
    """Why a leg from ``peer`` is not taken (None: it is)."""
    if peer not in mesh_prefix or peer in (
        mesh_prefix.network_address,
        mesh_prefix.broadcast_address,
    ):
        return f"peer {peer} is outside the mesh prefix {mesh_prefix}"
    if is_local(peer):
        return f"peer {peer} is this host (a local process dialling the mesh address)"
    return None


def destination_refusal(
    addr: IPv4Address | IPv6Address, port: int, here: IPv4Address, own_ports: tuple[int, ...]
) -> str | None:
    """Why a peer may not ask for ``addr``:``port`` on a leg dialled to ``here`` (None: it
    may). The destination is this node itself, never the proxy's own ports."""
    if addr != here:
        return f"destination {addr} is not this node ({here})"
    if port == 0 or port in own_ports:
        return f"destination port {port} is the proxy's own"
    return None


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
