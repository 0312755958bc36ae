"""The send buffer's TCP rules (manetkit/daemon/sendbuffer.py): a retransmitted copy of a
waiting segment is not queued twice, a RST drops its connection's waiting segments, and
nothing else changes (pure-ACK repeats, other connections, UDP, order)."""

from __future__ import annotations

import struct
from ipaddress import IPv4Address

from manetkit.daemon.sendbuffer import SendBuffer
from manetkit.daemon.wire import ipv4

A, D = IPv4Address("10.42.0.1"), IPv4Address("10.42.0.4")
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


def tcp(sport: int, flags: int, seq: int = 1000, ack: int = 0, data: bytes = b"",
        ident: int = 0) -> bytes:  # fmt: skip
    """A TCP segment from A to D; ``ident`` varies the IP id (as a kernel retransmit does)."""
    seg = struct.pack("!HHIIBBHHH", sport, 4242, seq, ack, 5 << 4, flags, 65535, 0, 0)
    pkt = bytearray(ipv4.build(A, D, ipv4.PROTO_TCP, seg + data))
    pkt[4:6] = ident.to_bytes(2, "big")
    return bytes(pkt)


def buffer() -> SendBuffer:
    return SendBuffer(max_packets=64, timeout=30.0)


def test_kernel_syn_retransmits_wait_as_one_segment() -> None:
    sb = buffer()
    for i in range(7):  # the SYN and six retransmits of one connect during an outage
        assert sb.add(float(i), D, tcp(40000, SYN, ident=i))
    assert sb.waiting(D) == 1 and sb.drops["duplicate"] == 6
    assert sb.release(D) == [tcp(40000, SYN, ident=0)]  # the first copy


def test_data_retransmits_are_dropped_but_new_data_and_pure_ack_repeats_are_kept() -> None:
    sb = buffer()
    sb.add(0.0, D, tcp(40000, ACK | PSH, seq=1, ack=9, data=b"x" * 100))
    sb.add(1.0, D, tcp(40000, ACK, seq=1, ack=9, data=b"x" * 100, ident=1))  # RTO copy
    sb.add(1.1, D, tcp(40000, ACK, seq=101, ack=9, data=b"y" * 100))  # new data
    sb.add(1.2, D, tcp(40000, ACK, seq=1, ack=10, data=b"x" * 100))  # same bytes, new ack
    for i in range(3):  # duplicate ACKs: the sender counts them (fast retransmit)
        sb.add(2.0, D, tcp(40001, ACK, seq=5, ack=77, ident=i))
    assert sb.drops["duplicate"] == 1
    assert sb.waiting(D) == 6


def test_a_rst_drops_its_connections_waiting_segments_only() -> None:
    sb = buffer()
    old = [tcp(40000, ACK, seq=s, ack=1, data=b"d" * 10) for s in (1, 11, 21)]
    other = tcp(40001, SYN)
    for p in old[:2]:
        sb.add(0.0, D, p)
    sb.add(0.1, D, other)
    sb.add(0.2, D, old[2])
    rst = tcp(40000, RST, seq=31)
    sb.add(0.5, D, rst)
    assert sb.drops["superseded"] == 3 and len(sb) == 2
    assert sb.release(D) == [other, rst]  # the RST still goes: the peer must learn of it
    assert [r for r, _, _ in sb.take_dropped()] == ["superseded"] * 3


def test_udp_and_fin_copies() -> None:
    sb = buffer()
    dgram = ipv4.build(A, D, ipv4.PROTO_UDP, ipv4.udp(5000, 5001, b"hi", A, D))
    sb.add(0.0, D, dgram)
    sb.add(0.1, D, dgram)  # UDP: the application sent it twice
    sb.add(0.2, D, tcp(40000, FIN | ACK, seq=50, ack=3))
    sb.add(0.3, D, tcp(40000, FIN | ACK, seq=50, ack=3, ident=1))
    assert sb.waiting(D) == 3 and sb.drops["duplicate"] == 1


def test_expiry_and_discard_still_count_every_packet() -> None:
    sb = buffer()
    sb.add(0.0, D, tcp(40000, SYN))
    sb.add(0.0, D, tcp(40001, SYN))
    assert sb.expire(31.0) == 2 and len(sb) == 0
    sb.add(40.0, D, tcp(40002, SYN))
    assert sb.discard(D) == 1 and sb.drops["no-route"] == 1
