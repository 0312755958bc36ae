"""What goes on the air: pack and parse only, no protocol decisions.

Every manetkit frame is ``Ethernet(dst, src, ethertype 0x88B5) + IPv4 packet``
(``frame``); AODV control is UDP/654 with RFC 3561 bodies (``aodv``); DSR is the
RFC 4728 options header, IP protocol 48 (``dsr``).
"""
