"""Pieces the DSR and AODV engines share: TCP-BuS, rate limits, the link admission
policy and the path metric."""
