"""What an AODV node knows about routes: its route table (:mod:`.routetable`) as the
engine feeds and invalidates it (RFC 3561 6.2, 6.7, 6.11).

- An update (a RREQ's reverse route, a RREP's forward route, a Hello's neighbour route)
  replaces an entry only with fresher information (6.2), the cost by the path metric;
  a route that becomes valid is reported to the engine (route-up, the send buffer).
- A control packet from a neighbour makes a one-hop route to it (6.5, 6.7).
- Invalidation (break or lifetime expiry) marks an entry invalid, kept for its
  sequence number until DELETE_PERIOD (6.11). Any invalidation increments the
  destination sequence number (6.1 allows it "when the path expires or breaks"), so a
  node whose route expired never accepts a route back through an upstream node that
  still holds the old number: no loop (AODV-UU does the same). Expiry is silent (no
  route-down): an idle route is not a break, and the proxy must not freeze a flow
  because of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from ipaddress import IPv4Address
from typing import Any

from manetkit import events as ev
from manetkit.daemon.engines.aodv.config import AodvConfig
from manetkit.daemon.engines.aodv.deadline import Deadline
from manetkit.daemon.engines.aodv.routetable import VALID, Route, RouteState, RouteTable
from manetkit.daemon.engines.base import Outbox
from manetkit.daemon.engines.shared.metric import PathMetric


class Routes:
    def __init__(
        self,
        address: IPv4Address,
        config: AodvConfig,
        metric: PathMetric,
        deadline: Deadline,
        out: Outbox,
        counters: Counter[str],
        became_valid: Callable[[float, Route, RouteState | None], None],
    ) -> None:
        self.address = address
        self.table = RouteTable(config.route_table_size, counters)
        self.metric = metric
        self.deadline = deadline
        self.out = out
        self.counters = counters
        self.became_valid = became_valid  # the engine's route-up
        self.active_route_timeout = config.active_route_timeout_ms / 1000
        self.delete_period = config.delete_period_ms / 1000

    def update(
        self,
        now: float,
        dst: IPv4Address,
        next_hop: IPv4Address,
        hops: int,
        seq: int,
        lifetime: float,
        advertised: float | None = None,
    ) -> tuple[Route, bool]:
        """Create or update the route to ``dst`` if the information is fresher (6.2, 6.7;
        the rule is :meth:`RouteTable.update`). Returns (entry, changed). The cost is
        the advertised one (the message's path metric, else the hop count it carries)
        plus the link's."""
        if advertised is None:
            advertised = hops - 1
        cost = advertised + self.metric.link_cost(now, self.address, next_hop)
        got = self.table.update(now, dst, next_hop, hops, seq, lifetime, cost)
        if got is None:
            return self.table.get(dst.packed), False  # type: ignore[return-value]
        r, was = got
        self._valid(now, r, was)
        return r, True

    def touch_neighbour(self, now: float, nb: IPv4Address) -> Route:
        """6.5/6.7: a route to the neighbour that sent a control packet (1 hop)."""
        cost = self.metric.link_cost(now, self.address, nb)
        r, was = self.table.touch_neighbour(now, nb, self.active_route_timeout, cost)
        self._valid(now, r, was)
        return r

    def _valid(self, now: float, r: Route, was: RouteState | None) -> None:
        self.deadline.lower(r.expires)
        if was is not VALID:
            self.became_valid(now, r, was)

    def invalidate(
        self, now: float, r: Route, reason: str, notify: dict[str, Any] | None = None
    ) -> None:
        """Mark ``r`` invalid, deleted after DELETE_PERIOD (6.11); route-down."""
        self.table.invalidate(r, now + self.delete_period)
        self.deadline.lower(r.expires)
        fields: dict[str, Any] = {"dst": str(r.dst), "next_hop": str(r.next_hop), "reason": reason}
        if notify:
            fields.update(notify)
        self.out.notify(ev.RouteDown(**fields))

    def expire(self, now: float) -> None:
        # Lifetime over (6.11 "expires"): invalid with the number bumped (6.1), then gone.
        expired = self.table.expire(now, self.delete_period)
        if expired:
            self.counters["routes-expired"] += expired

    def upstream(self, src: bytes) -> IPv4Address | None:
        """The next hop towards ``src`` (packed; a flow's source), if the route is valid."""
        r = self.table.get(src)
        return r.next_hop if r is not None and r.state is VALID else None
