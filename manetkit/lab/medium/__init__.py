"""The emulated 802.11 medium: one process, every node's radio attaches to it.

Modules: ``protocol`` (radio <-> medium datagrams), ``propagation`` (two-ray ground),
``mobility`` and ``setdest`` (where nodes are), ``airtime`` (802.11 timings), ``mac``
(who transmits when: carrier sense, queues, retries), ``groundtruth`` (connectivity over
time), ``server`` (the asyncio shell).
"""
