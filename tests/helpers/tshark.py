"""Decode manetkit frames with tshark, the independent decoder (its AODV/DSR dissectors).

``decode(frames)`` writes the Ethernet frames to a pcap (scapy's writer) and returns
tshark's JSON decoding, one dict of layers per frame, with the manetkit ethertype
dissected as IPv4 (``-d ethertype==0x88b5,ip``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ETHERTYPE = 0x88B5


def require_tshark() -> str:
    exe = shutil.which("tshark")
    if not exe:
        pytest.fail("tshark is not installed (.ci/install installs it)")
    return exe


def write_pcap(path: Path, frames: list[bytes]) -> None:
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    wrpcap(str(path), [Ether(f) for f in frames])


def decode(frames: list[bytes], ethertype: int = ETHERTYPE) -> list[dict]:
    """tshark -T json layers of each frame (list of dicts keyed by protocol name)."""
    exe = require_tshark()
    with tempfile.TemporaryDirectory() as tmp:
        pcap = Path(tmp) / "frames.pcap"
        write_pcap(pcap, frames)
        out = subprocess.run(
            [
                exe,
                "-n",
                "-r",
                str(pcap),
                "-d",
                f"ethertype=={ethertype:#x},ip",
                "-o",
                "ip.check_checksum:TRUE",
                "-o",
                "udp.check_checksum:TRUE",
                "-T",
                "json",
                "--no-duplicate-keys",  # repeated fields (RERR destinations) become lists
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    return [pkt["_source"]["layers"] for pkt in json.loads(out)]


def ether(dst: bytes, src: bytes, payload: bytes, ethertype: int = ETHERTYPE) -> bytes:
    return dst + src + ethertype.to_bytes(2, "big") + payload
