"""Which links may build routes: the link admission policy both engines consult.

A frame heard over a link does not prove the link can carry data: on real 802.11 a
route request or hello often arrives over a link too weak for unicast at the data rate
(the "gray zone", Lundgren, Nordstroem & Tschudin, WMASH 2002), and discovery then
builds routes over the longest, worst links. An engine asks its policy before a
control packet that arrived over a link may build a route through it (DSR: a Route
Request; AODV: a RREQ's reverse route and a Hello's neighbour route); a refused packet
is counted and dropped.

The policy is a plug-in: anything with :meth:`LinkAdmission.admits`. The default,
:class:`SignalFloor`, is the rule link sensing has applied since it existed
(``link_sensing.hysteresis.min_signal_dbm``: a neighbour heard weaker than the floor
does not come up); with no floor it admits every link, which is what the engines do
today. The daemon gives the engines a floor-less policy, so routes are built as before.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol


class LinkAdmission(Protocol):
    """Decides whether a frame heard from ``link`` (a neighbour's address in the engines,
    its MAC in link sensing) lets the link count."""

    def admits(self, now: float, link: Hashable, signal_dbm: float | None) -> bool: ...


@dataclass(frozen=True, slots=True)
class SignalFloor:
    """Admit a frame unless its signal is known and below ``min_signal_dbm``."""

    min_signal_dbm: float | None = None

    def admits(self, now: float, link: Hashable, signal_dbm: float | None) -> bool:
        floor = self.min_signal_dbm
        return floor is None or signal_dbm is None or signal_dbm >= floor


ADMIT_ALL = SignalFloor()
