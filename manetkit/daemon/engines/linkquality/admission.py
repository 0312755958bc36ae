"""Neighbour admission against gray zones (Lundgren, Nordstroem & Tschudin, WMASH 2002).

Route requests and hellos are broadcasts: 802.11 sends them at the lowest basic rate,
small and unacknowledged, so they reach farther than unicast data at the data rate.
A protocol that builds routes from whatever request reached it builds them over the
longest, worst links, the "gray zone". Lundgren et al.'s fixes (section 5), both here:

- **signal**: a link counts only while its smoothed signal is above a threshold, with
  hysteresis (admitted at ``admit_dbm``, refused again below ``release_dbm``) so a link
  near the edge does not flap with every fade; the smoothing is the estimator's EWMA
  (:mod:`.estimator`). A link is refused until its smoothing has covered a half-life
  (one loud frame from a gray-zone neighbour must not admit it); the rule needs link
  sensing that reports signals (lab, nl80211: ``--check`` refuses it with hello);
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
        """``signal_dbm`` (one frame's) is not used: under fading one frame says
        little, and a gray-zone neighbour is sometimes heard loud."""
        if not isinstance(link, IPv4Address):
            return True
        why = self._refusal(now, link)
        if why is not None:
            self.counters[f"admission-refused-{why}"] += 1
            return False
        return True

    def _refusal(self, now: float, link: IPv4Address) -> str | None:
        cfg, est = self.cfg, self.estimates
        if cfg.signal:
            st = est.get(link)
            if est.smoothed_dbm(now, link) is None or st is None:
                return "unheard"  # no signal yet: not a link to build routes over
            if now - st.signal_since < cfg.signal_half_life_s:
                return "settling"  # the smoothing has not covered a half-life yet
            if st.admitted_signal is False:
                return "signal"
        if cfg.hellos:
            got = est.beacon_ratio(now, link, cfg.hellos_window)
            if got is None or got[0] < cfg.hellos_heard:
                return "hellos"
        return None

    def state(self, now: float, link: IPv4Address) -> bool:
        """Whether ``link`` would be admitted now (status; no counters)."""
        return self._refusal(now, link) is None
