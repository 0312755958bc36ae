"""Which queue a frame waits in: 802.11e access categories and ns-2's PriQueue.

Classification reads the frame's DSCP the way mac80211 does (``cfg80211_classify8021d``
in net/wireless/util.c, Linux 6.11): the IPv4 TOS or IPv6 traffic-class byte's top six
bits; the 802.1D user priority is DSCP >> 3 (the class selector), except for the
RFC 8325 section 4 exceptions the kernel applies (AF1x and CS2 -> 0, AF2x -> 3, CS3 and
AF3x -> 4, VA and EF -> 6, CS6 -> 7); frames that are neither IPv4 nor IPv6 (ARP) get
priority 0. The user priority maps to an access category as ``ieee802_1d_to_ac``: 1-2
background, 0 and 3 best effort, 4-5 video, 6-7 voice. manetkit's own frames (ethertype
0x88B5) carry an IPv4 packet right after the Ethernet header, so their DSCP is read at
the same offset: a daemon that marks its control CS6 (as babeld does, and manetkit's
daemon) gets AC_VO.

EDCA parameters (IEEE 802.11-2020 table 9-155, the defaults mac80211 applies with QoS,
``ieee80211_set_wmm_default``): AIFSN 7/3/2/2 for BK/BE/VI/VO; CW from aCWmin..aCWmax
for BK and BE, (aCWmin+1)/2-1..aCWmin for VI, (aCWmin+1)/4-1..(aCWmin+1)/2-1 for VO
(802.11b: VO 7..15, VI 15..31, BE/BK 31..1023; 802.11g: 3..7, 7..15, 15..1023).
AIFS = SIFS + AIFSN x slot.

ns-2's PriQueue (queue/priqueue.cc, ``Prefer_Routing_Protocols``): a routing packet is
put at the head of the interface queue (ahead of earlier ones too) and, when that makes
the queue longer than its limit, the packet at the tail is dropped. Here "routing" is
IP precedence 6 or 7 (DSCP CS6/CS7 and their neighbours: internetwork and network
control, RFC 791 / RFC 2474), what routing daemons mark.
"""

from __future__ import annotations

from dataclasses import dataclass

from manetkit.lab.medium.airtime import PhyTiming

AC_BK, AC_BE, AC_VI, AC_VO = 0, 1, 2, 3  # a higher number goes first
AC_NAMES = ("BK", "BE", "VI", "VO")
UP_TO_AC = (AC_BE, AC_BK, AC_BK, AC_BE, AC_VI, AC_VI, AC_VO, AC_VO)
MANETKIT_ETHERTYPE = 0x88B5
_IPV4_ETHERTYPES = frozenset({0x0800, MANETKIT_ETHERTYPE})
# RFC 8325 section 4 exceptions to DSCP >> 3, as cfg80211_classify8021d applies them.
_RFC8325 = {10: 0, 12: 0, 14: 0, 16: 0, 18: 3, 20: 3, 22: 3, 24: 4, 26: 4, 28: 4, 30: 4,
            44: 6, 46: 6, 48: 7}  # fmt: skip


def dscp(frame: bytes) -> int | None:
    """The DSCP of an Ethernet frame's IPv4 / IPv6 packet (manetkit frames included)."""
    if len(frame) < 16:
        return None
    ethertype = (frame[12] << 8) | frame[13]
    if ethertype in _IPV4_ETHERTYPES and frame[14] >> 4 == 4:
        return frame[15] >> 2
    if ethertype == 0x86DD and frame[14] >> 4 == 6:
        return ((frame[14] & 0x0F) << 2) | (frame[15] >> 6)
    return None


def user_priority(frame: bytes) -> int:
    """The 802.1D priority (0..7) mac80211 gives the frame."""
    d = dscp(frame)
    if d is None:
        return 0
    return _RFC8325.get(d, d >> 3)


def access_category(frame: bytes) -> int:
    return UP_TO_AC[user_priority(frame)]


def is_network_control(frame: bytes) -> bool:
    """IP precedence 6 or 7 (CS6, CS7): routing control for ns-2's PriQueue."""
    d = dscp(frame)
    return d is not None and d >> 3 >= 6


@dataclass(frozen=True, slots=True)
class Edca:
    """One access category's contention parameters."""

    aifsn: int
    cw_min: int
    cw_max: int

    def aifs_us(self, phy: PhyTiming) -> float:
        return phy.sifs_us + self.aifsn * phy.slot_us


def edca_defaults(phy: PhyTiming) -> tuple[Edca, Edca, Edca, Edca]:
    """(BK, BE, VI, VO) for a PHY's aCWmin / aCWmax."""
    lo, hi = phy.cw_min, phy.cw_max
    return (
        Edca(7, lo, hi),
        Edca(3, lo, hi),
        Edca(2, (lo + 1) // 2 - 1, lo),
        Edca(2, (lo + 1) // 4 - 1, (lo + 1) // 2 - 1),
    )


def dcf_only(phy: PhyTiming) -> tuple[Edca, Edca, Edca, Edca]:
    """Every category with DCF's DIFS and CW (``wmm: false``: one FIFO in effect)."""
    dcf = Edca(2, phy.cw_min, phy.cw_max)
    return (dcf, dcf, dcf, dcf)
