"""The emulated 802.11 medium: one process, every node's radio attaches to it.

Modules: ``protocol`` (radio <-> medium datagrams), ``mobility`` and ``setdest`` (where
nodes are), ``airtime`` (802.11 timings), ``groundtruth`` (connectivity over time),
``server`` (the asyncio shell). The ns2 profile: ``propagation`` (two-ray ground),
``topology`` (who hears whom), ``mac`` (who transmits when: carrier sense, queues,
retries). The realistic profiles: ``profiles`` (parameters, defaults, sources),
``pathloss``, ``shadowing``, ``fading``, ``power`` (units, noise), ``channel`` (the link
budget over time, the ground-truth rule), ``errormodels``, ``ratecontrol``, ``queues``
(access categories; ns-2's PriQueue), ``realistic`` (the SINR MAC), ``curves``
(validation curves).
"""
