"""Argument checks shared by the field-test scripts: each names the option and the reason."""

from __future__ import annotations

import ipaddress
import re

from manetkit.field.runner import ScriptError

_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_IFNAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")

# 20 MHz channel centres IBSS can use: 2.4 GHz channels 1-14 and the 5 GHz non-DFS
# UNII-1/UNII-3 channels (IBSS is not allowed on DFS channels by cfg80211).
CHANNELS_MHZ = {2407 + 5 * ch: ch for ch in range(1, 14)} | {2484: 14}
CHANNELS_MHZ |= {5000 + 5 * ch: ch for ch in (36, 40, 44, 48, 149, 153, 157, 161, 165)}


def freq(value: str) -> int:
    try:
        mhz = int(value)
    except ValueError:
        raise ScriptError(f"--freq: {value!r} is not a number of MHz") from None
    if mhz not in CHANNELS_MHZ:
        raise ScriptError(
            f"--freq: {mhz} MHz is not an IBSS channel centre "
            "(2412-2472 or 2484, or 5180-5240/5745-5825 without DFS)"
        )
    return mhz


# Legacy 802.11 rates (Mbit/s) a multicast rate can take: DSSS/CCK and OFDM; cfg80211
# refuses one the band does not have, so only 6..54 on 5 GHz.
LEGACY_RATES = (1.0, 2.0, 5.5, 11.0, 6.0, 9.0, 12.0, 18.0, 24.0, 36.0, 48.0, 54.0)


def mcast_rate(value: str | None, mhz: int) -> str | None:
    """``--mcast-rate``: a legacy rate of the band, printed as iw and wpa_supplicant
    take it (Mbit/s: ``5.5``, ``6``)."""
    if value is None:
        return None
    try:
        rate = float(value)
    except ValueError:
        raise ScriptError(f"--mcast-rate: {value!r} is not a number of Mbit/s") from None
    band = LEGACY_RATES if mhz < 5000 else LEGACY_RATES[4:]
    if rate not in band:
        raise ScriptError(
            f"--mcast-rate: {value} Mbit/s is not a legacy rate of the "
            f"{'2.4' if mhz < 5000 else '5'} GHz band ({', '.join(f'{r:g}' for r in band)})"
        )
    return f"{rate:g}"


def bssid(value: str) -> str:
    if not _MAC.match(value):
        raise ScriptError(f"--bssid: {value!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
    first = int(value[:2], 16)
    if first & 1:
        raise ScriptError(f"--bssid: {value} is a group address; an IBSS BSSID must be unicast")
    return value.lower()


def ssid(value: str) -> str:
    if not 1 <= len(value.encode()) <= 32:
        raise ScriptError(f"--ssid: {value!r} must be 1 to 32 bytes")
    return value


def psk(value: str | None) -> str | None:
    if value is not None and not (8 <= len(value) <= 63 and value.isprintable()):
        raise ScriptError("--psk: a WPA passphrase has 8 to 63 printable characters")
    return value


def ifname(value: str, option: str = "--interface") -> str:
    if not _IFNAME.match(value):
        raise ScriptError(f"{option}: {value!r} is not an interface name (1-15 of A-Za-z0-9_.-)")
    return value


def address(value: str, option: str = "--address") -> ipaddress.IPv4Interface:
    try:
        iface = ipaddress.IPv4Interface(value)
    except ValueError:
        raise ScriptError(
            f"{option}: {value!r} is not an IPv4 address with a prefix (10.1.0.1/16)"
        ) from None
    if iface.network.prefixlen == 32 and "/" not in value:
        raise ScriptError(f"{option}: {value!r} needs a prefix length (10.1.0.1/16)")
    return iface
