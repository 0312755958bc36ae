"""Which received DSR packets may teach this node (docs/security.md).

With authentication required the daemon's shell drops every DSR packet that carries a
control option (Route Request, Reply, Error, acknowledgements, manetkit's notices)
unless its MAC verified (manetkit/daemon/auth.py), but it never signs a packet whose
options are only a Source Route and padding: data. Such a packet reaches the engine
whoever sent it, so its route may not build routes (Ariadne's rule: only authenticated
discovery teaches routes; Hu, Perrig & Johnson, MobiCom 2002, section 4).
"""

from __future__ import annotations

from manetkit.daemon.wire import dsr


def route_only(packet: bytes, ihl: int) -> bool:
    """True if the DSR header at ``ihl`` holds only Source Route and Pad1/PadN options
    (what is never signed); a header that does not parse counts as such too."""
    o = ihl + dsr.HEADER_LEN
    end = o + ((packet[ihl + 2] << 8) | packet[ihl + 3])
    if end > len(packet):
        return True
    while o < end:
        t = packet[o]
        if t == dsr.OPT_PAD1:
            o += 1
            continue
        if t != dsr.OPT_SRCRT and t != dsr.OPT_PADN:
            return False
        if o + 1 >= end:
            return True
        o += 2 + packet[o + 1]
    return True
