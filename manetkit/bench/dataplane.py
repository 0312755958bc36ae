"""``manetkit bench dataplane``: the daemon's userspace forwarding vs the kernel's, on veth.

Three namespaces A, B, C on one bridge (``VethMesh``), offloads off on every veth
(docs/architecture.md "Performance notes"), no medium. B forwards A -> C.

  packets/s per hop  a raw-socket blaster in A sends small UDP packets (60-byte frames)
                     to C through B as fast as it can; the rate is what reaches C's
                     interface (kernel counters), so only B's forwarding is measured.
                     daemon: manetkit frames (ethertype 0x88B5) to B's daemon (static
                     engine); kernel: the same packets as plain IPv4 to B with
                     ip_forward=1.
  TCP through B      iperf3 A -> C. daemon: daemons in A, B and C (mesh0 on A and C,
                     static routes); kernel: addresses on the veths, B forwards.
  authentication     the same blast through B's daemon with and without ``auth:``
                     (required), side by side in one run: the static engine (plain
                     IPv4) and DSR (A sends source-routed DSR data A -> B -> C, B's
                     DSR engine forwards by the Source Route). Data is never signed
                     (docs/security.md): with auth on, B only classifies each frame
                     and, with DSR, learns nothing from it. Plus, in process, the
                     CPU time to sign and to verify one control frame (a RREQ) with
                     each MAC algorithm, and the bytes the trailer adds. The
                     forwarder's share of a core varies on a shared machine, so the
                     CPU time per packet is reported too, and the cost auth adds
                     per packet is measured in process (shell + engine, no
                     syscalls, auth off and on alternated, the fastest round of
                     each): the goal is judged on the packets/s a forwarder with a
                     core of its own reaches, cpu_off / (cpu_off + added).

Goals (the routing daemon's targets): >= 40,000 packets/s per hop and >= 300 Mbit/s TCP through one
forwarding node; with authentication on, >= 85 % of the packets/s without. The kernel
numbers are the reference measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any, NamedTuple

from rich.table import Table

from manetkit import procs
from manetkit.bench import report
from manetkit.bench.vethlab import VethMesh, sh
from manetkit.daemon.wire import dsr as wire_dsr
from manetkit.daemon.wire import ipv4 as wire_ipv4
from manetkit.lab import tcpcc
from manetkit.procs import wait_for

GOAL_PPS = 40_000
GOAL_TCP_MBPS = 300.0
GOAL_AUTH_RATIO = 0.85  # packets/s with auth on / off

BLASTER = r"""
import socket, struct, sys, time
iface, dst_mac, ethertype, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3], 0), float(sys.argv[4])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
src_mac = s.getsockname()[4][:6]
payload = bytes(18)
udp = struct.pack("!HHHH", 40000, 9, 8 + len(payload), 0) + payload
hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                  bytes([10, 42, 0, 1]), bytes([10, 42, 0, 3]))
c = sum(struct.unpack("!10H", hdr))
c = (c & 0xFFFF) + (c >> 16); c = (c & 0xFFFF) + (c >> 16)
hdr = hdr[:10] + struct.pack("!H", ~c & 0xFFFF) + hdr[12:]
packet = bytes.fromhex(sys.argv[5]) if len(sys.argv) > 5 else hdr + udp
frame = bytes.fromhex(dst_mac.replace(":", "")) + src_mac + struct.pack("!H", ethertype) + packet
# sendmmsg(2) through ctypes: one syscall per 256 frames, so the blaster outruns the
# forwarder under test instead of measuring Python's per-call overhead.
import ctypes
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(iovec)),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]
class mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(frame, len(frame))
iov = iovec(ctypes.cast(buf, ctypes.c_void_p), len(frame))
VLEN = 256
msgs = (mmsghdr * VLEN)()
for m in msgs:
    m.hdr.iov = ctypes.pointer(iov)
    m.hdr.iovlen = 1
fd = s.fileno()
n = 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    r = libc.sendmmsg(fd, msgs, VLEN, 0)
    if r > 0:
        n += r
