"""What one node has observed of each neighbour's link (sans-I/O, inputs stamped ``now``).

Per neighbour, from link sensing's inputs (:mod:`manetkit.daemon.engines.base`):

- the **signal** (``SignalSample``: on the lab and nl80211 backends the mean power of the
  frames heard in a poll), smoothed twice: an EWMA for admission (with the hysteresis
  state: admitted or refused) and a Kalman level-and-slope for the trend;
- the **beacons** (``BeaconHeard``: the daemon's neighbour beacons, one every
  ``interval_s`` with a sequence number): which of the last beacons came, as babeld
  keeps a hello history (RFC 8966 3.4.1), so "N of the last M" and the reverse delivery
  ratio of ETX (De Couto et al. 2003, section 4: the probes of the last w seconds) are
  counted from sequence numbers and the time since the last one;
- the **data path** (``TxReport``: the station table's transmit counters between two
  polls): attempts and delivered frames, a decayed ratio, so a link's ETX at the rate
  data really goes out is ``attempts / delivered`` (each 802.11 attempt needs the frame
  forward and the ACK back: De Couto's ``1 / (d_f * d_r)`` measured, not modelled);
- **transmit failures** (``TxFailed``): consecutive ones since the last delivery, and
  when the first of them came (the false-failure veto).

Bounded (docs/security.md "Bounded state"): at most ``capacity`` neighbours; a new one
beyond that evicts the one heard least recently (counted in ``evicted``).
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address

from manetkit.daemon.engines.linkquality.config import LinkQualityConfig
from manetkit.daemon.engines.linkquality.smoothing import DecayedRatio, Ewma, KalmanTrend

RECENT_S = 1.0  # half-life of the recent delivery ratio (Atra's trigger)
HISTORY_BITS = 64  # beacons remembered per neighbour (config windows are <= 64)
_MASK = (1 << HISTORY_BITS) - 1


@dataclass(slots=True)
class Beacons:
    """A neighbour's beacons: bit i of ``history`` set = beacon ``seq - i`` came."""

    seq: int
    at: float
    interval: float
    history: int = 1
    known: int = 1  # beacon positions the history covers (since the first one heard)

    def heard(self, now: float, seq: int, interval: float) -> None:
        gap = (seq - self.seq) & 0xFFFFFFFF
        if gap == 0 or gap >= 0x80000000:
            return  # a duplicate or an old one (reordered): nothing new
        if gap > HISTORY_BITS * 4:
            self.history, self.known = 1, 1  # a restart or a long absence: start over
        else:
            self.history = ((self.history << gap) | 1) & _MASK
            self.known = min(self.known + gap, HISTORY_BITS)
        self.seq, self.at, self.interval = seq, now, interval

    def counts(self, now: float, window: int) -> tuple[int, int]:
        """(heard, covered) over the last ``window`` beacons the neighbour should have
        sent by ``now``: those after the last one heard count as missed (with half an
        interval of slack for jitter); ``covered`` is less than ``window`` only for a
        neighbour first heard fewer than ``window`` beacons ago."""
        missed = int((now - self.at) / self.interval - 0.5) if self.interval > 0 else 0
        missed = max(missed, 0)
        covered = min(window, self.known + missed)
        if missed >= window:
            return 0, window
        bits = self.history & ((1 << (window - missed)) - 1)
        return bin(bits).count("1"), covered


@dataclass(slots=True)
class LinkState:
    """What is known of the link to one neighbour."""

    signal: Ewma
    trend: KalmanTrend
    tx: DecayedRatio
    tx_recent: DecayedRatio  # the last second or so (Atra's measured loss)
    last_heard: float = float("-inf")
    signal_at: float = float("-inf")
    signal_since: float = float("inf")  # first sample of the current smoothing
    admitted_signal: bool | None = None  # hysteresis state; None: no signal yet
    beacons: Beacons | None = None
    failures: int = 0  # consecutive transmit failures since the last delivery
    vetoed: int = 0  # failures vetoed since the last delivery or break
    first_vetoed: float = 0.0
    last_failure: float = float("-inf")


