"""Lab paths live in the neutral :mod:`manetkit.paths` (the daemon and proxy use them too)."""

from manetkit.paths import *  # noqa: F403
