"""SMR (Lee & Gerla; Lim, Xu & Gerla): DSR with a multipath path strategy."""

from manetkit.daemon.engines.smr.config import SmrConfig
from manetkit.daemon.engines.smr.engine import SmrEngine
from manetkit.daemon.engines.smr.pathselect import Mode

__all__ = ["Mode", "SmrConfig", "SmrEngine"]