print(n)
"""


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each measurement")
    parser.add_argument(
        "--congestion-control",
        default="cubic",
        help="TCP congestion control of the TCP-through-B runs, one the kernel has (cubic)",
    )
    parser.set_defaults(func=run)


def _rx_packets(mesh: VethMesh, i: int) -> int:
    out = sh("ip", "-n", mesh.ns(i), "-j", "-s", "link", "show", "rad0").stdout
    return int(json.loads(out)[0]["stats64"]["rx"]["packets"])


def _cpu_s(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _blast(
    mesh: VethMesh, ethertype: int, seconds: float, packet: bytes | None = None
) -> dict[str, float]:
    """Blast A -> (B's MAC) for warm-up + ``seconds``; packets/s arriving at C.
    ``packet``: the IPv4 packet to send (default: a small UDP packet A -> C)."""
    fwd = mesh.procs.get(2)
    fwd_pid = fwd.pid if fwd else None
    warm = 1.0
    p = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            mesh.ns(1),
            sys.executable,
            "-c",
            BLASTER,
            "rad0",
            mesh.mac(2),
            hex(ethertype),
            str(warm + seconds + 0.5),
            *([packet.hex()] if packet is not None else []),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(warm)  # measuring a steady state, not waiting for a protocol
        c0, t0, u0 = _rx_packets(mesh, 3), time.monotonic(), _cpu_s(fwd_pid)
        time.sleep(seconds)
        c1, t1, u1 = _rx_packets(mesh, 3), time.monotonic(), _cpu_s(fwd_pid)
        sent = int((p.communicate(timeout=30)[0] or "0").strip() or 0)
    finally:
        procs.stop(p)
    return {
        "pps": (c1 - c0) / (t1 - t0),
        "offered_pps": sent / (warm + seconds + 0.5),
        "forwarder_cpu_pct": 100 * (u1 - u0) / (t1 - t0),
    }


def _kernel_forwarding(mesh: VethMesh) -> None:
    """Addresses on the veths; B forwards with the kernel (the reference)."""
    for i in (1, 2, 3):
        ns = mesh.ns(i)
        sh("ip", "-n", ns, "addr", "add", f"10.42.0.{i}/32", "dev", "rad0")
        for j in (1, 2, 3):
            if j != i:
                sh(
                    "ip",
                    "-n",
                    ns,
                    "neigh",
                    "replace",
                    f"10.42.0.{j}",
                    "lladdr",
                    mesh.mac(j),
                    "dev",
                    "rad0",
                    "nud",
                    "permanent",
                )
        sh(
            "ip",
            "netns",
            "exec",
            ns,
            "sysctl",
            "-q",
            "-w",
            "net.ipv4.conf.all.send_redirects=0",
            "net.ipv4.conf.rad0.send_redirects=0",
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.rad0.rp_filter=0",
        )
    sh("ip", "-n", mesh.ns(2), "route", "add", "10.42.0.1/32", "dev", "rad0")
    sh("ip", "-n", mesh.ns(2), "route", "add", "10.42.0.3/32", "dev", "rad0")
    sh("ip", "netns", "exec", mesh.ns(2), "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
    sh("ip", "-n", mesh.ns(1), "route", "add", "10.42.0.2/32", "dev", "rad0")
    sh(
        "ip",
        "-n",
        mesh.ns(1),
        "route",
        "add",
        "10.42.0.3/32",
        "via",
        "10.42.0.2",
        "dev",
        "rad0",
        "onlink",
    )
    sh("ip", "-n", mesh.ns(3), "route", "add", "10.42.0.2/32", "dev", "rad0")
    sh(
        "ip",
        "-n",
        mesh.ns(3),
        "route",
        "add",
        "10.42.0.1/32",
        "via",
        "10.42.0.2",
        "dev",
        "rad0",
        "onlink",
    )


def _neighbours(mesh: VethMesh, *idx: int) -> dict[str, str]:
    return {mesh.addr(j): mesh.mac(j) for j in idx}


def _start_daemons(mesh: VethMesh, nodes: tuple[int, ...], **over: Any) -> None:
    """Static engine, neighbours' MACs from the config (no beacon dependence)."""
    routes = {1: {"10.42.0.3": "10.42.0.2"}, 2: {}, 3: {"10.42.0.1": "10.42.0.2"}}
    for i in nodes:
        mesh.start(
            i,
            **({"static_routes": routes[i]} if over.get("protocol", "static") == "static" else {}),
            static_neighbours=_neighbours(mesh, *[j for j in (1, 2, 3) if j != i]),
            log_level="warning",
            **over,
        )


def _auth_section(workdir: Path) -> dict[str, Any]:
    """``auth:`` with a fresh key file (mode 0600), required (the default)."""
    key = workdir / "mesh.key"
    key.write_text(os.urandom(32).hex())
    key.chmod(0o600)
    return {"keys": [{"id": 1, "key_file": str(key)}]}


def _dsr_data() -> bytes:
    """A small UDP packet A -> C source-routed through B (RFC 4728 8.1.3), as A sends it."""
    a, b, c = (IPv4Address(f"10.42.0.{i}") for i in (1, 2, 3))
    inner = wire_ipv4.udp(40000, 9, bytes(18), a, c)
    return wire_dsr.encapsulate(
        wire_dsr.IPFields(a, c), [wire_dsr.SourceRoute((b,), 1)], wire_ipv4.PROTO_UDP, inner
    )


def _forwarding_with_and_without_auth(
    tag: str, workdir: Path, seconds: float, rounds: int = 5
) -> dict[str, dict[str, Any]]:
    """pkt/s through B's daemon, auth off and on, for the static engine and DSR: B's
    daemon restarted between them, ``rounds`` alternations, the median of each (a shared
    machine gives the forwarder a varying share of a core, so the CPU time per packet
    is reported too)."""
    out: dict[str, dict[str, Any]] = {}
    for protocol, packet in (("static", None), ("dsr", _dsr_data())):
        runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
        with VethMesh(f"{tag}a{protocol[0]}", 3, workdir / f"auth-{protocol}") as mesh:
            auth_cfg = _auth_section(mesh.workdir)
            for _ in range(rounds):
                for auth in (False, True):
                    over: dict[str, Any] = {"protocol": protocol}
                    if auth:
                        over["auth"] = auth_cfg
                    _start_daemons(mesh, (2,), **over)
                    r = _blast(mesh, 0x88B5, seconds, packet)
                    st = mesh.status(2)
                    r["drops"] = dict(st.counters.drops)
                    r["auth"] = dict(st.counters.auth) if st.counters.auth is not None else None
                    r["cpu_us_per_packet"] = (
                        r["forwarder_cpu_pct"] / 100 / r["pps"] * 1e6 if r["pps"] else 0.0
                    )
                    runs[auth].append(r)
                    mesh.stop(2)
        pairs = list(zip(runs[False], runs[True], strict=True))
        out[f"{protocol}_pairs"] = {
            "pps_ratio": statistics.median(on["pps"] / off["pps"] for off, on in pairs),
            "cpu_ratio": statistics.median(
                off["cpu_us_per_packet"] / on["cpu_us_per_packet"] for off, on in pairs
            ),
        }
        for auth, rs in runs.items():
            out[f"{protocol}_auth_{'on' if auth else 'off'}"] = {
                "pps": statistics.median(r["pps"] for r in rs),
                "offered_pps": statistics.median(r["offered_pps"] for r in rs),
                "forwarder_cpu_pct": statistics.median(r["forwarder_cpu_pct"] for r in rs),
                "cpu_us_per_packet": statistics.median(r["cpu_us_per_packet"] for r in rs),
                "runs_pps": [round(r["pps"]) for r in rs],
                "runs_cpu_us": [round(r["cpu_us_per_packet"], 2) for r in rs],
                "drops": rs[-1]["drops"],
                "auth": rs[-1]["auth"],
            }
    return out


class _CountingRadio:
    """The data plane's send side, counting: the daemon's shell without a kernel."""

    def __init__(self, mac: bytes) -> None:
        self.mac = mac
        self.radio_lost = None
        self.sent = 0

    def send(self, mac: bytes, packet: bytes) -> bool:
        self.sent += 1
        return True


def forwarding_cost(
    packets: int = 20_000, rounds: int = 5, batch: int = 256
) -> dict[str, dict[str, float]]:
    """CPU per data packet B forwards, in process: the shell's receive hook (with the
    auth layer when on), the engine, and the shell's send loop, as the daemon runs
    them per radio batch, minus the syscalls (the same with and without auth). Auth off
    and on alternate ``rounds`` times; the fastest round of each is kept (the least
    disturbed by other processes). Static engine (plain IPv4) and DSR (a Source Route
    through B)."""
    import tempfile

    from manetkit.daemon.config import DaemonConfig
    from manetkit.daemon.shell import Daemon

    macs = {i: bytes.fromhex(f"026d740000{i:02x}") for i in (1, 2, 3)}
    a, c = IPv4Address("10.42.0.1"), IPv4Address("10.42.0.3")
    plain = wire_ipv4.build(a, c, wire_ipv4.PROTO_UDP, wire_ipv4.udp(40000, 9, bytes(18), a, c))
    res: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="mk-bench-auth-") as tmp:
        auth_cfg = _auth_section(Path(tmp))
        for protocol, packet in (("static", plain), ("dsr", _dsr_data())):
            best: dict[bool, float] = {}
            for _ in range(rounds):
                for auth in (False, True):
                    cfg: dict[str, Any] = {
                        "address": "10.42.0.2",
                        "protocol": protocol,
                        "radio_interface": "rad0",
                        "event_socket": f"{tmp}/ev.sock",
                        "static_neighbours": {f"10.42.0.{i}": macs[i].hex(":") for i in (1, 3)},
                    }
                    if auth:
                        cfg["auth"] = auth_cfg
                    d = Daemon(DaemonConfig.model_validate(cfg))
                    radio = d.dp = _CountingRadio(macs[2])  # type: ignore[assignment]
                    rx, transmit, src = d._rx_frame, d._transmit, macs[1]
                    t0 = time.process_time()
                    for start in range(0, packets, batch):
                        for _ in range(min(batch, packets - start)):
                            rx(src, packet)
                        transmit()
                    spent = time.process_time() - t0
                    assert radio.sent == packets, (protocol, auth, radio.sent)
                    us = spent / packets * 1e6
                    best[auth] = min(best.get(auth, us), us)
            res[protocol] = {
                "off_us": round(best[False], 3),
                "on_us": round(best[True], 3),
                "added_us": round(best[True] - best[False], 3),
            }
    return res


