"""SMR's settings (YAML ``smr:``): DSR's parameters plus the multipath ones."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from manetkit.daemon.engines.dsr.config import DsrConfig
from manetkit.daemon.engines.smr.pathselect import Mode


class SmrConfig(DsrConfig):
    """SMR settings (YAML ``smr:``): DSR's parameters plus the multipath ones."""

    mode: Mode = Field(
        Mode.BACKUP1,
        description="concurrent (round robin, SMR IV), backup1 (shortest hop + shortest "
        "delay, V-B.1) or backup2 (shortest delay + maximally disjoint, V-B.2)",
    )
    paths: int = Field(
        2, ge=1, le=8, description="routes kept per destination (Lim/Xu/Gerla V-A: 2 is best)"
    )
    reply_wait_ms: float = Field(
        100.0,
        ge=0,
        le=10_000,
        description="the destination's wait for more request copies after its first reply",
    )
    rediscover_on_break: bool = Field(
        False,
        description="DSR's ask-at-once after a break; off: SMR's rediscover policy decides",
    )
    rediscover: Literal["all-broken", "any-broken"] = Field(
        "all-broken", description="ask again when every path broke, or at any break (III-A)"
    )
    after_all_broken: Literal["discover", "cache"] = Field(
        "discover",
        description="once every path broke: discover a new primary and backup with the "
        "next packet (III-A, V-A), or route by DSR's cache until a discovery happens",
    )
    max_path_age_s: float | None = Field(
        None,
        gt=0,
        le=3600,
        description="drop an alternate path this long after the reply that brought or last "
        "confirmed it (V-A: alternates go stale under mobility); none: kept until it breaks",
    )

    @model_validator(mode="after")
    def _no_cached_replies(self) -> SmrConfig:
        if self.cache_replies:
            raise ValueError(
                "cache_replies: SMR floods requests to the destination and never answers "
                "from caches (Lim/Xu/Gerla III-A); leave it false"
            )
        if self.target_replies != "every":
            raise ValueError(
                "target_replies: SMR's destination answers by its mode (the first copy "
                "at once, the others chosen after reply_wait_ms, V-B); leave it every"
            )
        return self
