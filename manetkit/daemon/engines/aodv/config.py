"""AODV's settings (YAML ``aodv:``). Defaults: RFC 3561 section 10. Times in ms."""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from manetkit.daemon.engines.atra.config import AtraConfig
from manetkit.daemon.engines.linkquality.config import LinkQualityConfig
from manetkit.daemon.engines.shared.bus import BusSettings
from manetkit.daemon.sendbuffer import SendBufferSettings

_K = 5  # RFC 3561 section 10: DELETE_PERIOD = K * max(ACTIVE_ROUTE_TIMEOUT, HELLO_INTERVAL)


class AodvConfig(SendBufferSettings, BusSettings):
    """AODV settings (YAML ``aodv:``). Defaults: RFC 3561 section 10. Times in ms."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    atra: AtraConfig = Field(
        default_factory=AtraConfig,
        description="Atra RFP (docs/atra.md); the daemon's top-level atra:",
    )
    link_quality: LinkQualityConfig = Field(
        default_factory=LinkQualityConfig,
        description="admission, ETX metric, failure veto (docs/linkquality.md); the "
        "daemon's top-level link_quality:",
    )

    active_route_timeout_ms: int = Field(
        3000, gt=0, description="an unused route stays valid this long (ACTIVE_ROUTE_TIMEOUT)"
    )
    allowed_hello_loss: int = Field(
        2, ge=1, le=100, description="hello intervals without a packet before a neighbour is lost"
    )
    hello_interval_ms: int = Field(
        1000, gt=0, description="period of Hello messages (HELLO_INTERVAL)"
    )
    net_diameter: int = Field(
        35, ge=1, le=255, description="max hops between two nodes; TTL of network-wide RREQs"
    )
    node_traversal_time_ms: int = Field(
        40, gt=0, description="estimated one-hop traversal time (NODE_TRAVERSAL_TIME)"
    )
    rreq_retries: int = Field(
        2, ge=0, le=16, description="network-wide RREQ retries before giving up (RREQ_RETRIES)"
    )
    rreq_ratelimit: int = Field(
        10, ge=1, description="max RREQs this node originates per second (RREQ_RATELIMIT)"
    )
    rerr_ratelimit: int = Field(
        10, ge=1, description="max RERRs this node sends per second (RERR_RATELIMIT)"
    )
    ttl_start: int = Field(1, ge=1, le=255, description="TTL of the first RREQ (TTL_START)")
    ttl_increment: int = Field(
        2, ge=1, le=255, description="TTL added per expanding-ring step (TTL_INCREMENT)"
    )
    ttl_threshold: int = Field(
        7, ge=1, le=255, description="beyond this TTL a RREQ goes network-wide (TTL_THRESHOLD)"
    )
    local_add_ttl: int = Field(
        2, ge=0, le=255, description="extra TTL of a local-repair RREQ (LOCAL_ADD_TTL)"
    )
    timeout_buffer: int = Field(
        2, ge=0, le=255, description="slack in RING_TRAVERSAL_TIME for congestion (TIMEOUT_BUFFER)"
    )
    hellos: bool = Field(
        True,
        description="send Hellos while on an active route and declare neighbours lost without them (6.9)",
    )
    local_repair: bool = Field(
        True, description="repair a break near the destination instead of reporting it (6.12)"
    )
    repair_idle_routes: bool = Field(
        False,
        description="also repair routes that carried no data in the last active_route_timeout_ms "
        "(6.11 (i) names breaks found while transmitting data)",
    )
    rrep_ack: bool = Field(
        False,
        description="ask for RREP-ACKs and blacklist neighbours that do not answer (6.8)",
    )
    gratuitous_rrep: bool = Field(
        False, description="set G in our RREQs: intermediate repliers also tell the destination"
    )
    destination_only: bool = Field(
        False, description="set D in our RREQs: only the destination may reply"
    )
    route_table_size: int = Field(
        1024,
        ge=1,
        le=1_000_000,
        description="route table entries; an invalid, else the soonest-expiring, is evicted",
    )
    rreq_seen_size: int = Field(
        4096,
        ge=1,
        le=1_000_000,
        description="(originator, RREQ ID) pairs remembered for duplicate detection (6.5)",
    )

    @model_validator(mode="after")
    def _ring(self) -> AodvConfig:
        if self.ttl_start > self.net_diameter:
            raise ValueError(f"ttl_start {self.ttl_start} exceeds net_diameter {self.net_diameter}")
        if self.ttl_threshold > self.net_diameter:
            raise ValueError(
                f"ttl_threshold {self.ttl_threshold} exceeds net_diameter {self.net_diameter}"
            )
        return self

    # -- derived values (RFC 3561 section 10), in ms
    @property
    def net_traversal_time_ms(self) -> int:
        return 2 * self.node_traversal_time_ms * self.net_diameter

    @property
    def path_discovery_time_ms(self) -> int:
        return 2 * self.net_traversal_time_ms

    @property
    def my_route_timeout_ms(self) -> int:
        return 2 * self.active_route_timeout_ms

    @property
    def delete_period_ms(self) -> int:
        return _K * max(self.active_route_timeout_ms, self.hello_interval_ms)

    @property
    def blacklist_timeout_ms(self) -> int:
        return self.rreq_retries * self.net_traversal_time_ms

    @property
    def next_hop_wait_ms(self) -> int:
        return self.node_traversal_time_ms + 10

    @property
    def max_repair_ttl(self) -> int:
        return int(0.3 * self.net_diameter)

    def ring_traversal_time_ms(self, ttl: int) -> int:
        return 2 * self.node_traversal_time_ms * (ttl + self.timeout_buffer)
