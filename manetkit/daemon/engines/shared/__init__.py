"""Pieces the DSR and AODV engines share: TCP-BuS, rate limits, the path metric, the
address memo. (The link admission policy, shared with link sensing too, is
:mod:`manetkit.daemon.admission`.)"""
