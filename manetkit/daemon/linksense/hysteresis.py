"""When is a neighbour up, and when is it gone? Sans-I/O, per MAC, with hysteresis.

A core in the shape of docs/style.md: raw observations (a hello heard, a station-table
row, a unicast tx failure, the backend's own "no such station") go in with ``now``;
decisions are drained with :meth:`LinkMonitor.next_event`: ``Up(mac, signal)``,
``Down(mac, reason, last_heard)``, ``Signal(mac, dbm)``; one timer (:meth:`LinkMonitor.get_timer`,
:meth:`LinkMonitor.handle_timer`) declares silent neighbours down.

The rules (docs/daemon.md "Link sensing"):
  - a neighbour is down after ``silence_s`` without being heard. For the hello backend
    that is ``missed_hellos`` beacon periods (plus half a period for jitter), and
    ``missed_hellos >= 2``: one lost hello never tears a route down;
  - or after ``tx_failures`` consecutive unicast failures (each one is already the
    802.11 MAC giving up after its retries, RFC 4728 8.3 treats one as a break; two
    guards against a single collision burst in a crowded cell);
  - or at once on the backend's explicit evidence (nl80211 "no such station");
  - it is up again when it is heard again;
  - a frame the link admission policy refuses does not count as hearing the neighbour
    (:mod:`manetkit.daemon.admission`; the default, ``min_signal_dbm``,
    ignores stations weaker than the floor: gray-zone neighbours).
Any successful hearing resets the consecutive failure count.

Bounded (docs/security.md "Bounded state"): at most ``capacity`` MACs (the daemon's
``max_neighbours``). A new MAC beyond that evicts a down link first, else the up link
heard least recently, which then goes ``Down(mac, "evicted")`` so the shell forgets it;
counted in ``evicted``. Forged frames from made-up MACs therefore cannot grow it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from manetkit.daemon.admission import LinkAdmission, SignalFloor


@dataclass(frozen=True, slots=True)
class Up:
    mac: bytes
    signal_dbm: float | None


@dataclass(frozen=True, slots=True)
class Down:
    """``mac`` is gone; ``last_heard``: when it was last heard (the monitor's clock): a
    silent neighbour is declared down ``silence_s`` after that."""

    mac: bytes
    reason: str
    last_heard: float | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Signal:
    mac: bytes
    signal_dbm: float


Decision = Up | Down | Signal


@dataclass(slots=True)
class _Link:
    last_heard: float
    up: bool = True
    failures: int = 0
    signal_dbm: float | None = None


class LinkMonitor:
    def __init__(
        self,
        silence_s: float,
        tx_failures: int = 2,
        min_signal_dbm: float | None = None,
        capacity: int = 1024,
        admission: LinkAdmission | None = None,
    ) -> None:
        if silence_s <= 0 or tx_failures < 1 or capacity < 1:
            raise ValueError("silence_s must be > 0, tx_failures >= 1 and capacity >= 1")
        self.capacity = capacity
        self.evicted = 0
        self.silence_s = silence_s
        self.tx_failures = tx_failures
        self.admission = admission if admission is not None else SignalFloor(min_signal_dbm)
        self._links: dict[bytes, _Link] = {}
        self._events: deque[Decision] = deque()

    @classmethod
    def for_hello(cls, interval_s: float, missed_hellos: int, **kw: object) -> LinkMonitor:
        """Down after ``missed_hellos`` periods; half a period of slack for jitter."""
        return cls(silence_s=(missed_hellos + 0.5) * interval_s, **kw)  # type: ignore[arg-type]

    # -- inputs
    def heard(self, now: float, mac: bytes, signal_dbm: float | None = None) -> None:
        """The neighbour was heard (hello, station row with fresh activity)."""
        if not self.admission.admits(now, mac, signal_dbm):
            return  # too weak to count as a link (a gray-zone neighbour)
        out = self._events
        link = self._links.get(mac)
        if link is None:
            if len(self._links) >= self.capacity:
                self._evict()
            link = self._links[mac] = _Link(now, signal_dbm=signal_dbm)
            out.append(Up(mac, signal_dbm))
        else:
            link.last_heard = max(link.last_heard, now)
            link.failures = 0
            if signal_dbm is not None:
                link.signal_dbm = signal_dbm
            if not link.up:
                link.up = True
                out.append(Up(mac, signal_dbm))
        if signal_dbm is not None:
            out.append(Signal(mac, signal_dbm))

    def last_heard(self, now: float, mac: bytes, inactive_s: float) -> None:
        """A station table says the neighbour was last heard ``inactive_s`` ago."""
        when = now - inactive_s
        link = self._links.get(mac)
        if link is None or when > link.last_heard:
            if now - when >= self.silence_s:
                return  # a stale row: the station is listed but silent
            self.heard(when, mac)

    def tx_failed(self, now: float, mac: bytes) -> None:
        link = self._links.get(mac)
        if link is None or not link.up:
            return
        link.failures += 1
        if link.failures >= self.tx_failures:
            self._down(mac, link, "tx-failed")

    def gone(self, now: float, mac: bytes, reason: str) -> None:
        link = self._links.get(mac)
        if link is None or not link.up:
            return
        self._down(mac, link, reason)

    def handle_timer(self, now: float) -> None:
        """Declare silent neighbours down; call at :meth:`get_timer`."""
        for mac, link in list(self._links.items()):
            if link.up and now - link.last_heard >= self.silence_s:
                self._down(mac, link, "silent")

    # -- outputs
    def next_event(self) -> Decision | None:
        """The next decision, oldest first; None when all were taken."""
        return self._events.popleft() if self._events else None

    def get_timer(self) -> float | None:
        """When the next up neighbour falls silent, if it is not heard before."""
        return min(
            (lk.last_heard + self.silence_s for lk in self._links.values() if lk.up), default=None
        )

    # -- reading
    def is_up(self, mac: bytes) -> bool:
        link = self._links.get(mac)
        return bool(link and link.up)

    def signal(self, mac: bytes) -> float | None:
        link = self._links.get(mac)
        return link.signal_dbm if link else None

    def _evict(self) -> None:
        """Make room: a down link (least recently heard) first, else an up one."""
        mac = min(self._links, key=lambda m: (self._links[m].up, self._links[m].last_heard))
        link = self._links.pop(mac)
        self.evicted += 1
        if link.up:
            self._events.append(Down(mac, "evicted", link.last_heard))

    def _down(self, mac: bytes, link: _Link, reason: str) -> None:
        link.up = False
        link.failures = 0
        self._events.append(Down(mac, reason, link.last_heard))
