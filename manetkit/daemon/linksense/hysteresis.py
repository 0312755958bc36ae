"""When is a neighbour up, and when is it gone? Sans-I/O, per MAC, with hysteresis.

Raw observations (a hello heard, a station-table row, a unicast tx failure, the
backend's own "no such station") go in with ``now``; decisions come out:
``Up(mac, signal)``, ``Down(mac, reason)``, ``Signal(mac, dbm)``.

The rules (docs/daemon.md "Link sensing"):
  - a neighbour is down after ``silence_s`` without being heard. For the hello backend
    that is ``missed_hellos`` beacon periods (plus half a period for jitter), and
    ``missed_hellos >= 2``: one lost hello never tears a route down;
  - or after ``tx_failures`` consecutive unicast failures (each one is already the
    802.11 MAC giving up after its retries, RFC 4728 8.3 treats one as a break; two
    guards against a single collision burst in a crowded cell);
  - or at once on the backend's explicit evidence (nl80211 "no such station");
  - it is up again when it is heard again.
Any successful hearing resets the consecutive failure count.

Bounded (issue 12, docs/security.md): at most ``capacity`` MACs (the daemon's
``max_neighbours``). A new MAC beyond that evicts a down link first, else the up link
heard least recently, which then goes ``Down(mac, "evicted")`` so the shell forgets it;
counted in ``evicted``. Forged frames from made-up MACs therefore cannot grow it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Up:
    mac: bytes
    signal_dbm: float | None


@dataclass(frozen=True, slots=True)
class Down:
    mac: bytes
    reason: str


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
    ) -> None:
        if silence_s <= 0 or tx_failures < 1 or capacity < 1:
            raise ValueError("silence_s must be > 0, tx_failures >= 1 and capacity >= 1")
        self.capacity = capacity
        self.evicted = 0
        self.silence_s = silence_s
        self.tx_failures = tx_failures
        self.min_signal_dbm = min_signal_dbm
        self._links: dict[bytes, _Link] = {}

    @classmethod
    def for_hello(cls, interval_s: float, missed_hellos: int, **kw: object) -> LinkMonitor:
        """Down after ``missed_hellos`` periods; half a period of slack for jitter."""
        return cls(silence_s=(missed_hellos + 0.5) * interval_s, **kw)  # type: ignore[arg-type]

    # -- inputs
    def heard(self, now: float, mac: bytes, signal_dbm: float | None = None) -> list[Decision]:
        """The neighbour was heard (hello, station row with fresh activity)."""
        if (
            signal_dbm is not None
            and self.min_signal_dbm is not None
            and signal_dbm < self.min_signal_dbm
        ):
            return []  # too weak to count as a link (a gray-zone neighbour)
        out: list[Decision] = []
        link = self._links.get(mac)
        if link is None:
            if len(self._links) >= self.capacity:
                out += self._evict()
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
        return out

    def last_heard(self, now: float, mac: bytes, inactive_s: float) -> list[Decision]:
        """A station table says the neighbour was last heard ``inactive_s`` ago."""
        when = now - inactive_s
        link = self._links.get(mac)
        if link is None or when > link.last_heard:
            if now - when >= self.silence_s:
                return []  # a stale row: the station is listed but silent
            return self.heard(when, mac)
        return []

    def tx_failed(self, now: float, mac: bytes) -> list[Decision]:
        link = self._links.get(mac)
        if link is None or not link.up:
            return []
        link.failures += 1
        if link.failures >= self.tx_failures:
            return self._down(mac, link, "tx-failed")
        return []

    def gone(self, now: float, mac: bytes, reason: str) -> list[Decision]:
        link = self._links.get(mac)
        if link is None or not link.up:
            return []
        return self._down(mac, link, reason)

    def tick(self, now: float) -> list[Decision]:
        """Declare silent neighbours down; call at :meth:`next_deadline`."""
        out: list[Decision] = []
        for mac, link in list(self._links.items()):
            if link.up and now - link.last_heard >= self.silence_s:
                out += self._down(mac, link, "silent")
        return out

    def next_deadline(self) -> float | None:
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

    def _evict(self) -> list[Decision]:
        """Make room: a down link (least recently heard) first, else an up one."""
        mac = min(self._links, key=lambda m: (self._links[m].up, self._links[m].last_heard))
        link = self._links.pop(mac)
        self.evicted += 1
        return [Down(mac, "evicted")] if link.up else []

    def _down(self, mac: bytes, link: _Link, reason: str) -> list[Decision]:
        link.up = False
        link.failures = 0
        return [Down(mac, reason)]
