"""The proxy's YAML configuration, validated by pydantic (every field: docs/proxy.md).

Unknown keys are refused so a typo never silently falls back to a default; every refusal
names the field and the reason (:class:`UserError`).
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from manetkit.configfile import read_yaml_mapping, validate
from manetkit.keyfile import read_hex_key
from manetkit.paths import check_socket_path
from manetkit.proxy.channel import Keyring, MeshKey
from manetkit.proxy.session import PARTITION_TIMEOUT_DEFAULT

IDLE_TIMEOUT_DEFAULT = 900.0  # s: an idle stream's silence limit (TCP's retries2 is ~15 min)

Mode = Literal["plain", "fixed-rto", "elfn", "bus"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PrefixMode(_Strict):
    prefix: IPv4Network = Field(description="destination prefix, e.g. 10.42.0.9/32")
    mode: Mode = Field(description="plain, fixed-rto, elfn or bus")


class PeerKey(_Strict):
    id: int = Field(ge=1, le=255, description="key id carried in every OPEN")
    key_file: Path = Field(
        description="file holding the key as hex (16-64 bytes), mode 0600 (the daemon's "
        "auth key file may be the same file)"
    )


class PeerAuth(_Strict):
    """``auth:`` the mesh key of the peer channel (docs/proxy.md, docs/security.md)."""

    keys: tuple[PeerKey, ...] = Field(
        min_length=1, max_length=2, description="first tags OPENs, any is accepted (roll-over)"
    )
    required: bool = Field(
        True, description="refuse OPENs made without a mesh key (off: mixed meshes)"
    )

    @model_validator(mode="after")
    def _unique(self) -> PeerAuth:
        ids = [k.id for k in self.keys]
        if len(set(ids)) != len(ids):
            raise ValueError(f"keys: duplicate key id in {ids}")
        return self


MIN_KEY, MAX_KEY = 16, 64  # bytes, as the daemon's auth keys


def load_keyring(cfg: ProxyConfig) -> Keyring:
    """Read the mesh keys (each file checked for its permissions, manetkit.keyfile);
    without ``auth`` the channel still agrees on per-session keys (ephemeral X25519)."""
    if cfg.auth is None:
        return Keyring()
    keys = tuple(
        MeshKey(k.id, read_hex_key(k.key_file, f"auth.keys[{i}].key_file", MIN_KEY, MAX_KEY))
        for i, k in enumerate(cfg.auth.keys)
    )
    return Keyring(keys, cfg.auth.required)


class ProxyConfig(_Strict):
    mesh_prefix: IPv4Network = Field(
        IPv4Network("10.42.0.0/16"), description="TCP to this prefix is intercepted"
    )
    mode: Mode = Field("elfn", description="mode for destinations no 'modes' entry matches")
    modes: tuple[PrefixMode, ...] = Field((), description="per-prefix modes; longest prefix wins")
    listen_port: int = Field(4241, ge=1, le=65535, description="intercept listener (nft target)")
    peer_port: int = Field(4242, ge=1, le=65535, description="mesh-leg port of peer proxies")
    listen_address: IPv4Address | None = Field(
        None,
        description="address of the mesh-leg listener (default: this host's one address "
        "inside mesh_prefix, its mesh address)",
    )
    transparent_source: bool = Field(
        True, description="server sees the client's mesh address (IP_TRANSPARENT)"
    )
    client_interfaces: tuple[str, ...] = Field(
        (), description="also intercept TCP forwarded in from these interfaces (prerouting)"
    )
    partition_timeout: float = Field(  # why 120 s: PARTITION_TIMEOUT_DEFAULT
        PARTITION_TIMEOUT_DEFAULT,
        gt=0,
        le=3600,
        description="reset the app after this long without the peer",
    )
    idle_timeout: float | None = Field(
        None,
        gt=0,
        le=86400,
        description="as partition_timeout, for a stream that was idle when the silence "
        "began (an idle TCP connection rides out an outage; at least partition_timeout; "
        "default: 900, or partition_timeout if longer)",
    )
    probe_interval: float = Field(2.0, ge=0.1, le=60, description="ELFN probe period, seconds")
    probe: Literal["fixed", "rtt"] = Field(
        "fixed", description="fixed: probe_interval; rtt: 4 x smoothed RTT, at least 0.2 s"
    )
    bus_wait: float = Field(
        10.0, gt=0, le=600, description="bus: wait this long for ERSN, then probe like elfn"
    )
    rto_max_ms: int = Field(
        1000, ge=1000, le=120_000, description="fixed-rto: TCP_RTO_MAX_MS on the mesh leg"
    )
    congestion_control: str | None = Field(
        None, description="TCP_CONGESTION for the mesh leg (None: the kernel default)"
    )
    thin_linear_timeouts: bool = Field(
        False, description="fixed-rto: also TCP_THIN_LINEAR_TIMEOUTS (reno/cubic only)"
    )
    replay_buffer: int = Field(
        4 * 1024 * 1024, ge=65536, le=1 << 30, description="unacked bytes per session"
    )
    keepalive: float = Field(1.0, gt=0, le=60, description="session keepalive period")
    ack_delay: float = Field(
        1.0,
        ge=0.001,
        le=60,
        description="longest wait before acknowledging delivered bytes to the peer proxy "
        "(each acknowledgement is a packet on the air; 64 KiB are acknowledged at once)",
    )
    max_sessions: int | None = Field(
        None,
        ge=1,
        description="sessions of local applications (default: derived from RLIMIT_NOFILE, "
        "3 descriptors each)",
    )
    max_remote_sessions: int | None = Field(
        None, ge=1, description="sessions peers open here, all peers (default: as max_sessions)"
    )
    max_peer_sessions: int = Field(64, ge=1, description="sessions one peer may open here")
    memory_budget: int = Field(
        256 * 1024 * 1024,
        ge=4 * 1024 * 1024,
        description="bytes all sessions' replay buffers may hold together; at the budget "
        "no application is read (back-pressure)",
    )
    auth: PeerAuth | None = Field(
        None, description="mesh key of the peer channel (off: per-session keys only)"
    )
    daemon_socket: Path | None = Field(
        Path("/run/manetkit/events.sock"), description="routing daemon's event socket"
    )
    status_socket: Path = Field(
        Path("/run/manetkit/proxy.sock"), description="the proxy's status socket"
    )
    nft_table: str = Field("manetkit_proxy", pattern=r"^[A-Za-z0-9_]*manetkit[A-Za-z0-9_]*$")
    own_mark: int = Field(0x4D4B, ge=1, le=0xFFFFFFFF, description="SO_MARK of proxy sockets")
    transparent_mark: int = Field(
        0x4D4C, ge=1, le=0xFFFFFFFF, description="SO_MARK of transparent server sockets"
    )
    route_table: int = Field(4242, ge=1, le=0xFFFFFFF0, description="policy table for replies")
    rule_priority: int = Field(4242, ge=1, le=32765, description="priority of the fwmark rule")

    @field_validator("daemon_socket", "status_socket")
    @classmethod
    def _socket_path(cls, v: Path | None) -> Path | None:
        # connect() / bind() would fail once the proxy runs
        return None if v is None else check_socket_path(v, "path")

    @model_validator(mode="before")
    @classmethod
    def _removed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "allow_local" in data:
            raise ValueError(
                "allow_local was removed: a peer may only ask for this node's own mesh "
                "address (docs/proxy.md, 'What a peer may ask')"
            )
        return data

    @property
    def idle_limit(self) -> float:
        """``idle_timeout`` with its default filled in."""
        if self.idle_timeout is not None:
            return self.idle_timeout
        return max(IDLE_TIMEOUT_DEFAULT, self.partition_timeout)

    @model_validator(mode="after")
    def _check(self) -> ProxyConfig:
        if self.listen_address is not None and self.listen_address not in self.mesh_prefix:
            raise ValueError(f"listen_address {self.listen_address} is outside {self.mesh_prefix}")
        if self.own_mark == self.transparent_mark:
            raise ValueError("own_mark and transparent_mark must differ")
        if self.listen_port == self.peer_port:
            raise ValueError("listen_port and peer_port must differ")
        if self.keepalive * 2 > self.partition_timeout:
            raise ValueError("keepalive must be at most half of partition_timeout")
        if self.idle_timeout is not None and self.idle_timeout < self.partition_timeout:
            raise ValueError("idle_timeout must be at least partition_timeout")
        if self.ack_delay > self.keepalive:
            raise ValueError("ack_delay must be at most keepalive")
        if self.thin_linear_timeouts and self.congestion_control not in ("reno", "cubic"):
            raise ValueError(
                "thin_linear_timeouts needs congestion_control reno or cubic "
                "(linear timeouts never fire under BBR, the kernel default here)"
            )
        for pm in self.modes:
            if not pm.prefix.subnet_of(self.mesh_prefix) and pm.mode != "plain":
                raise ValueError(f"modes: {pm.prefix} is outside mesh_prefix {self.mesh_prefix}")
        return self

    def mode_for(self, addr: IPv4Address) -> str:
        best: tuple[int, str] = (-1, self.mode)
        for pm in self.modes:
            if addr in pm.prefix and pm.prefix.prefixlen > best[0]:
                best = (pm.prefix.prefixlen, pm.mode)
        return best[1]


def parse_config(data: Any, source: str = "config") -> ProxyConfig:
    """Validate a parsed YAML document; raises :class:`UserError` naming field and reason."""
    return validate(ProxyConfig, {} if data is None else data, source)


def load_config(path: str | Path) -> ProxyConfig:
    return parse_config(read_yaml_mapping(path), str(path))
