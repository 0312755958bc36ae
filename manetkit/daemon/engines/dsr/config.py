"""DSR's settings (YAML ``dsr:``; SMR's ``smr:`` extends them). Defaults: RFC 4728
section 9; units in the names."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from manetkit.daemon.engines.atra.config import AtraConfig
from manetkit.daemon.engines.linkquality.config import LinkQualityConfig
from manetkit.daemon.engines.shared.bus import BusSettings
from manetkit.daemon.sendbuffer import SendBufferSettings
from manetkit.daemon.wire import dsr


class DsrConfig(SendBufferSettings, BusSettings):
    """DSR settings (YAML ``dsr:``). Defaults: RFC 4728 section 9; units in the names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    atra: AtraConfig = Field(
        default_factory=AtraConfig,
        description="Atra RFP / PRE / SRP (docs/atra.md); the daemon's top-level atra:",
    )
    link_quality: LinkQualityConfig = Field(
        default_factory=LinkQualityConfig,
        description="admission, ETX metric, failure veto (docs/linkquality.md); the "
        "daemon's top-level link_quality:",
    )
    discovery_hop_limit: int = Field(
        255, ge=1, le=255, description="IP TTL of propagating Route Requests (DiscoveryHopLimit)"
    )
    broadcast_jitter_ms: float = Field(
        10.0,
        ge=0,
        le=1000,
        description="max random delay before rebroadcasting a request (BroadcastJitter)",
    )
    route_cache_timeout_s: float = Field(
        300.0, gt=0, description="a cached path unused this long is forgotten (RouteCacheTimeout)"
    )
    request_table_size: int = Field(
        64, ge=1, description="initiators remembered in the Route Request Table (RequestTableSize)"
    )
    request_table_ids: int = Field(
        16, ge=1, description="request ids remembered per initiator (RequestTableIds)"
    )
    max_request_rexmt: int = Field(
        16,
        ge=0,
        description="propagating request retransmissions before giving up (MaxRequestRexmt)",
    )
    max_request_period_s: float = Field(
        10.0, gt=0, description="cap of the exponential request back-off (MaxRequestPeriod)"
    )
    request_period_ms: float = Field(
        500.0,
        gt=0,
        description="first back-off interval between propagating requests (RequestPeriod)",
    )
    nonprop_request_timeout_ms: float = Field(
        30.0, gt=0, description="wait for a reply to the ring-0 request (NonpropRequestTimeout)"
    )
    rexmt_buffer_size: int = Field(
        50, ge=1, description="RexmtBufferSize; unused: 802.11 feedback replaces network-layer ACKs"
    )
    max_maint_rexmt: int = Field(
        2, ge=0, description="MaxMaintRexmt; unused: 802.11 feedback replaces network-layer ACKs"
    )
    max_salvage_count: int = Field(
        15,
        ge=0,
        le=15,
        description="times one packet may be salvaged (MaxSalvageCount; 4-bit field)",
    )
    grat_reply_holdoff_s: float = Field(
        1.0,
        ge=0,
        description="min gap between gratuitous replies per (source, transmitter) (GratReplyHoldoff)",
    )
    cache_replies: bool = Field(
        False,
        description="intermediate nodes answer requests from their caches (Holland & Vaidya 5: off)",
    )
    salvage: bool = Field(
        True,
        description="re-route a packet over another cached route when its next link breaks (8.4.3)",
    )
    gratuitous_replies: bool = Field(
        True, description="send gratuitous replies to shorten routes (8.4.4)"
    )
    max_route_length: int = Field(
        16, ge=1, le=63, description="longest route in hops; the TUN MTU leaves room for it"
    )
    route_cache_size: int = Field(
        64, ge=1, description="paths the route cache holds (least recently used evicted)"
    )
    request_forward_ratelimit: int = Field(
        10,
        ge=1,
        le=10_000,
        description="max Route Requests this node rebroadcasts per second, all initiators "
        "(RFC 4728 has no number: RFC 3561 10's RREQ_RATELIMIT)",
    )
    rerr_ratelimit: int = Field(
        10, ge=1, le=10_000, description="max Route Errors this node sends per second (RFC 3561 10)"
    )
    target_replies: Literal["every", "first"] = Field(
        "every",
        description="every: the target answers each copy of a request (8.2.4); first: "
        "only the first, one route per discovery (bench smr's single-reply baseline)",
    )
    rediscover_on_break: bool = Field(
        False,
        description="when this node's own packet loses its route, send a Route Request "
        "at once even if another cached route remains (at most one per RequestPeriod); "
        "off until more than one experiment shows it pays for its requests (docs/dsr.md)",
    )
    broken_link_hold_s: float = Field(
        2.0,
        ge=0,
        le=60,
        description="a link seen to fail is not cached again for this long (or until LinkUp)",
    )
    seed: int | None = Field(
        None, description="seed of the jitter's random generator (tests); None = random"
    )

    @model_validator(mode="after")
    def _periods(self) -> DsrConfig:
        if self.request_period_ms / 1000 > self.max_request_period_s:
            raise ValueError(
                f"request_period_ms {self.request_period_ms} exceeds max_request_period_s "
                f"{self.max_request_period_s}"
            )
        return self


def max_overhead(max_route_length: int) -> int:
    """Worst-case bytes DSR adds to a data packet (see :func:`dsr.max_overhead`)."""
    return dsr.max_overhead(max_route_length)
