"""Real 802.11: the field-test kit for laptops (``field-tests/``) and the qemu +
mac80211_hwsim IBSS rig (``manetkit field vm-test``)."""
