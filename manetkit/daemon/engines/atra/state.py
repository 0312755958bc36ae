"""One engine's Atra state: the three mechanisms, the links its sources avoid, counters.

Protocol-neutral (DSR and AODV hold one each); the engines' hooks
(:mod:`.dsrhooks`, :mod:`.aodvhooks`) translate it to their messages.
"""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv4Address
from typing import Any

from manetkit import events as ev
from manetkit.daemon.engines.atra.config import AtraConfig
from manetkit.daemon.engines.atra.pre import PreTable
from manetkit.daemon.engines.atra.rfp import Prediction, RfpPredictor
from manetkit.daemon.engines.atra.srp import SrpTable
from manetkit.daemon.engines.atra.trend import LossOf, TrendPredictor

Link = tuple[IPv4Address, IPv4Address]
# Source-side Atra maps (destinations waiting for a way around, links avoided): each
# entry lives 2x the look-ahead; beyond this many the new one is not kept (the route
# then recovers as without RFP, when the link really breaks).
MAX_WAITING = 256


class AtraState:
    """RFP, PRE and SRP for one node, each used only if switched on."""

    def __init__(
        self, config: AtraConfig, address: IPv4Address, loss_of: LossOf | None = None
    ) -> None:
        self.cfg = config
        self.address = address
        self.on = config.enabled
        # RFP's predictor: the paper's distance fit, or the smoothed trend with measured
        # loss (``loss_of``: link quality's estimator, when it runs).
        self.rfp: RfpPredictor | TrendPredictor = (
            TrendPredictor(config, loss_of) if config.predictor == "trend" else RfpPredictor(config)
        )
        # Who used which outgoing link: PRE's table, and RFP's "sources of the active
        # routes over the link" (section IV-A), so kept when either is on.
        self.track = config.rfp or config.pre
        self.pre = PreTable(config.pre_window_s)
        self.srp = SrpTable(config.srp_timeout_s)
        # At a source: links predicted to fail -> until when they are avoided.
        self.avoid: dict[frozenset[IPv4Address], tuple[Link, float]] = {}
        # Destinations this node sent to recently -> time.
        self.active: dict[IPv4Address, float] = {}
        # At a source: destinations waiting for a route that avoids a predicted link,
        # with the route they use meanwhile and that link; each until its deadline
        # (waiting_until: the prediction's horizon, 2x the look-ahead).
        self.waiting: dict[IPv4Address, tuple[tuple[IPv4Address, ...], Link]] = {}
        self.waiting_until: dict[IPv4Address, float] = {}
        self.counters: Counter[str] = Counter()

    # -- RFP
    def signal(self, now: float, neighbour: IPv4Address, dbm: float) -> Prediction | None:
        if not self.cfg.rfp:
            return None
        return self.rfp.sample(now, neighbour, dbm)

    def suppress_request(self, now: float, prev: IPv4Address) -> bool:
        """Do not forward (or answer) a request that came over a link predicted to fail
        (section IV-A: "route requests are suppressed based on the same thresholds")."""
        if self.cfg.rfp and self.rfp.predicted(prev, now):
            self.counters["rreq-suppressed"] += 1
            return True
        return False

    def avoid_link(self, now: float, a: IPv4Address, b: IPv4Address) -> None:
        if len(self.avoid) >= MAX_WAITING:
            self.avoided(now)  # drops the expired ones
            if len(self.avoid) >= MAX_WAITING:
                return
        self.avoid[frozenset((a, b))] = ((a, b), now + 2 * self.cfg.lookahead_s)

    def avoided(self, now: float) -> list[Link]:
        for k in [k for k, (_, until) in self.avoid.items() if until < now]:
            del self.avoid[k]
        return [link for link, _ in self.avoid.values()]

    def wait_for_route(
        self, now: float, dst: IPv4Address, route: tuple[IPv4Address, ...], link: Link
    ) -> None:
        """``dst``'s route crosses a predicted link: look for another until the
        prediction's horizon (2x the look-ahead); the current route stays in use."""
        if dst not in self.waiting and len(self.waiting) >= MAX_WAITING:
            for d in [d for d, until in self.waiting_until.items() if until < now]:
                self.done_waiting(d)
            if len(self.waiting) >= MAX_WAITING:
                return  # bounded: this destination is rerouted when the link breaks
        self.waiting[dst] = (route, link)
        self.waiting_until[dst] = now + 2 * self.cfg.lookahead_s

    def still_waiting(self, now: float, dst: IPv4Address) -> bool:
        """True while ``dst`` waits for a route around a predicted link (expires it)."""
        until = self.waiting_until.get(dst)
        if until is None:
            return False
        if until < now:
            self.done_waiting(dst)
            self.counters["rediscoveries-expired"] += 1
            return False
        return True

    def done_waiting(self, dst: IPv4Address) -> None:
        self.waiting.pop(dst, None)
        self.waiting_until.pop(dst, None)

    def sent_to(self, now: float, dst: IPv4Address) -> None:
        self.active[dst] = now
        if len(self.active) > 256:
            old = now - 2 * self.cfg.lookahead_s
            for d in [d for d, t in self.active.items() if t < old]:
                del self.active[d]

    def active_destinations(self, now: float) -> list[IPv4Address]:
        old = now - max(self.cfg.pre_window_s, self.cfg.lookahead_s)
        return [d for d, t in self.active.items() if t >= old]

    # -- breaks (PRE and RFP bookkeeping)
    def link_failed(self, now: float, neighbour: IPv4Address) -> list[IPv4Address]:
        """A real break: score the prediction; the sources PRE must tell (may be [])."""
        sources = self.pre.link_failed(now, neighbour)
        if self.cfg.rfp:
            self.rfp.link_failed(now, neighbour, in_use=bool(sources))
        self.srp.unpin_via(neighbour)
        self.avoid.pop(frozenset((self.address, neighbour)), None)
        # Waiting for a way around this link is over: it broke (normal recovery now).
        for dst in [d for d, (_, link) in self.waiting.items() if neighbour in link]:
            self.done_waiting(dst)
        return sources if self.cfg.pre else []

    def handle_timer(self, now: float) -> None:
        self.rfp.handle_timer(now)

    def get_timer(self) -> float | None:
        return self.rfp.get_timer()

    def status(self, now: float) -> dict[str, Any]:
        return {
            "rfp": self.cfg.rfp,
            "pre": self.cfg.pre,
            "srp": self.cfg.srp,
            **self.rfp.counters(),
            "predicted_errors_sent": self.counters["predicted-errors-sent"],
            "proactive_errors_sent": self.counters["proactive-errors-sent"],
            "rreq_suppressed": self.counters["rreq-suppressed"],
            "predicted_switches": self.counters["predicted-switches"],
            "rediscoveries": self.counters["rediscoveries"],
            "rediscoveries_expired": self.counters["rediscoveries-expired"],
            "pinned_flows": self.srp.pinned_flows(now),
            "pinned_acks": self.srp.pinned_acks,
            "open_predictions": [str(p.neighbour) for p in self.rfp.open_predictions()],
            "avoided_links": [[str(a), str(b)] for a, b in self.avoided(now)],
        }


def predicted_event(p: Prediction) -> ev.PredictedFailure:
    return ev.PredictedFailure(
        neighbour=str(p.neighbour),
        signal_dbm=p.signal_dbm,
        slope_db_per_s=p.slope_db_per_s,
        eta_s=p.eta_s,
    )
