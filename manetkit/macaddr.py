"""MAC addresses: the one parser and the one formatter (``aa:bb:cc:dd:ee:ff``, IEEE 802)."""

from __future__ import annotations


def parse_mac(text: str) -> bytes:
    """``"02:6d:6b:00:00:01"`` (or ``-`` separated, any case) -> 6 bytes.

    Raises ``ValueError`` naming the text when it is not six two-digit hex octets.
    """
    parts = text.replace("-", ":").split(":")
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise ValueError(f"{text!r} is not a MAC address like 02:6d:6b:00:00:01")
    try:
        return bytes.fromhex("".join(parts))
    except ValueError:
        raise ValueError(f"{text!r} is not a MAC address like 02:6d:6b:00:00:01") from None


def format_mac(mac: bytes) -> str:
    """6 bytes -> ``"02:6d:6b:00:00:01"`` (lower case, as iw and ip print them)."""
    return mac.hex(":")
