"""The daemon's YAML configuration, validated by pydantic (every field: docs/daemon.md).

Unknown keys are refused (``extra="forbid"``) so a typo never silently falls back to a
default; every refusal names the field path and the reason (:class:`UserError`).
The protocol sections (``aodv:``, ``dsr:``, ``smr:``) and ``atra:`` are typed by the
engines' own config models (:class:`AodvConfig`, :class:`DsrConfig`, :class:`SmrConfig`,
:class:`AtraConfig`), so a bad field is refused at load time and the engine modules stay
the single source of their parameters and defaults. The daemon-wide ``send_buffer:``,
``atra:`` and ``link_quality:`` reach the running protocol's section in :meth:`DaemonConfig.engine_config`
where that section does not set them itself.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from manetkit.configfile import read_yaml_mapping, validate
from manetkit.daemon.auth import AuthConfig
from manetkit.daemon.engines.aodv import AodvConfig
from manetkit.daemon.engines.atra.config import AtraConfig
from manetkit.daemon.engines.dsr import DsrConfig
from manetkit.daemon.engines.linkquality.config import LinkQualityConfig
from manetkit.daemon.engines.smr import SmrConfig
from manetkit.daemon.sendbuffer import SendBufferSettings
from manetkit.jsonlines import group_id
from manetkit.macaddr import parse_mac
from manetkit.paths import check_lab_name, check_socket_path

# Worst-case radio MTU: every 802.11 / Ethernet radio manetkit runs on carries 1500 bytes.
RADIO_MTU = 1500


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_ENGINE_BUFFER = SendBufferSettings.model_fields


class SendBufferConfig(_Strict):
    """RFC 4728 4.2 send buffer, daemon-wide: the engines' fields (default, bounds,
    description: :class:`~manetkit.daemon.sendbuffer.SendBufferSettings`) under short
    names. A field set here reaches the running protocol section's
    ``send_buffer_packets``/``send_buffer_timeout_s`` unless that section sets its own."""

    packets: int = _ENGINE_BUFFER["send_buffer_packets"]
    per_destination: int = _ENGINE_BUFFER["send_buffer_per_destination"]
    timeout_s: float = _ENGINE_BUFFER["send_buffer_timeout_s"]


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


EngineConfig = AodvConfig | DsrConfig | SmrConfig
# The send_buffer: fields and the protocol sections' names for them.
_BUFFER_FIELDS = (
    ("packets", "send_buffer_packets"),
    ("per_destination", "send_buffer_per_destination"),
    ("timeout_s", "send_buffer_timeout_s"),
)


class DaemonConfig(_Strict):
    address: IPv4Address = Field(description="this node's mesh IPv4 address (on mesh0)")
    prefix: IPv4Network = Field(IPv4Network("10.42.0.0/16"), description="the mesh's prefix")
    protocol: Literal["aodv", "dsr", "smr", "static"] = "aodv"
    radio_interface: str = Field("wlan0", min_length=1, max_length=15)
    ethertype: int = Field(0x88B5, ge=0x0600, le=0xFFFF, description="manetkit frames' ethertype")
    tun_name: str = Field("mesh0", min_length=1, max_length=15)
    max_neighbours: int = Field(
        1024,
        ge=1,
        le=1_000_000,
        description="neighbour table bound; the least recently heard is evicted (security.md)",
    )
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
    aodv: AodvConfig = Field(
        default_factory=AodvConfig, description="AODV engine (docs/aodv.md), RFC 3561 names"
    )
    dsr: DsrConfig = Field(
        default_factory=DsrConfig, description="DSR engine (docs/dsr.md), RFC 4728 names"
    )
    smr: SmrConfig = Field(
        default_factory=SmrConfig,
        description="SMR engine (docs/smr.md): DSR's settings plus mode, paths, ...",
    )
    atra: AtraConfig = Field(
        default_factory=AtraConfig,
        description="Atra route failure prediction / proactive errors / route pinning "
        "(docs/atra.md): rfp, pre, srp, ...; reaches the dsr/smr/aodv engine",
    )
    link_quality: LinkQualityConfig = Field(
        default_factory=LinkQualityConfig,
        description="link-quality routing (docs/linkquality.md): admission against gray "
        "zones, the ETX metric, the false-failure veto; reaches the dsr/smr/aodv engine",
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

    @field_validator("atra")
    @classmethod
    def _atra_engine(cls, v: AtraConfig, info: ValidationInfo) -> AtraConfig:
        if v.model_fields_set and info.data.get("protocol") == "static":
            raise ValueError("the static engine has no Atra support")
        return v

    @field_validator("link_quality")
    @classmethod
    def _link_quality_engine(cls, v: LinkQualityConfig, info: ValidationInfo) -> LinkQualityConfig:
        if v.model_fields_set and info.data.get("protocol") == "static":
            raise ValueError("the static engine has no link-quality support")
        return v

    @field_validator("event_socket")
    @classmethod
    def _event_socket(cls, v: Path) -> Path:
        return check_socket_path(v, "path")  # bind() would fail at start-up

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
        self._check_rfp_inputs()
        self._check_link_quality_inputs()
        return self

    def _check_link_quality_inputs(self) -> None:
        """Admission by signal smooths the powers link sensing reports: refuse it where
        none come, instead of refusing every link (docs/linkquality.md)."""
        engine = self.engine_config()
        if engine is None or not engine.link_quality.admission.signal:
            return
        if self.link_sensing.backend == "hello":
            raise ValueError(
                "link_quality.admission.signal: link_sensing.backend 'hello' reports no "
                "received powers; use 'lab' or 'nl80211', or admission.hellos"
            )

    def _check_rfp_inputs(self) -> None:
        """Atra RFP fits a slope to received powers (Anantharaman et al. IV-A): refuse a
        setup where it could never predict, instead of running with it silently inert."""
        engine = self.engine_config()
        if engine is None or not engine.atra.rfp:
            return
        atra, sensing = engine.atra, self.link_sensing
        if sensing.backend == "hello":
            raise ValueError(
                "atra.rfp: link_sensing.backend 'hello' reports no received powers; "
                "RFP needs 'lab' or 'nl80211'"
            )
        # The median of three drops two samples, and a fit of ``history`` points has
        # too few degrees of freedom to pass the noise guard (min_t_stat, scaled by
        # Student's t): two more points are needed, so history + 4 polls in the window.
        need = atra.history + 4
        if atra.window_s < (need - 1) * sensing.poll_s:
            raise ValueError(
                f"atra.window_s: {atra.window_s:g} s holds fewer than history + 4 = "
                f"{need} polls of link_sensing.poll_s {sensing.poll_s:g} s; "
                f"RFP would never predict (raise window_s to "
                f">= {(need - 1) * sensing.poll_s:g} or lower poll_s)"
            )

    def tun_mtu(self) -> int:
        """TUN MTU so that nothing fragments on a 1500-byte radio (DSR adds its header)."""
        if self.protocol not in ("dsr", "smr"):
            return RADIO_MTU  # AODV and static routing add nothing to the IP packet
        from manetkit.daemon.wire import dsr as wire_dsr

        section: DsrConfig = getattr(self, self.protocol)
        return RADIO_MTU - wire_dsr.max_overhead(section.max_route_length)

    def engine_config(self) -> EngineConfig | None:
        """The running protocol's section with the daemon-wide settings merged in.

        ``send_buffer:``, ``atra:`` and ``link_quality:`` fill the section's
        ``send_buffer_*``, ``atra`` and ``link_quality`` fields that the section does not
        set itself (its own setting wins); every
        default comes from the engine's config model. None for ``static``.
        """
        if self.protocol == "static":
            return None
        section: EngineConfig = getattr(self, self.protocol)
        own = section.model_fields_set
        update: dict[str, Any] = {
            name: getattr(self.send_buffer, daemon_name)
            for daemon_name, name in _BUFFER_FIELDS
            if daemon_name in self.send_buffer.model_fields_set and name not in own
        }
        if self.atra.model_fields_set and "atra" not in own:
            update["atra"] = self.atra
        if self.link_quality.model_fields_set and "link_quality" not in own:
            update["link_quality"] = self.link_quality
        if not update:
            return section
        return type(section).model_validate({**dict(section), **update})

    def effective(self) -> dict[str, Any]:
        """The effective config as plain YAML-able data (``--check`` prints it): the
        running protocol's section in full (after :meth:`engine_config`), the others as
        written."""
        data = self.model_dump(mode="json")
        data["ethertype"] = f"0x{self.ethertype:04X}"
        engine = self.engine_config()
        for proto in ("aodv", "dsr", "smr"):
            section: EngineConfig = getattr(self, proto)
            if proto == self.protocol and engine is not None:
                data[proto] = engine.model_dump(mode="json")
            else:
                data[proto] = section.model_dump(mode="json", exclude_unset=True)
        return data


def parse_config(data: Any, source: str = "config") -> DaemonConfig:
    """Validate a parsed YAML document; raises :class:`UserError` naming field and reason.

    Every section, ``aodv:``/``dsr:``/``smr:``/``atra:`` included, is typed, so a bad
    value is refused here (``--check`` time) rather than at start-up.
    """
    return validate(DaemonConfig, data, source)


def load_config(path: str | Path) -> DaemonConfig:
    return parse_config(read_yaml_mapping(path), str(path))