def auth_cost(rounds: int = 20_000) -> dict[str, dict[str, float]]:
    """CPU per control frame (a RREQ, 44 bytes of IP) to sign and to verify, in µs,
    and the bytes the trailer adds, per MAC algorithm (in process, one core)."""
    from manetkit.daemon import auth
    from manetkit.daemon.wire import aodv as wire_aodv

    me, there = IPv4Address("10.42.0.1"), IPv4Address("10.42.0.9")
    rreq = wire_aodv.control_packet(
        wire_aodv.RREQ(0, 1, there, 0, me, 1, unknown_seq=True), me, wire_aodv.BROADCAST, 1
    )
    mac = bytes.fromhex("026d74000001")
    res: dict[str, dict[str, float]] = {}
    for algorithm in ("hmac-sha256", "blake2s128"):
        key = auth.Key(1, algorithm, bytes(range(32)))  # type: ignore[arg-type]
        tx = auth.Authenticator([key])
        rx = auth.Authenticator([key])
        rx.verify(0.0, tx.sign(0.0, rreq, mac), mac)  # a new index: challenged ...
        for _ in range(3):  # ... and adopted once the challenges went both ways
            while (c := rx.next_event()) is not None:
                tx.verify(0.0, rx.sign(0.0, c.packet, mac), mac)
            while (c := tx.next_event()) is not None:
                rx.verify(0.0, tx.sign(0.0, c.packet, mac), mac)
        t0 = time.process_time()
        signed = [tx.sign(0.0, rreq, mac) for _ in range(rounds)]
        t1 = time.process_time()
        for p in signed:
            rx.verify(0.0, p, mac)
        t2 = time.process_time()
        res[algorithm] = {
            "sign_us": round((t1 - t0) / rounds * 1e6, 2),
            "verify_us": round((t2 - t1) / rounds * 1e6, 2),
            "trailer_bytes": len(signed[0]) - len(rreq),
            "verified": rx.counters["verified"],
        }
    return res


