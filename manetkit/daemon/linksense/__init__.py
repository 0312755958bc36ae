"""Link sensing backends: ``lab`` (the lab radio's station table), ``nl80211`` (real
Wi-Fi through pyroute2), ``hello`` (any interface). All speak ``base.LinkSenseBackend``."""
