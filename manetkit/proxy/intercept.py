"""Interception: the proxy's own nftables table and policy route (the only kernel glue).

Rules (one table, ``inet manetkit_proxy`` by default, replaced as a whole):

* output (nat, dstnat priority): TCP from local applications to a proxied prefix is
  redirected to the proxy's intercept port. The proxy's own sockets carry a socket mark
  (SO_MARK) and are skipped. Why a mark rather than a uid or cgroup match: the proxy runs
  as root (it needs CAP_NET_ADMIN for nft anyway), so a uid would also exclude every
  other root process, and a cgroup match needs a cgroup v2 hierarchy set up per host;
  a mark is per socket, needs nothing else, and works in every namespace.
* prerouting (optional): the same for TCP arriving on the configured client interfaces
  (clients that use this laptop as their gateway into the mesh).
* plain prefixes return before any redirect; rules are ordered longest prefix first so
  a /32 in plain mode inside a proxied /16 stays plain.
* transparent source: the receiving proxy binds its server-side socket to the client's
  mesh address (IP_TRANSPARENT) with a second mark; the route chain copies that mark to
  the connection and back onto the server's replies, and a policy rule (fwmark ->
  ``local`` route table) delivers those replies to the proxy instead of the mesh,
  as the kernel's TPROXY documentation describes.

Original destination of a redirected connection: getsockopt(SOL_IP, SO_ORIGINAL_DST).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import subprocess
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

log = logging.getLogger(__name__)

SO_ORIGINAL_DST = 80
IP_TRANSPARENT = 19


@dataclass(frozen=True, slots=True)
class InterceptSpec:
    table: str  # nft table name (inet family); must contain "manetkit"
    port: int  # the proxy's intercept listener
    own_mark: int  # SO_MARK of every proxy socket: never intercepted
    transparent_mark: int  # SO_MARK of server-side sockets bound to a client's address
    route_table: int  # policy routing table for the transparent replies
    rule_priority: int
    prefixes: tuple[tuple[IPv4Network, bool], ...]  # (prefix, proxied?)
    client_interfaces: tuple[str, ...] = ()  # prerouting interception when not empty


def ruleset(spec: InterceptSpec) -> str:
    """The nft script that (re)creates the table; deleting first makes it idempotent."""
    ordered = sorted(spec.prefixes, key=lambda p: p[0].prefixlen, reverse=True)

    def prefix_rules(iif: str = "") -> list[str]:
        rules = []
        for net, proxied in ordered:
            verdict = f"redirect to :{spec.port}" if proxied else "return"
            rules.append(f"    {iif}ip daddr {net} meta l4proto tcp {verdict}")
        return rules

    lines = [
        f"table inet {spec.table} {{",
        "  chain output {",
        "    type nat hook output priority -100; policy accept;",
        f"    meta mark {{ {spec.own_mark:#x}, {spec.transparent_mark:#x} }} return",
        "    fib daddr type local return",
        *prefix_rules(),
        "  }",
        "  chain route_out {",
        "    type route hook output priority -150; policy accept;",
        f"    meta mark {spec.transparent_mark:#x} ct mark set {spec.transparent_mark:#x}",
        f"    ct mark {spec.transparent_mark:#x} meta mark set {spec.transparent_mark:#x}",
        "  }",
    ]
    if spec.client_interfaces:
        ifs = ", ".join(f'"{i}"' for i in spec.client_interfaces)
        lines += [
            "  chain prerouting {",
            "    type nat hook prerouting priority -100; policy accept;",
            "    fib daddr type local return",
            *prefix_rules(f"iifname {{ {ifs} }} "),
            "  }",
        ]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _nft(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True)


def table_exists(table: str) -> bool:
    out = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    return f"table inet {table}" in out.splitlines()


def remove(spec: InterceptSpec) -> None:
    """Delete the table and the policy route; quiet when they are already gone."""
    if table_exists(spec.table):
        res = _nft(f"delete table inet {spec.table}\n")
        if res.returncode != 0:
            log.warning("could not delete nft table %s: %s", spec.table, res.stderr.strip())
    with IPRoute() as ipr:
        with contextlib.suppress(NetlinkError):
            ipr.rule(
                "del",
                fwmark=spec.transparent_mark,
                table=spec.route_table,
                priority=spec.rule_priority,
            )
        with contextlib.suppress(NetlinkError):
            ipr.route("del", dst="0.0.0.0/0", table=spec.route_table, type="local", scope=254)


def install(spec: InterceptSpec) -> bool:
    """Install the table (a stale one from a crash is replaced). Returns True if stale."""
    stale = table_exists(spec.table)
    if stale:
        log.warning("removing stale nft table inet %s (left by a crashed proxy?)", spec.table)
    remove(spec)
    res = _nft(ruleset(spec))
    if res.returncode != 0:
        raise OSError(f"nft refused the proxy's ruleset: {res.stderr.strip()}")
    with IPRoute() as ipr:
        lo = ipr.link_lookup(ifname="lo")[0]
        ipr.route("add", dst="0.0.0.0/0", table=spec.route_table, type="local", oif=lo, scope=254)
        ipr.rule(
            "add", fwmark=spec.transparent_mark, table=spec.route_table, priority=spec.rule_priority
        )
    return stale


def original_dst(sock: socket.socket) -> tuple[IPv4Address, int]:
    """Where the application meant to connect before nft redirected it."""
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port, addr = struct.unpack_from("!2xH4s", raw)
    return IPv4Address(addr), port


def mark(sock: socket.socket, value: int) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, value)


def make_transparent(sock: socket.socket) -> None:
    """Allow bind() to a non-local address (the client's), as TPROXY does."""
    sock.setsockopt(socket.SOL_IP, IP_TRANSPARENT, 1)


def addresses_in(prefix: IPv4Network) -> list[IPv4Address]:
    """This host's (namespace's) IPv4 addresses inside ``prefix``: its mesh address."""
    found = []
    with IPRoute() as ipr:
        for msg in ipr.get_addr(family=socket.AF_INET):
            value = msg.get_attr("IFA_LOCAL") or msg.get_attr("IFA_ADDRESS")
            if value and IPv4Address(value) in prefix:
                found.append(IPv4Address(value))
    return sorted(set(found))


def peer_is_redirected(sock: socket.socket) -> bool:
    """Did nft redirect this accepted connection to us? Its original destination is then
    elsewhere; a connection made straight to the intercept port (a loop, or a host on the
    LAN) has its original destination equal to the socket's own address."""
    try:
        dst = original_dst(sock)
    except OSError:
        return False  # no conntrack entry: nothing NATed it
    here = sock.getsockname()
    return (str(dst[0]), dst[1]) != (here[0], here[1])