def _iperf(mesh: VethMesh, seconds: float, cc: str) -> float:
    # the congestion control at both ends, read back (the namespaces start with the host's)
    tcpcc.set_namespaces([mesh.ns(1), mesh.ns(3)], cc)
    mesh.run(3, "iperf3", "-s", "-1", "-D", "-B", "10.42.0.3")
    wait_for(lambda: ":5201" in mesh.run(3, "ss", "-ltn").stdout, 5, "iperf3 server")
    r = mesh.run(
        1, "iperf3", "-c", "10.42.0.3", "-t", str(seconds), "-O", "1", "-J", timeout=seconds + 30
    )
    return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6


def measure(seconds: float, workdir: Path, cc: str = "cubic") -> dict[str, Any]:
    tag = f"mkb{os.getpid() % 10000}"
    res: dict[str, Any] = {}
    with VethMesh(f"{tag}k", 3, workdir / "k") as mesh:
        _kernel_forwarding(mesh)
        res["kernel_pps"] = _blast(mesh, 0x0800, seconds)
        res["kernel_tcp_mbps"] = _iperf(mesh, seconds, cc)
    with VethMesh(f"{tag}d", 3, workdir / "d") as mesh:
        _start_daemons(mesh, (2,))
        res["daemon_pps"] = _blast(mesh, 0x88B5, seconds)
        res["daemon_forwarder_counters"] = mesh.status(2).counters.dataplane
    with VethMesh(f"{tag}t", 3, workdir / "t") as mesh:
        _start_daemons(mesh, (1, 2, 3))
        res["daemon_tcp_mbps"] = _iperf(mesh, seconds, cc)
    res["auth"] = _forwarding_with_and_without_auth(tag, workdir, seconds)
    res["auth_forwarding_cost"] = forwarding_cost()
    res["auth_cost"] = auth_cost()
    return res


