"""Neighbour admission against gray zones (Lundgren, Nordstroem & Tschudin, WMASH 2002).

Route requests and hellos are broadcasts: 802.11 sends them at the lowest basic rate,
small and unacknowledged, so they reach farther than unicast data at the data rate.
A protocol that builds routes from whatever request reached it builds them over the
longest, worst links, the "gray zone". Lundgren et al.'s fixes (section 5), both here:

- **signal**: a link counts only while its smoothed signal is above a threshold, with
  hysteresis (admitted at ``admit_dbm``, refused again below ``release_dbm``) so a link
  near the edge does not flap with every fade; the smoothing is the estimator's EWMA
  (:mod:`.estimator`). A link with no smoothed signal yet is judged by the one power
  given with it, if any (link sensing's at ``LinkUp``); with none (the hello backend
  reports none) not by this rule;
- **hellos**: a link counts only when N of the last M of the neighbour's beacons came
  (their "N consecutive hellos", generalised as babeld's hello history).

Both on: both must hold. The engines ask through the
:class:`~manetkit.daemon.admission.LinkAdmission` protocol, before a control packet
that came over a link may build a route through it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from ipaddress import IPv4Address

from manetkit.daemon.engines.linkquality.config import AdmissionConfig
from manetkit.daemon.engines.linkquality.estimator import LinkEstimates


class GrayZoneAdmission:
    """A :class:`~manetkit.daemon.admission.LinkAdmission` on the estimator's view."""

    def __init__(
        self, estimates: LinkEstimates, config: AdmissionConfig, counters: Counter[str]
    ) -> None:
        self.estimates = estimates
        self.cfg = config
        self.counters = counters

    def admits(self, now: float, link: Hashable, signal_dbm: float | None) -> bool:
        """The estimator's smoothed signal decides; ``signal_dbm`` (one frame's, or
        link sensing's at ``LinkUp``) only while it has none: one frame says little
        under fading, but more than nothing."""
        if not isinstance(link, IPv4Address):
            return True
        cfg, est = self.cfg, self.estimates
        if cfg.signal and est.smoothed_dbm(now, link) is not None:
            st = est.get(link)
            if st is not None and st.admitted_signal is False:
                self.counters["admission-refused-signal"] += 1
                return False
        elif cfg.signal and signal_dbm is not None and signal_dbm < cfg.admit_dbm:
            self.counters["admission-refused-signal"] += 1
            return False
        if cfg.hellos:
            got = est.beacon_ratio(now, link, cfg.hellos_window)
            if got is None or got[0] < cfg.hellos_heard:
                self.counters["admission-refused-hellos"] += 1
                return False
        return True

    def state(self, now: float, link: IPv4Address) -> bool:
        """Whether ``link`` would be admitted now (status; no counters)."""
        cfg, est = self.cfg, self.estimates
        if cfg.signal and est.smoothed_dbm(now, link) is not None:
            st = est.get(link)
            if st is not None and st.admitted_signal is False:
                return False
        if cfg.hellos:
            got = est.beacon_ratio(now, link, cfg.hellos_window)
            if got is None or got[0] < cfg.hellos_heard:
                return False
        return True
