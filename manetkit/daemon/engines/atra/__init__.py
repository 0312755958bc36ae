"""Atra (Anantharaman, Park, Sundaresan & Sivakumar, section IV-A): three mechanisms
that keep TCP's path alive under mobility, sans-I/O, shared by the DSR and AODV engines.

- :mod:`.rfp` route failure prediction from received signal strength;
- :mod:`.pre` proactive route errors to every recent source of a broken link;
- :mod:`.srp` symmetric route pinning of pure TCP ACKs at the destination;
- :mod:`.config` the ``atra:`` settings (each mechanism switchable, all off by default).
"""

from manetkit.daemon.engines.atra.config import AtraConfig
from manetkit.daemon.engines.atra.pre import PreTable
from manetkit.daemon.engines.atra.rfp import Prediction, RfpPredictor
from manetkit.daemon.engines.atra.srp import SrpTable, is_pure_ack

__all__ = ["AtraConfig", "Prediction", "PreTable", "RfpPredictor", "SrpTable", "is_pure_ack"]
