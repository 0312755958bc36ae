"""Beacons and the link hysteresis, driven by a fake clock (no sleeping)."""

from __future__ import annotations

from ipaddress import IPv4Address

from hypothesis import given
from hypothesis import strategies as st

from manetkit.daemon.linksense.hello import build_hello, is_hello, parse_hello
from manetkit.daemon.linksense.hysteresis import Down, LinkMonitor, Signal, Up
from manetkit.daemon.wire import ipv4

A = b"\x02\x6d\x6b\x00\x00\x01"
B = b"\x02\x6d\x6b\x00\x00\x02"


def test_hello_roundtrip_is_valid_udp_ipv4():
    pkt = build_hello(IPv4Address("10.42.0.5"), 7, 1.0, port=49698)
    h = ipv4.parse(pkt)
    assert h.dst == IPv4Address("255.255.255.255") and h.ttl == 1
    assert ipv4.checksum(pkt[:20]) == 0
    assert is_hello(pkt, 49698) and not is_hello(pkt, 654)
    hello = parse_hello(pkt, 49698)
    assert hello is not None
    assert (hello.address, hello.seq, hello.interval_ms) == (IPv4Address("10.42.0.5"), 7, 1000)


@given(st.binary(min_size=20, max_size=80))
def test_parse_hello_never_raises(data):
    parse_hello(data)


def after(call, *args) -> list:
    """The link monitor's decisions after one input (drained with next_event)."""
    m = call.__self__
    while m.next_event() is not None:
        pass  # what earlier inputs decided
    call(*args)
    out = []
    while (d := m.next_event()) is not None:
        out.append(d)
    return out


def test_one_lost_hello_does_not_take_a_link_down():
    m = LinkMonitor.for_hello(interval_s=1.0, missed_hellos=3)
    assert after(m.heard, 0.0, A) == [Up(A, None)]
    # hello at t=1 lost; t=2 arrives: nothing happens at the deadline checks in between
    assert after(m.handle_timer, 1.9) == []
    assert after(m.heard, 2.0, A) == []
    assert after(m.handle_timer, 4.9) == []
    # three periods (+ half for jitter) of silence: down, exactly once
    assert m.get_timer() == 5.5
    assert after(m.handle_timer, 5.5) == [Down(A, "silent")]
    assert m.next_event() is None
    m.heard(6.0, B)
    m.heard(6.2, B)
    assert [(d.reason, d.last_heard) for d in after(m.handle_timer, 9.8)] == [("silent", 6.2)]
    assert after(m.handle_timer, 9.0) == []
    assert m.get_timer() is None
    # heard again: up again
    assert after(m.heard, 10.0, A, -60.0) == [Up(A, -60.0), Signal(A, -60.0)]


def test_consecutive_tx_failures_and_reset():
    m = LinkMonitor(silence_s=3.0, tx_failures=2)
    m.heard(0.0, A)
    m.heard(0.0, B)
    assert after(m.tx_failed, 0.1, A) == []
    m.heard(0.2, A)  # a successful hearing resets the count
    assert after(m.tx_failed, 0.3, A) == []
    assert after(m.tx_failed, 0.4, A) == [Down(A, "tx-failed")]
    assert after(m.tx_failed, 0.5, A) == []  # already down
    assert m.is_up(B) and not m.is_up(A)
    assert after(m.gone, 0.6, B, "no-such-station") == [Down(B, "no-such-station")]


def test_station_table_inactivity_and_weak_signal():
    m = LinkMonitor(silence_s=3.0, min_signal_dbm=-85.0)
    assert after(m.heard, 0.0, A, -90.0) == []  # too weak to be a link
    assert not m.is_up(A)
    # a row last heard 5 s ago is stale: not a hearing
    assert after(m.last_heard, 10.0, B, 5.0) == []
    assert after(m.last_heard, 10.0, B, 0.5) == [Up(B, None)]
    assert m.get_timer() == 12.5


def test_neighbour_down_says_how_long_the_neighbour_was_silent(tmp_path):
    """The shell's neighbour-down carries ``silent_s`` (now - last heard): link sensing
    declares a silent neighbour down seconds after it stopped working, and whoever
    scores breaks (Atra's metric plug-in) dates them by it."""
    from manetkit import events
    from manetkit.daemon.config import DaemonConfig
    from manetkit.daemon.linksense.base import StationSeen
    from manetkit.daemon.shell import Daemon

    cfg = {"address": "10.42.0.1", "protocol": "dsr", "event_socket": str(tmp_path / "ev.sock")}
    d = Daemon(DaemonConfig.model_validate(cfg))
    published = []
    d.events.publish = published.append  # type: ignore[method-assign]
    d.neighbours.learn(0.0, IPv4Address("10.42.0.2"), B)
    d._on_station(10.0, StationSeen(B, -80.0))
    d._on_station(11.2, StationSeen(B, -85.0))
    deadline = d.monitor.get_timer()
    assert deadline is not None
    d.monitor.handle_timer(deadline)
    d._apply(deadline, d._decisions())
    down = [e for e in published if isinstance(e, events.NeighbourDown)]
    assert [(e.reason, e.silent_s) for e in down] == [("silent", round(deadline - 11.2, 3))]
