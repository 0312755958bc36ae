"""DSR (RFC 4728), composed from one module per concern (see :mod:`.engine`)."""

from manetkit.daemon.engines.dsr.config import DsrConfig, max_overhead
from manetkit.daemon.engines.dsr.engine import DsrEngine

__all__ = ["DsrConfig", "DsrEngine", "max_overhead"]
