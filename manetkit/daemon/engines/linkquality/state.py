"""One engine's link-quality state: the estimator and the mechanisms switched on.

Protocol-neutral (DSR and AODV hold one each, only when a mechanism is on); the
engines feed it link sensing's inputs and ask it three things: may this link build
routes (:attr:`LinkQuality.admission`), what does this path cost
(:attr:`LinkQuality.metric`), and does this transmit failure break the link
(:meth:`LinkQuality.tx_failed`). Counters go to the engine's counters.
"""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv4Address
from typing import Any

from manetkit.daemon.engines.base import BeaconHeard, LinkEvent, SignalSample, TxReport
from manetkit.daemon.engines.linkquality.admission import GrayZoneAdmission
from manetkit.daemon.engines.linkquality.config import LinkQualityConfig
from manetkit.daemon.engines.linkquality.estimator import LinkEstimates
from manetkit.daemon.engines.linkquality.metric import EtxMetric
from manetkit.daemon.engines.linkquality.veto import FailureVeto


class LinkQuality:
    def __init__(
        self,
        config: LinkQualityConfig,
        address: IPv4Address,
        counters: Counter[str],
        capacity: int = 1024,
    ) -> None:
        self.cfg = config
        self.address = address
        self.counters = counters
        self.estimates = LinkEstimates(config, capacity)
        self.admission = (
            GrayZoneAdmission(self.estimates, config.admission, counters)
            if config.admission.on
            else None
        )
        self.metric = (
            EtxMetric(address, self.estimates, config.metric)
            if config.metric.kind == "etx"
            else None
        )
        self.veto = FailureVeto(self.estimates, config) if config.veto.enabled else None

    # -- inputs
    def observe(self, now: float, event: LinkEvent) -> bool:
        """Link sensing's observation; True when it is for link quality only (beacons,
        transmit reports), False when the engine has a use for it too."""
        est = self.estimates
        if isinstance(event, SignalSample):
            est.signal(now, event.neighbour, event.signal_dbm)
            return False
        if isinstance(event, BeaconHeard):
            est.beacon(now, event.neighbour, event.seq, event.interval_s)
            return True
        if isinstance(event, TxReport):
            st = est.get(event.neighbour)
            vetoed = st.vetoed if st is not None else 0
            if est.tx_report(now, event.neighbour, event.attempts, event.delivered) and vetoed:
                # Frames got through after vetoed failures: the veto was right.
                self.counters["veto-confirmed"] += vetoed
            return True
        return False

    def tx_failed(self, now: float, nb: IPv4Address) -> bool:
        """802.11 gave up on a frame to ``nb``: True if the link is broken now, False
        if the veto keeps it (the engine then sends the packet again)."""
        st = self.estimates.tx_failed(now, nb)
        if self.veto is None:
            return True
        reason = self.veto.reason_to_break(now, st, self.estimates.smoothed_dbm(now, nb))
        if reason is None:
            if st.vetoed == 0:
                st.first_vetoed = now
            st.vetoed += 1
            self.counters["veto-vetoed"] += 1
            return False
        self.counters[f"veto-break-{reason}"] += 1
        if st.vetoed:
            # A real break the veto held back: how many, and for how long in all.
            self.counters["veto-delayed-breaks"] += 1
            self.counters["veto-delay-ms"] += round((now - st.first_vetoed) * 1000)
        self.estimates.forget_failures(nb)
        return True

    def down_vetoed(self, now: float, nb: IPv4Address, reason: str) -> bool:
        """Link sensing's ``LinkDown`` after a transmit failure that the veto kept: the
        hysteresis counts failures without corroboration, so it is ignored here."""
        if self.veto is None or reason != "tx-failed":
            return False
        st = self.estimates.get(nb)
        if st is None or st.vetoed == 0:
            return False
        self.counters["veto-linkdown-ignored"] += 1
        return True

    # -- reading
    def status(self, now: float) -> dict[str, Any]:
        est = self.estimates
        rows = []
        for nb in sorted(est.links):
            st = est.links[nb]
            sig = est.smoothed_dbm(now, nb)
            etx = est.etx(now, nb)
            beacons = est.beacon_ratio(now, nb, self.cfg.metric.hello_window)
            rows.append(
                {
                    "neighbour": str(nb),
                    "signal_dbm": None if sig is None else round(sig, 1),
                    "slope_db_per_s": round(st.trend.slope, 2) if st.trend.samples else None,
                    "admitted": self.admission.state(now, nb) if self.admission else None,
                    "etx": None if etx is None else round(etx, 2),
                    "beacons": list(beacons) if beacons is not None else None,
                    "failures": st.failures,
                }
            )
        out: dict[str, Any] = {
            "admission": self.cfg.admission.on,
            "metric": self.cfg.metric.kind,
            "veto": self.cfg.veto.enabled,
            "links": rows,
            "bounds": {
                "links": {"size": len(est.links), "limit": est.capacity, "evicted": est.evicted}
            },
        }
        if self.metric is not None:
            out["learnt_costs"] = len(self.metric.learnt)
        return out
