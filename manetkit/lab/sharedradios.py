"""Every node's radio inside the medium process: the namespace lab's air without relays.

``lab up`` (``--radios shared``, the default for namespace labs) starts the medium with
``--radios shared``; before its event loop runs, the medium makes each node's TAP
``radio0`` *inside that node's namespace* (``netns.entered``: setns(2) on this thread,
open ``/dev/net/tun``, configure, back), keeping the fd. A TAP's fd works from any
namespace, so the medium reads the frames a node sends straight from its TAP and writes
the frames the air delivers straight into the receivers' TAPs: no radio process per
node, no datagram per frame, no second Python process touching each frame. A TAP's
write runs the receiving node's kernel stack (forwarding, TCP) in this process's
system time, which is why the medium's CPU share grows while the lab's total falls.

Everything else the node sees is unchanged (``manetkit.lab.radioport``): radio0 with
the same MAC, the station table, and the node's control socket at the same path
(``paths.radio_control_socket``) speaking the same JSON lines, so daemons, ``lab
stations`` and tests do not know which design runs.

A radio0 that someone deletes (``ip link del radio0``: the fd then reads EBADFD) is made
again after ``REPLUG_S``, as the daemon re-creates a deleted mesh0: the lab's radios are
the lab's fixtures, not the node's software.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from manetkit import paths
from manetkit.lab import netns
from manetkit.lab.radioport import BURST, PROMISC_POLL_S, RadioPort, TapLost, sum_unmodelled
from manetkit.lab.stations import DEFAULT_EXPIRY_S

log = logging.getLogger("manetkit.lab.radio")

REPLUG_S = 0.5

# (node id, frames it sent): the medium puts them on the air
OnFrames = Callable[[int, list[bytes]], None]


class SharedRadios:
    """The radios of nodes n1..nN of ``lab``, served by the calling (medium) process."""

    def __init__(
        self,
        lab: str,
        n: int,
        *,
        station_expiry_s: float = DEFAULT_EXPIRY_S,
        namespace: Callable[[str, str], str] = paths.netns_name,
        control_path: Callable[[str, str], object] = paths.radio_control_socket,
    ) -> None:
        self.lab = lab
        self._namespace = namespace
        # index = node id; [0] unused, so the hot path indexes by id
        self.ports: list[RadioPort | None] = [None] + [
            RadioPort(
                lab,
                f"n{i}",
                control_path=control_path(lab, f"n{i}"),
                station_expiry_s=station_expiry_s,
            )
            for i in range(1, n + 1)
        ]
        self.replugged = 0
        # told (node id, on) when a node's radio0 turns promiscuous or back
        self.on_promiscuous: Callable[[int, bool], None] | None = None
        # told (node id, False) when a node's radio0 was deleted, (node id, True) when it
        # is back: meanwhile the medium treats the node as detached (it hears nothing)
        self.on_air: Callable[[int, bool], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_frames: OnFrames | None = None
        self._tasks: list[asyncio.Task] = []

    def __iter__(self):
        return (p for p in self.ports if p is not None)

    # --- set-up ---------------------------------------------------------------------

    def create(self) -> None:
        """Make every node's radio0 in its namespace (blocking; before the loop runs)."""
        made = []
        try:
            for port in self:
                self._create(port)
                made.append(port)
        except BaseException:
            for port in made:
                port.close()
            raise

    def _create(self, port: RadioPort) -> None:
        ns = self._namespace(self.lab, port.node)
        try:
            with netns.entered(ns):
                port.create_tap()
        except FileNotFoundError:
            raise OSError(f"namespace {ns} of {port.node} does not exist") from None
        port.set_on_air(True)

    async def start(self, on_frames: OnFrames) -> None:
        """Read every TAP into ``on_frames``; serve the control sockets."""
        self._loop = asyncio.get_running_loop()
        self._on_frames = on_frames
        for port in self:
            self._loop.add_reader(port.tap_fd, self._on_tap_readable, port)
        for port in self:
            await port.control.start()
        self._tasks = [
            asyncio.create_task(self._housekeeping()),
            asyncio.create_task(self._watch_promiscuous()),
        ]

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        for port in self:
            await port.control.close()
            if port.tap_fd >= 0 and self._loop is not None:
                self._loop.remove_reader(port.tap_fd)
            port.close()

    # --- hot path -------------------------------------------------------------------

    def _on_tap_readable(self, port: RadioPort) -> None:
        try:
            frames = port.read_tap(BURST)
        except TapLost as exc:
            frames = exc.frames  # type: ignore[attr-defined]
            self._lost(port, exc)
        if frames:
            self._on_frames(port.node_id, frames)

    # --- radio0 deleted ---------------------------------------------------------------

    def _lost(self, port: RadioPort, exc: OSError) -> None:
        log.error(
            "%s's %s was removed (%s): making it again in %g s",
            port.node,
            port.interface,
            exc.strerror,
            REPLUG_S,
        )
        self._loop.remove_reader(port.tap_fd)
        port.close_tap()
        port.promiscuous = False  # the new radio0 starts without IFF_PROMISC
        if self.on_air is not None:
            self.on_air(port.node_id, False)
        self._loop.call_later(REPLUG_S, self._replug, port)

    def _replug(self, port: RadioPort) -> None:
        try:
            self._create(port)
        except OSError as exc:
            log.error("cannot make %s's %s again: %s", port.node, port.interface, exc)
            return
        self.replugged += 1
        if self.on_air is not None:
            self.on_air(port.node_id, True)
        self._loop.add_reader(port.tap_fd, self._on_tap_readable, port)
        log.warning("%s's %s is back", port.node, port.interface)

    # --- periodic ---------------------------------------------------------------------

    async def _housekeeping(self) -> None:
        """Expire silent stations once a second (mac80211's sta cleanup timer)."""
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for port in self:
                port.expire(now)

    async def _watch_promiscuous(self) -> None:
        while True:
            for port in self:
                if port.tap_fd >= 0 and port.poll_promiscuous() and self.on_promiscuous:
                    self.on_promiscuous(port.node_id, port.promiscuous)
            await asyncio.sleep(PROMISC_POLL_S)

    # --- reports ----------------------------------------------------------------------

    def unmodelled(self) -> dict[str, int]:
        """Every port's losses outside the model, summed (``RadioPort.unmodelled``)."""
        return sum_unmodelled([p.unmodelled() for p in self])

    def stats(self) -> dict:
        keys = ("tx_frames", "rx_frames", "rx_dropped", "tx_failed", "rx_overheard")
        out = {k: sum(p.counters[k] for p in self) for k in keys}
        out["replugged"] = self.replugged
        out["subscribers"] = sum(p.control.subscribers for p in self)
        return out