class LinkEstimates:
    def __init__(self, config: LinkQualityConfig, capacity: int = 1024) -> None:
        self.cfg = config
        self.capacity = capacity
        self.evicted = 0
        self.links: dict[IPv4Address, LinkState] = {}

    def _state(self, now: float, nb: IPv4Address) -> LinkState:
        st = self.links.get(nb)
        if st is None:
            if len(self.links) >= self.capacity:
                victim = min(self.links, key=lambda n: self.links[n].last_heard)
                del self.links[victim]
                self.evicted += 1
            st = self.links[nb] = LinkState(
                Ewma(self.cfg.admission.signal_half_life_s),
                KalmanTrend(),
                DecayedRatio(self.cfg.metric.memory_s),
                DecayedRatio(RECENT_S),
            )
        return st

    def get(self, nb: IPv4Address) -> LinkState | None:
        return self.links.get(nb)

    # -- inputs
    def signal(self, now: float, nb: IPv4Address, dbm: float) -> LinkState:
        """A received power from ``nb`` (the smoothed value and the hysteresis follow)."""
        st = self._state(now, nb)
        adm = self.cfg.admission
        if now - st.signal_at > 4 * adm.signal_half_life_s + self.cfg.metric.memory_s:
            st.signal.value = None  # so old it says nothing: start over
            st.admitted_signal = None
        if st.signal.value is None:
            st.signal_since = now
        v = st.signal.update(now, dbm)
        st.trend.update(now, dbm)
        st.signal_at = now
        st.last_heard = max(st.last_heard, now)
        if st.admitted_signal is None:
            st.admitted_signal = v >= adm.admit_dbm
        elif st.admitted_signal and v < adm.release_dbm:
            st.admitted_signal = False
        elif not st.admitted_signal and v >= adm.admit_dbm:
            st.admitted_signal = True
        return st

    def beacon(self, now: float, nb: IPv4Address, seq: int, interval_s: float) -> None:
        st = self._state(now, nb)
        if st.beacons is None:
            st.beacons = Beacons(seq, now, interval_s)
        else:
            st.beacons.heard(now, seq, interval_s)
        st.last_heard = max(st.last_heard, now)

    def tx_report(self, now: float, nb: IPv4Address, attempts: int, delivered: int) -> bool:
        """Transmit counters between two polls; True if a failure streak ended."""
        st = self._state(now, nb)
        if attempts > 0:
            st.tx.add(now, attempts, min(delivered, attempts))
            st.tx_recent.add(now, attempts, min(delivered, attempts))
        if delivered > 0 and st.failures and now > st.last_failure:
            st.failures = 0
            st.vetoed = 0
            return True
        return False

    def tx_failed(self, now: float, nb: IPv4Address) -> LinkState:
        st = self._state(now, nb)
        st.failures += 1
        st.last_failure = now
        return st

    def forget_failures(self, nb: IPv4Address) -> None:
        st = self.links.get(nb)
        if st is not None:
            st.failures = 0
            st.vetoed = 0

    # -- estimates
    def smoothed_dbm(self, now: float, nb: IPv4Address) -> float | None:
        st = self.links.get(nb)
        if st is None or st.signal.value is None:
            return None
        if (
            now - st.signal_at
            > 4 * self.cfg.admission.signal_half_life_s + self.cfg.metric.memory_s
        ):
            return None
        return st.signal.value

    def beacon_ratio(self, now: float, nb: IPv4Address, window: int) -> tuple[int, int] | None:
        st = self.links.get(nb)
        if st is None or st.beacons is None:
            return None
        return st.beacons.counts(now, window)

    def etx(self, now: float, nb: IPv4Address) -> float | None:
        """Expected transmissions per delivered frame to ``nb``: the data path's
        ``attempts / delivered`` when enough attempts are recent, else ``1 / d_r^2``
        from the beacons (the reverse ratio standing for both directions: the beacons
        carry no forward ratio); None when nothing is known."""
        m = self.cfg.metric
        st = self.links.get(nb)
        if st is None:
            return None
        if st.tx.weight(now) >= m.min_attempts:
            ratio = st.tx.ratio()
            if ratio is not None:
                return min(1 / ratio, m.max_cost) if ratio > 0 else m.max_cost
        if st.beacons is not None:
            heard, covered = st.beacons.counts(now, m.hello_window)
            if heard == 0:
                return m.max_cost
            dr = min(heard / covered, 1.0)
            return min(1 / (dr * dr), m.max_cost)
        return None

    def recent_loss(self, now: float, nb: IPv4Address) -> float | None:
        """The share of 802.11 attempts to ``nb`` that failed in the last second or so
        (at least 2 attempts, decayed), else of its last 4 beacons that did not come,
        else None: Atra's measured loss (``atra.predictor: trend``)."""
        st = self.links.get(nb)
        if st is None:
            return None
        if st.tx_recent.weight(now) >= 2:
            ratio = st.tx_recent.ratio()
            if ratio is not None:
                return 1 - ratio
        if st.beacons is not None:
            heard, covered = st.beacons.counts(now, 4)
            return 1 - heard / covered if covered else None
        return None