class AuthRow(NamedTuple):
    engine: str
    pps_off: float  # veth, medians
    pps_on: float
    ratio: float  # median of the ratios of runs next to each other
    cpu_off: float  # µs of the forwarder's CPU per packet (veth, medians)
    cpu_on: float
    added: float  # µs auth adds per packet (in process, fastest round)
    full_core: float  # pkt/s on / off for a forwarder with a core of its own


def _auth_rows(res: dict[str, Any]) -> list[AuthRow]:
    """Per engine: the veth medians, the in-process cost auth adds, and the ratio of
    packets/s a forwarder with a whole core reaches: cpu_off / (cpu_off + added) (the
    veth ratio itself moves with the forwarder's share of a shared machine's cores)."""
    rows = []
    for protocol in ("static", "dsr"):
        off, on = res["auth"][f"{protocol}_auth_off"], res["auth"][f"{protocol}_auth_on"]
        pairs = res["auth"][f"{protocol}_pairs"]
        added = res["auth_forwarding_cost"][protocol]["added_us"]
        cpu_off = off["cpu_us_per_packet"]
        rows.append(
            AuthRow(
                protocol, off["pps"], on["pps"], pairs["pps_ratio"],
                cpu_off, on["cpu_us_per_packet"], added,
                cpu_off / (cpu_off + max(added, 0.0)) if cpu_off else 0.0,
            )
        )  # fmt: skip
    return rows


