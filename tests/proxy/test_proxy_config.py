"""The proxy's timeouts: an idle stream's limit and its default."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from manetkit.proxy.config import IDLE_TIMEOUT_DEFAULT, ProxyConfig


def test_idle_timeout_defaults_to_fifteen_minutes_or_the_partition_timeout() -> None:
    assert ProxyConfig(daemon_socket=None).idle_limit == IDLE_TIMEOUT_DEFAULT
    long = ProxyConfig(daemon_socket=None, partition_timeout=3600)
    assert long.idle_limit == 3600  # never shorter than the limit of a stream that owes
    assert ProxyConfig(daemon_socket=None, idle_timeout=60).idle_limit == 60


def test_an_idle_timeout_below_the_partition_timeout_is_refused_naming_both() -> None:
    with pytest.raises(ValidationError, match="idle_timeout must be at least partition_timeout"):
        ProxyConfig(daemon_socket=None, partition_timeout=30, idle_timeout=10)
