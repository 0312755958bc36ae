"""The one asyncio runner setup for manetkit's processes: uvloop (a dependency).

Only our own loop is uvloop: installing its policy would also hand pyroute2's private
loops (in worker threads) to uvloop, which cannot open netlink sockets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")


def runner() -> asyncio.Runner:
    """An :class:`asyncio.Runner` on a fresh uvloop loop."""
    return asyncio.Runner(loop_factory=uvloop.new_event_loop)


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on uvloop."""
    with runner() as r:
        return r.run(main)
