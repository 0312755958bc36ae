"""DSR (RFC 4728), composed from one module per concern (see :mod:`.engine`)."""

from manetkit.daemon.engines.dsr.engine import DsrConfig, DsrEngine, max_overhead

__all__ = ["DsrConfig", "DsrEngine", "max_overhead"]
