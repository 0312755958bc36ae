"""Sans-I/O freeze / probe / thaw policy of one proxy session (ELFN and TCP-BuS).

The decisions the mesh leg's modes make on the routing daemon's events, kept apart from
sockets and clocks (the project's core contract, docs/style.md: inputs stamped with ``now``,
outputs drained as typed events with :meth:`Policy.next_event`, one deadline from
:meth:`Policy.get_timer`, handled by :meth:`Policy.handle_timer`):

* ``plain`` and ``fixed-rto``: route events change nothing (fixed-rto lives in the
  kernel's socket options, :mod:`manetkit.proxy.modes`).
* ``elfn`` (Holland & Vaidya section 6): a route-down for the session's flow freezes it;
  every probe interval (fixed, 2 s the paper's best, or 4 x RTT, its suggested
  improvement) the policy asks the daemon to re-discover the route and sends a probe,
  whose answer thaws the session (the session does that itself). A route-up thaws it
  at once. A kernel connection that has backed off would wait out its doubled RTO before
  it sends anything, so it is replaced by a fresh one (whose RESUME is the probe).
* ``bus`` (TCP-BuS, Kim, Toh & Choi section IV): an ERDN freezes the session and waits
  ``bus_wait`` for the pivot's ERSN (IV-B, IV-C); DSR carries the ELFN route-down and the
  ERDN in one Route Error, so an ERDN for a session the route-down already froze turns
  the wait into the ERSN wait. No ERSN in time: probe like elfn.

Inputs: :meth:`Policy.route_event` (a typed event of :mod:`manetkit.events` that concerns
this session's flow), :meth:`Policy.handle_timer`, :meth:`Policy.resumed`; each with the
shell's plain view of the session and its kernel connection (:class:`Leg`).
Outputs (commands to the shell, drained with :meth:`Policy.next_event`): :class:`Freeze`,
:class:`Thaw`, :class:`SendProbe`, :class:`Discover`, :class:`ReplaceLeg`,
:class:`Reconnect`; :meth:`Policy.get_timer` is the next probe.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from manetkit import events
from manetkit.proxy.session import State

FROZEN_STATES = (State.FROZEN, State.PROBING)
MIN_RTT_PROBE_S = 0.2  # rtt probing: never faster than this


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """The mode and its timing (the proxy config's fields of the same names)."""

    mode: str
    probe: str = "fixed"  # "fixed": probe_interval; "rtt": 4 x smoothed RTT
    probe_interval: float = 2.0
    bus_wait: float = 10.0


@dataclass(frozen=True, slots=True)
class Leg:
    """What the shell knows of the session and its kernel connection, as plain values."""

    state: State
    initiator: bool
    has_leg: bool = True
    backed_off: bool = False  # tcp_info: backoff or retransmits > 0
    rtt_ms: float | None = None  # tcp_info: smoothed RTT


# --- events (commands to the shell) --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Freeze:
    """Stop sending data: ``Session.freeze``."""

    why: str


@dataclass(frozen=True, slots=True)
class Thaw:
    """Send again: ``Session.thaw`` (route-up, ersn)."""

    how: str


@dataclass(frozen=True, slots=True)
class SendProbe:
    """``Session.probe`` on the current kernel connection."""


@dataclass(frozen=True, slots=True)
class Discover:
    """Ask the routing daemon for a route request to ``dst`` now (the probe re-finds the
    route, Holland & Vaidya section 6, instead of waiting out the discovery back-off)."""

    dst: str


@dataclass(frozen=True, slots=True)
class ReplaceLeg:
    """Drop the backed-off kernel connection, RESUME on a fresh one (initiator only)."""

    why: str


@dataclass(frozen=True, slots=True)
class Reconnect:
    """The leg is gone and the route is back: dial the next leg now, not after back-off."""


Event = Freeze | Thaw | SendProbe | Discover | ReplaceLeg | Reconnect


def concerns(ev: events.Event, peer: str, leg: tuple[tuple[str, int], int] | None) -> bool:
    """Does a route event concern the session to ``peer`` whose mesh leg has the local
    (address, port) and remote port ``leg`` (None: no leg now)?

    The failed packet may be ours (src = us) or the peer's (dst = us, e.g. our ACKs); an
    event without ports (route-up, or a failed packet that was not TCP) concerns every
    flow to that destination."""
    if not isinstance(ev, events.RouteDown | events.RouteUp | events.Erdn | events.Ersn):
        return False
    src = None if isinstance(ev, events.RouteUp) else ev.src
    if peer not in (ev.dst, src):
        return False
    sport = getattr(ev, "sport", None)
    dport = getattr(ev, "dport", None)
    if leg is None or sport is None or dport is None:
        return True
    (_, lport), rport = leg
    return (sport, dport) in ((lport, rport), (rport, lport))


def probe_interval(cfg: PolicyConfig, rtt_ms: float | None) -> float:
    """ELFN probe period: fixed (2 s was best in the paper) or 4 x RTT, >= 0.2 s."""
    if cfg.probe == "rtt" and rtt_ms is not None and rtt_ms > 0:
        return max(MIN_RTT_PROBE_S, 4 * rtt_ms / 1000)
    return cfg.probe_interval


class Policy:
    """The ELFN / TCP-BuS decisions of one session; see the module docstring."""

    def __init__(self, cfg: PolicyConfig, peer: str) -> None:
        self.cfg = cfg
        self.peer = peer
        self.frozen_by: str | None = None  # the event that froze the session last
        self._outage = False  # frozen by a route event and not resumed since
        self._probe_at: float | None = None
        self._events: deque[Event] = deque()

    @property
    def reacts(self) -> bool:
        """False for plain and fixed-rto: route events change nothing."""
        return self.cfg.mode in ("elfn", "bus")

    @property
    def outage(self) -> bool:
        """Frozen by a route event (route-down, erdn) and not resumed since."""
        return self._outage

    # --- inputs ---------------------------------------------------------------------------

    def route_event(self, now: float, ev: events.Event, leg: Leg) -> None:
        """A daemon event about this session's flow (the shell matched it)."""
        if leg.state is State.CLOSED or not self.reacts:
            return
        if isinstance(ev, events.RouteDown | events.Erdn):
            bus = isinstance(ev, events.Erdn)
            if bus and self.cfg.mode != "bus":
                return
            kind = events.name_of(ev)
            if leg.state is State.FLOWING:
                src = ev.pivot if bus else ev.src  # type: ignore[union-attr]
                # the broken link, when the daemon names it, goes into the log line, so a
                # run can be checked against the medium's ground truth (a false failure?)
                link = None if bus else ev.broken_link  # type: ignore[union-attr]
                where = f", link {link[0]}-{link[1]}" if link else ""
                self._emit(Freeze(f"{kind} from {src or 'daemon'}{where}"))
                self.frozen_by = kind
                self._outage = True
                # bus: a pivot is repairing (its ERSN is due); otherwise probe (ELFN)
                wait = self.cfg.bus_wait if bus else probe_interval(self.cfg, leg.rtt_ms)
                self._probe_at = now + wait
            elif bus and self.frozen_by != kind and leg.state in FROZEN_STATES:
                # DSR carries the ELFN route-down and the ERDN in one Route Error: the
                # route-down froze the session, the ERDN says to wait for the ERSN
                self.frozen_by = kind
                self._probe_at = now + self.cfg.bus_wait
        elif isinstance(ev, events.RouteUp | events.Ersn):
            if leg.state in FROZEN_STATES:
                kind = events.name_of(ev)
                self._probe_at = None
                self._outage = False
                self._emit(Thaw(kind))
                if leg.backed_off and leg.initiator:
                    self._emit(ReplaceLeg(f"{kind}: kernel connection backed off"))
            elif leg.state is State.RESUMING and not leg.has_leg and leg.initiator:
                self._emit(Reconnect())

    def handle_timer(self, now: float, leg: Leg) -> None:
        """The probe deadline passed (the shell calls at or after :meth:`get_timer`)."""
        if self._probe_at is None or now < self._probe_at:
            return
        self._probe_at = None
        if leg.state is State.RESUMING and self._outage:
            # the outage goes on while the next leg's SYN waits for a route: keep asking
            # the daemon to re-find it every probe interval, not only at its back-off
            # (up to 10 s in DSR), or a long break ends late
            self._emit(Discover(self.peer))
            self._probe_at = now + probe_interval(self.cfg, leg.rtt_ms)
            return
        if leg.state not in FROZEN_STATES:
            return
        self._emit(Discover(self.peer))
        if leg.backed_off and leg.initiator:
            # a probe would sit behind the kernel's backed-off retransmission: a fresh
            # connection's SYN is the probe, and its RESUME answers it
            self._emit(ReplaceLeg("probe: kernel connection backed off"))
        elif leg.has_leg:
            self._emit(SendProbe())
        self._probe_at = now + probe_interval(self.cfg, leg.rtt_ms)

    def resumed(self, now: float) -> None:
        """The session resumed on its own (probe answered, RESUME on a new leg)."""
        self._probe_at = None
        self._outage = False

    def closed(self, now: float) -> None:
        self._probe_at = None
        self._events.clear()

    # --- outputs --------------------------------------------------------------------------

    def get_timer(self) -> float | None:
        return self._probe_at

    def next_event(self) -> Event | None:
        """The next command for the shell, None when there is none (drain until None)."""
        return self._events.popleft() if self._events else None

    def _emit(self, event: Event) -> None:
        self._events.append(event)
