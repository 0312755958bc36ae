"""The daemon's YAML configuration, validated by pydantic (every field: docs/daemon.md).

Unknown keys are refused (``extra="forbid"``) so a typo never silently falls back to a
default; every refusal names the field path and the reason (:class:`UserError`).
The protocol sections (``aodv:``, ``dsr:``) are validated against the engines' own
config classes, so the engine modules stay the single source of their parameters.
"""

from __future__ import annotations

import dataclasses
import importlib
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from manetkit.configfile import error_lines, read_yaml_mapping, validate
from manetkit.daemon.auth import AuthConfig
from manetkit.errors import UserError
from manetkit.jsonlines import group_id
from manetkit.macaddr import parse_mac
from manetkit.paths import check_lab_name

# Worst-case radio MTU: every 802.11 / Ethernet radio manetkit runs on carries 1500 bytes.
RADIO_MTU = 1500


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SendBufferConfig(_Strict):
    """RFC 4728 4.2 send buffer; 30 s as in Holland & Vaidya's simulations."""

    packets: int = Field(
        64, ge=1, le=100_000, description="packets waiting for routes, all destinations"
    )
    timeout_s: float = Field(30.0, gt=0, le=3600, description="how long a packet may wait")


class HysteresisConfig(_Strict):
    """When link sensing declares a neighbour gone; one lost hello never does."""

    missed_hellos: int = Field(
        3, ge=2, le=100, description="hello backend: down after N missed hellos"
    )
    tx_failures: int = Field(
        1,
        ge=1,
        le=100,
        description="down after M consecutive unicast tx failures (each is already 7 MAC retries)",
    )
    inactive_s: float = Field(
        3.0,
        gt=0,
        le=3600,
        description="lab/nl80211: down after this long without hearing the station",
    )
    min_signal_dbm: float | None = Field(
        None, description="ignore stations weaker than this (None: accept any the radio hears)"
    )


class HelloConfig(_Strict):
    interval_s: float = Field(1.0, gt=0, le=60, description="beacon period")
    port: int = Field(
        49698, ge=1, le=65535, description="UDP port of the beacon inside manetkit frames"
    )


class LabConfig(_Strict):
    name: str = Field(description="lab name (manetkit lab up --name)")
    node: str = Field(description="node name in the lab, e.g. n3")

    @field_validator("name")
    @classmethod
    def _lab_name(cls, v: str) -> str:
        return check_lab_name(v)


class LinkSensingConfig(_Strict):
    backend: Literal["lab", "nl80211", "hello"] = "hello"
    poll_s: float = Field(0.2, gt=0, le=10, description="station table poll period (lab, nl80211)")
    hello: HelloConfig = HelloConfig()
    hysteresis: HysteresisConfig = HysteresisConfig()


def _engine_config_class(protocol: str) -> Any | None:
    """The engine's own config class (``AodvConfig``/``DsrConfig``); None for ``static``."""
    if protocol == "static":
        return None
    mod = importlib.import_module(f"manetkit.daemon.engines.{protocol}")
    return getattr(mod, f"{protocol.capitalize()}Config")


def engine_config(protocol: str, values: dict[str, Any]) -> Any:
    """Build the engine's config object from the YAML section (validated)."""
    cls = _engine_config_class(protocol)
    if cls is None:
        if values:
            raise UserError(f"{protocol}: the {protocol} engine has no configuration section")
        return None
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return cls.model_validate(values)
    if dataclasses.is_dataclass(cls):
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        from pydantic import TypeAdapter

        return TypeAdapter(cls).validate_python(values)
    return cls(**values)


