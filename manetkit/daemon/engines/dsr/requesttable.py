"""DSR's Route Request Table (RFC 4728 4.3, 8.2.2): the request ids recently seen from
each initiator, for duplicate suppression. Bounded: ``request_table_size`` initiators
(the one heard least recently goes), ``request_table_ids`` ids each."""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
from ipaddress import IPv4Address


class RequestTable:
    def __init__(self, size: int, ids: int, counters: Counter[str]) -> None:
        self.size = size
        self.ids = ids
        self.counters = counters
        self.table: OrderedDict[IPv4Address, deque[int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self.table)

    def has(self, init: IPv4Address, ident: int) -> bool:
        ids = self.table.get(init)
        return ids is not None and ident in ids

    def remember(self, init: IPv4Address, ident: int) -> None:
        table = self.table
        ids = table.get(init)
        if ids is None:
            ids = table[init] = deque(maxlen=self.ids)
            if len(table) > self.size:
                table.popitem(last=False)  # the initiator heard least recently
                self.counters["request-table-evicted"] += 1
        else:
            table.move_to_end(init)
        ids.append(ident)

    def seen_else_remember(self, init: IPv4Address, ident: int) -> bool:
        """RFC 4728 8.2.2's rule: True for a duplicate, else remember it (False)."""
        if self.has(init, ident):
            return True
        self.remember(init, ident)
        return False

    def status(self) -> dict[str, list[int]]:
        return {str(k): list(v) for k, v in self.table.items()}
