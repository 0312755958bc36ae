"""Daemon statuses for tests that read one without a daemon: the wire form a real daemon
writes (:mod:`manetkit.daemonstatus`), with the parts a test cares about given."""

from __future__ import annotations

from typing import Any

from manetkit.daemonstatus import DaemonStatus


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def status_wire(protocol: str = "dsr", address: str = "10.42.0.1", **over: Any) -> dict[str, Any]:
    """A whole status of a ``protocol`` daemon at ``address``, ``over`` merged in
    (``engine={"counters": {...}}``, ``neighbours=[...]`` ...)."""
    engine: dict[str, Any] = {"protocol": protocol, "counters": {}}
    if protocol != "static":
        engine.update(address=address, bus={"holds": 0, "held_packets": 0, "pending_notices": 0})
    if protocol == "aodv":
        engine["seq"] = 1
    if protocol == "smr":
        engine["smr"] = {
            "mode": "backup2", "paths": 2, "rediscover": "all-broken",
            "max_path_age_s": None, "after_all_broken": "discover",
        }  # fmt: skip
    base = {
        "address": address, "protocol": protocol, "tun": "mesh0",
        "radio_interface": "radio0", "link_sensing": "lab", "uptime_s": 1.0,
        "neighbours": [], "engine": engine, "send_buffer": {"packets": 0, "limit": 64},
    }  # fmt: skip
    return _merge(base, over)


def make_status(protocol: str = "dsr", address: str = "10.42.0.1", **over: Any) -> DaemonStatus:
    return DaemonStatus.from_wire(status_wire(protocol, address, **over))


def neighbour(address: str, up: bool = True, signal_dbm: float | None = -60.0) -> dict[str, Any]:
    return {"address": address, "mac": "02:00:00:00:00:01", "up": up, "signal_dbm": signal_dbm}
