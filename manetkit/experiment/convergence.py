"""Warm-up until the stack has converged: a route from each traffic source to its
destination, or a stated cap.

A run's window opens at one medium time in every stack (``warmup_s``: the same movement
in every stack's window at a seed and speed). Before it, the runner waits until every
pair of the run's traffic has a route, or until the cap (``convergence_cap_s``, default
``warmup_s``) in medium time, and records when each pair's route was first seen and
whether the cap was hit. A proactive peer (babeld, batmand) converges by itself: its
route is read from the node's kernel routing tables. A reactive manetkit stack finds a
route only when asked, so the runner asks once per pair, as the traffic's first packet
would (the daemon's ``discover`` command, RFC 4728 8.2.1 / RFC 3561 6.3), again every
:data:`ASK_EVERY_S` while none is there, and reads the route from the daemon's status.

A pair that never gets a route before the cap (a partitioned pair, or a stack that has
not converged) does not make the run invalid: the window opens at ``warmup_s`` anyway and
the run says so (``convergence.cap_hit``), in the report too.

:func:`wait_converged` takes the medium's clock, the route probe and the sleep as
callables, so a test drives it with a fake medium; :func:`probes` gives the real ones.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from manetkit import paths
from manetkit.daemonstatus import DaemonStatus, StatusError, fetch_status
from manetkit.jsonlines import request
from manetkit.lab import peers
from manetkit.lab.stacks import node_address

POLL_S = 0.5
ASK_EVERY_S = 5.0  # a manetkit daemon rate-limits its requests itself (RFC 4728 8.2.2)

Pair = tuple[str, str]
HasRoute = Callable[[str, str], bool]
Ask = Callable[[str, str], None]


@dataclass
class Convergence:
    """When each pair's route was first seen (medium seconds), and whether the wait
    ended at the cap."""

    converged: bool
    t_s: float | None  # medium time the last pair's route was seen (None: not all were)
    cap_s: float
    cap_hit: bool
    pairs: dict[str, float | None] = field(default_factory=dict)  # "n1-n3": medium t
    started_s: float = 0.0  # medium time the wait began (the lab was up)
    asked: int = 0  # discover requests sent (manetkit stacks)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def pair_key(pair: Pair) -> str:
    return f"{pair[0]}-{pair[1]}"


def wait_converged(
    pairs: Sequence[Pair],
    has_route: HasRoute,
    medium_time: Callable[[], float],
    cap_s: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    ask: Ask | None = None,
    poll_s: float = POLL_S,
    ask_every_s: float = ASK_EVERY_S,
) -> Convergence:
    """Poll ``has_route(src, dst)`` for every pair (once each per ``poll_s``) until all
    have a route or the medium's time reaches ``cap_s``; ``ask(src, dst)`` (if given)
    first and every ``ask_every_s`` while a pair has none."""
    todo = list(dict.fromkeys(pairs))
    seen: dict[Pair, float] = {}
    asked: dict[Pair, float] = {}
    start = medium_time()
    n_asked = 0
    while True:
        now = medium_time()
        for p in todo:
            if p in seen:
                continue
            if has_route(*p):
                seen[p] = round(now, 3)
            elif ask is not None and (p not in asked or now - asked[p] >= ask_every_s):
                ask(*p)
                asked[p] = now
                n_asked += 1
        done = len(seen) == len(todo)
        if done or now >= cap_s:
            return Convergence(
                converged=done,
                t_s=max(seen.values(), default=round(now, 3)) if done else None,
                cap_s=cap_s,
                cap_hit=not done,
                pairs={pair_key(p): seen.get(p) for p in todo},
                started_s=round(start, 3),
                asked=n_asked,
            )
        sleep(max(0.01, min(poll_s, cap_s - now)))


# --- the real probes -----------------------------------------------------------------------


def kernel_has_route(lab: str, src: str, dst: str) -> bool:
    """``src``'s kernel has a host route to ``dst`` (what babeld and batmand install: the
    connected 10.42.0.0/16 of a batmand node does not count, nor an unreachable route)."""
    addr = str(node_address(dst))
    return any(
        rt.get("type") == "unicast" and rt.get("dst") in (addr, f"{addr}/32")
        for rt in peers.kernel_routes(lab, src)
    )


def daemon_status(lab: str, node: str, timeout: float = 5.0) -> DaemonStatus | None:
    """``node``'s daemon status, None when it does not answer."""
    try:
        return fetch_status(paths.daemon_socket(lab, node), timeout)
    except StatusError:
        return None


def daemon_has_route(lab: str, src: str, dst: str) -> bool:
    """``src``'s daemon holds a usable route to ``dst``: a valid AODV route (RFC 3561
    section 2), a DSR cached path or an SMR path."""
    st = daemon_status(lab, src)
    return st is not None and st.engine.has_route(str(node_address(dst)))


def daemon_discover(lab: str, src: str, dst: str) -> None:
    """Ask ``src``'s daemon for a route to ``dst`` now (as a first packet would)."""
    with contextlib.suppress(OSError, ValueError):
        request(
            paths.daemon_socket(lab, src), {"cmd": "discover", "dst": str(node_address(dst))}, 5
        )


def probes(lab: str, stack: str) -> tuple[HasRoute, Ask | None]:
    """The route probe (and the request, for a reactive manetkit stack) of ``stack``
    (the lab's stack: ``babeld``, ``dsr``, ...)."""
    if stack in peers.PEER_STACKS:
        return (lambda s, d: kernel_has_route(lab, s, d)), None
    return (lambda s, d: daemon_has_route(lab, s, d)), (lambda s, d: daemon_discover(lab, s, d))