class DaemonConfig(_Strict):
    address: IPv4Address = Field(description="this node's mesh IPv4 address (on mesh0)")
    prefix: IPv4Network = Field(IPv4Network("10.42.0.0/16"), description="the mesh's prefix")
    protocol: Literal["aodv", "dsr", "smr", "static"] = "aodv"
    radio_interface: str = Field("wlan0", min_length=1, max_length=15)
    ethertype: int = Field(0x88B5, ge=0x0600, le=0xFFFF, description="manetkit frames' ethertype")
    tun_name: str = Field("mesh0", min_length=1, max_length=15)
    link_sensing: LinkSensingConfig = LinkSensingConfig()
    lab: LabConfig | None = None
    send_buffer: SendBufferConfig = SendBufferConfig()
    event_socket: Path = Path("/run/manetkit/events.sock")
    control_group: str | None = Field(
        None,
        description="group that may use the event socket besides root: it owns the socket "
        "(mode 0660) and may send state-changing commands (discover)",
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    auth: AuthConfig | None = Field(
        None, description="control-plane MACs (docs/security.md); off when absent"
    )
    aodv: dict[str, Any] = Field(default_factory=dict)
    dsr: dict[str, Any] = Field(default_factory=dict)
    smr: dict[str, Any] = Field(
        default_factory=dict, description="SMR engine: DSR's settings plus mode, paths, ..."
    )
    atra: dict[str, Any] = Field(
        default_factory=dict,
        description="Atra route failure prediction / proactive errors / route pinning "
        "(docs/atra.md): rfp, pre, srp, ...; reaches the dsr/smr/aodv engine",
    )
    static_routes: dict[IPv4Address, IPv4Address] = Field(
        default_factory=dict, description="static engine: destination -> next hop (a neighbour)"
    )
    static_neighbours: dict[IPv4Address, str] = Field(
        default_factory=dict,
        description="static engine: neighbour address -> MAC (aa:bb:cc:dd:ee:ff), when no link sensing maps it",
    )

    @field_validator("ethertype", mode="before")
    @classmethod
    def _ethertype(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                return int(v, 0)
            except ValueError:
                raise ValueError(f"{v!r} is not a number (write 0x88B5)") from None
        return v

    @field_validator("static_neighbours")
    @classmethod
    def _macs(cls, v: dict[IPv4Address, str]) -> dict[IPv4Address, str]:
        for addr, mac in v.items():
            try:
                parse_mac(mac)
            except ValueError as exc:
                raise ValueError(f"{addr}: {exc}") from None
        return v

    @field_validator("control_group")
    @classmethod
    def _group(cls, v: str | None) -> str | None:
        if v is not None:
            group_id(v)  # ValueError naming the group if this host does not have it
        return v

    @model_validator(mode="after")
    def _consistent(self) -> DaemonConfig:
        if self.address not in self.prefix:
            raise ValueError(f"address {self.address} is not inside prefix {self.prefix}")
        if self.address in (self.prefix.network_address, self.prefix.broadcast_address):
            raise ValueError(f"address {self.address} is the prefix's network or broadcast address")
        if self.link_sensing.backend == "lab" and self.lab is None:
            raise ValueError("link_sensing.backend 'lab' needs a 'lab:' section (name, node)")
        for dst, hop in self.static_routes.items():
            if dst not in self.prefix or hop not in self.prefix:
                raise ValueError(f"static_routes {dst}: {hop}: both must be inside {self.prefix}")
        return self

    def tun_mtu(self) -> int:
        """TUN MTU so that nothing fragments on a 1500-byte radio (DSR adds its header)."""
        if self.protocol not in ("dsr", "smr"):
            return RADIO_MTU  # AODV and static routing add nothing to the IP packet
        from manetkit.daemon.wire import dsr as wire_dsr

        cfg = engine_config(self.protocol, getattr(self, self.protocol))
        max_len = getattr(cfg, "max_route_length", 16)
        return RADIO_MTU - wire_dsr.max_overhead(max_len)

    def engine_config(self) -> Any:
        values = dict(getattr(self, self.protocol, {}) or {})
        # send_buffer: is the daemon-wide setting; it reaches engines whose config has
        # the RFC 4728 names, unless the protocol section sets them itself.
        cls = _engine_config_class(self.protocol)
        known = _field_names(cls)
        for name, value in (
            ("send_buffer_packets", self.send_buffer.packets),
            ("send_buffer_timeout", self.send_buffer.timeout_s),
            ("send_buffer_timeout_s", self.send_buffer.timeout_s),
        ):
            if name in known:
                values.setdefault(name, value)
        if self.atra:
            if "atra" not in known:
                raise UserError(f"the {self.protocol} engine has no Atra support")
            values.setdefault("atra", self.atra)
        return engine_config(self.protocol, values)

    def effective(self) -> dict[str, Any]:
        """The effective config as plain YAML-able data (``--check`` prints it)."""
        data = self.model_dump(mode="json")
        data["ethertype"] = f"0x{self.ethertype:04X}"
        for proto in ("aodv", "dsr", "smr"):
            if proto == self.protocol:
                cfg = self.engine_config()
                if isinstance(cfg, BaseModel):
                    data[proto] = cfg.model_dump(mode="json")
                elif dataclasses.is_dataclass(cfg):
                    data[proto] = _jsonable(dataclasses.asdict(cfg))
        return data


def _field_names(cls: Any) -> set[str]:
    if cls is None:
        return set()
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return set(cls.model_fields)
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls)}
    return set()


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, str | int | float | bool) or v is None:
        return v
    return str(v)


def parse_config(data: Any, source: str = "config") -> DaemonConfig:
    """Validate a parsed YAML document; raises :class:`UserError` naming field and reason.

    The ``aodv:``/``dsr:`` sections are checked against the engine's own config class
    here, so a bad value is refused at ``--check`` time rather than at start-up.
    """
    cfg = validate(DaemonConfig, data, source)
    lines: list[str] = []
    for proto in ("aodv", "dsr", "smr"):
        values = getattr(cfg, proto)
        if values or proto == cfg.protocol:
            try:
                engine_config(proto, values)
            except ValidationError as exc:
                lines += error_lines(exc, prefix=proto)
            except (TypeError, ValueError) as exc:
                lines.append(f"  {proto}: {exc}")
    if cfg.atra and not lines:
        try:
            cfg.engine_config()  # the top-level atra: section, inside the engine's config
        except ValidationError as exc:
            lines += error_lines(exc)  # paths start at atra.
        except (TypeError, ValueError, UserError) as exc:
            lines.append(f"  atra: {exc}")
    if lines:
        raise UserError(f"{source}: invalid configuration\n" + "\n".join(lines))
    return cfg


def load_config(path: str | Path) -> DaemonConfig:
    return parse_config(read_yaml_mapping(path), str(path))
