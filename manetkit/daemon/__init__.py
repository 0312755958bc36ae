"""The routing daemon.

- ``wire/``: pack/parse of what goes on the air (IPv4, AODV per RFC 3561, DSR per RFC 4728
  and manetkit's extra options), nothing else.
- ``engines/``: sans-I/O protocol engines (``aodv``, ``dsr``; later ``smr``, ``atra``),
  all speaking the API in ``engines/base.py``.
- ``sendbuffer``, ``neighbours``: data structures the engines share.
- ``dataplane`` (TUN ``mesh0`` and AF_PACKET on the radio), ``linksense/`` (lab, nl80211,
  hello), ``kernel`` (pyroute2, the only module that talks netlink), ``events`` (the unix
  event socket), ``shell`` (the asyncio loop wiring them), ``config``, ``cli``.
"""
