"""Lab node names (n1, n2, ...) and their mesh addresses (10.42.0.0/16)."""

from __future__ import annotations

from ipaddress import IPv4Address


def node_index(node: str) -> int:
    if not node.startswith("n") or not node[1:].isdigit() or int(node[1:]) < 1:
        raise ValueError(f"lab node names are n1, n2, ...; got {node!r}")
    return int(node[1:])


def node_address(node: str) -> IPv4Address:
    """Mesh address of lab node ``nI``: 10.42.0.I, or 10.42.(I//256).(I%256) beyond 254."""
    i = node_index(node)
    if i <= 254:
        return IPv4Address(f"10.42.0.{i}")
    return IPv4Address(f"10.42.{i // 256}.{i % 256}")
