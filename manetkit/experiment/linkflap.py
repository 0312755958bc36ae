"""A traffic's ``link_flap:``: one link of the lab forced down and back during the window.

At each break of the schedule (:meth:`manetkit.experiment.spec.LinkFlap.breaks`: seconds
into the window) the medium is told ``{"cmd": "link", "a", "b", "state": "down"}`` and
``down_s`` later ``"auto"`` (the propagation model decides again: docs/medium.md); the
times each command took effect are kept, in CLOCK_MONOTONIC (the stream receivers'
clock) and Unix time (the daemons' events'), for the ``flap`` plug-in. A thread runs the
schedule beside the traffic; :meth:`Flapper.stop` ends it and leaves the link ``auto``.
"""

from __future__ import annotations

import contextlib
import threading
import time

from manetkit.errors import UserError
from manetkit.experiment.spec import LinkFlap
from manetkit.lab import nodes


def set_link(lab: str, a: str, b: str, state: str) -> None:
    reply = nodes.medium_request(lab, {"cmd": "link", "a": a, "b": b, "state": state})
    if not reply.get("ok"):
        raise UserError(f"the medium refused link {a}-{b} {state}: {reply}")


class Flapper:
    """Runs ``flap``'s breaks from the window's start ``m0`` (monotonic) for ``duration``."""

    def __init__(self, lab: str, flap: LinkFlap, m0: float, duration: float) -> None:
        self.lab, self.flap, self.m0 = lab, flap, m0
        self.plan = flap.breaks(duration)
        self.downs: list[float] = []
        self.ups: list[float] = []
        self.ups_wall: list[float] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _wait_until(self, t: float) -> bool:
        return not self._stop.wait(max(0.0, t - time.monotonic()))

    def _run(self) -> None:
        a, b = self.flap.a, self.flap.b
        try:
            for down, up in self.plan:
                if not self._wait_until(self.m0 + down):
                    return
                set_link(self.lab, a, b, "down")
                self.downs.append(time.monotonic())
                if not self._wait_until(self.m0 + up):
                    return
                set_link(self.lab, a, b, "auto")
                self.ups.append(time.monotonic())
                self.ups_wall.append(time.time())
        except (OSError, ValueError, UserError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        if len(self.downs) > len(self.ups):  # stopped inside a break: the link comes back
            with contextlib.suppress(OSError, ValueError, UserError):
                set_link(self.lab, self.flap.a, self.flap.b, "auto")

    def record(self) -> dict:
        return {"a": self.flap.a, "b": self.flap.b, "breaks": len(self.downs),
                "planned": len(self.plan), "error": self.error}  # fmt: skip
