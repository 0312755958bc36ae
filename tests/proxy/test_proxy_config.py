"""The proxy's timeouts: an idle stream's limit and its default."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from manetkit.proxy.config import IDLE_TIMEOUT_DEFAULT, ProxyConfig


def test_idle_timeout_defaults_to_fifteen_minutes_or_the_partition_timeout() -> None:
    assert ProxyConfig(daemon_socket=None).idle_limit == IDLE_TIMEOUT_DEFAULT
    long = ProxyConfig(daemon_socket=None, partition_timeout=3600)
    assert long.idle_limit == 3600  # never shorter than the limit of a stream that owes
    assert ProxyConfig(daemon_socket=None, idle_timeout=300).idle_limit == 300


def test_the_default_partition_timeout_keeps_rfc_1122s_floor_for_giving_up_on_data() -> None:
    """RFC 1122 section 4.2.3.5: R2 for data SHOULD be at least 100 s; a proxy that reset
    sooner would cut app streams that plain TCP carries over the same break."""
    cfg = ProxyConfig(daemon_socket=None)
    assert cfg.partition_timeout >= 100
    assert cfg.idle_limit >= cfg.partition_timeout


def test_an_idle_timeout_below_the_partition_timeout_is_refused_naming_both() -> None:
    with pytest.raises(ValidationError, match="idle_timeout must be at least partition_timeout"):
        ProxyConfig(daemon_socket=None, partition_timeout=30, idle_timeout=10)
