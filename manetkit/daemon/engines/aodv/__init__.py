"""AODV (RFC 3561), composed from one module per concern (see :mod:`.engine`)."""

from manetkit.daemon.engines.aodv.config import AodvConfig
from manetkit.daemon.engines.aodv.engine import AodvEngine

__all__ = ["AodvConfig", "AodvEngine"]
