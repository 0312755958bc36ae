"""manetkit: make TCP work over mobile ad hoc networks of Linux laptops.

Parts: ``manetkit.daemon`` (DSR/AODV/SMR routing over raw sockets), ``manetkit.proxy``
(split-TCP proxy with ELFN, TCP-BuS, fixed-RTO), ``manetkit.lab`` (emulated 802.11
medium and network-namespace nodes), ``manetkit.bench`` (experiments and benchmarks).
"""

__version__ = "0.1.0"