def run(args: argparse.Namespace) -> int:
    tcpcc.require([args.congestion_control])
    with (
        tempfile.TemporaryDirectory(prefix="mk-bench-dp-") as tmp,
        tcpcc.allowing([args.congestion_control]),
    ):
        r = measure(args.seconds, Path(tmp), args.congestion_control)
    rows = [
        (
            "packets/s per hop (60-byte frames)",
            r["daemon_pps"]["pps"],
            r["kernel_pps"]["pps"],
            GOAL_PPS,
            "pkt/s",
        ),
        (
            "TCP through one forwarding node",
            r["daemon_tcp_mbps"],
            r["kernel_tcp_mbps"],
            GOAL_TCP_MBPS,
            "Mbit/s",
        ),
    ]
    t = Table(title="data plane over veth (offloads off): daemon vs kernel forwarding")
    for col in ("metric", "daemon", "kernel (reference)", "goal", "met"):
        t.add_column(col, justify="right" if col != "metric" else "left")
    for name, d, k, goal, unit in rows:
        t.add_row(
            name,
            f"{d:,.0f} {unit}",
            f"{k:,.0f} {unit}",
            f">= {goal:,.0f}",
            "yes" if d >= goal else "NO",
        )
    report.show(t)
    auth_rows = _auth_rows(r)
    ta = Table(title="with authentication (auth: required) vs without, same run")
    for col in (
        "engine", "pkt/s off", "pkt/s on", "on / off", "CPU/pkt off, on", "added (in process)",
        "on / off at a full core", "goal", "met",
    ):  # fmt: skip
        ta.add_column(col, justify="right" if col != "engine" else "left")
    for row in auth_rows:
        ta.add_row(
            row.engine,
            f"{row.pps_off:,.0f}",
            f"{row.pps_on:,.0f}",
            f"{row.ratio:.1%}",
            f"{row.cpu_off:.2f}, {row.cpu_on:.2f} µs",
            f"{row.added:.2f} µs",
            f"{row.full_core:.1%}",
            f">= {GOAL_AUTH_RATIO:.0%}",
            "yes" if row.full_core >= GOAL_AUTH_RATIO else "NO",
        )
    report.show(ta)
    tc = Table(title="authentication of one control frame (a RREQ), in process")
    for col in ("MAC", "sign", "verify", "trailer"):
        tc.add_column(col, justify="right" if col != "MAC" else "left")
    for algorithm, c in r["auth_cost"].items():
        tc.add_row(
            algorithm, f"{c['sign_us']} µs", f"{c['verify_us']} µs", f"{c['trailer_bytes']} B"
        )
    report.show(tc)
    doc = {
        "bench": "dataplane",
        "time": time.time(),
        "seconds": args.seconds,
        "congestion_control": args.congestion_control,
        "daemon_pps_per_hop": round(r["daemon_pps"]["pps"]),
        "daemon_offered_pps": round(r["daemon_pps"]["offered_pps"]),
        "kernel_pps_per_hop": round(r["kernel_pps"]["pps"]),
        "kernel_offered_pps": round(r["kernel_pps"]["offered_pps"]),
        "daemon_forwarder_cpu_pct": round(r["daemon_pps"]["forwarder_cpu_pct"], 1),
        "daemon_tcp_mbps": round(r["daemon_tcp_mbps"], 1),
        "kernel_tcp_mbps": round(r["kernel_tcp_mbps"], 1),
        "goal_pps": GOAL_PPS,
        "goal_tcp_mbps": GOAL_TCP_MBPS,
        "goals_met": r["daemon_pps"]["pps"] >= GOAL_PPS and r["daemon_tcp_mbps"] >= GOAL_TCP_MBPS,
        "forwarder_counters": r["daemon_forwarder_counters"],
        "auth_pps": {
            name: {
                "pps": round(v["pps"]),
                "offered_pps": round(v["offered_pps"]),
                "forwarder_cpu_pct": round(v["forwarder_cpu_pct"], 1),
                "cpu_us_per_packet": round(v["cpu_us_per_packet"], 2),
                "runs_pps": v["runs_pps"],
                "runs_cpu_us": v["runs_cpu_us"],
                "drops": v["drops"],
            }
            for name, v in r["auth"].items()
            if "_auth_" in name
        },
        "auth_pairs": {name: v for name, v in r["auth"].items() if name.endswith("_pairs")},
        "auth_ratio": {row.engine: round(row.ratio, 3) for row in auth_rows},
        "auth_full_core_ratio": {row.engine: round(row.full_core, 3) for row in auth_rows},
        "auth_forwarding_cost_us": r["auth_forwarding_cost"],
        "goal_auth_ratio": GOAL_AUTH_RATIO,
        "auth_cost": r["auth_cost"],
    }
    report.write(args.out, "dataplane", doc)
    return 0
