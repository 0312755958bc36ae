"""Link-quality routing, sans-I/O, shared by the DSR and AODV engines (docs/linkquality.md).

- :mod:`.config` the ``link_quality:`` settings (every mechanism off by default);
- :mod:`.smoothing` EWMA, decayed ratios and a Kalman level-and-slope tracker;
- :mod:`.estimator` per neighbour: smoothed signal, beacon history, data-path delivery;
- :mod:`.admission` neighbour admission against gray zones (signal hysteresis, N of M);
- :mod:`.metric` ETX as the path metric, with costs learnt from discovery;
- :mod:`.veto` the false-failure veto;
- :mod:`.state` one engine's link-quality state (what the engines hold).
"""

from manetkit.daemon.engines.linkquality.config import LinkQualityConfig
from manetkit.daemon.engines.linkquality.state import LinkQuality

__all__ = ["LinkQuality", "LinkQualityConfig"]
