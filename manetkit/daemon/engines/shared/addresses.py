"""Packed 4-byte addresses to :class:`IPv4Address`, memoised: the data path reads
addresses from packet bytes and must not build an object per packet."""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv4Address

MAX_ADDRESSES = 4096  # then the memo starts again (counted ``memo-cleared``)


class AddressMemo:
    __slots__ = ("_memo", "_counters")

    def __init__(self, counters: Counter[str]) -> None:
        self._memo: dict[bytes, IPv4Address] = {}
        self._counters = counters

    def __call__(self, packed: bytes) -> IPv4Address:
        a = self._memo.get(packed)
        if a is None:
            if len(self._memo) > MAX_ADDRESSES:
                self._memo.clear()
                self._counters["memo-cleared"] += 1
            a = self._memo[packed] = IPv4Address(packed)
        return a
