"""The lab radio against a fake medium: a real TAP in a real namespace, the medium's side
played by this test over the datagram protocol (``manetkit.lab.medium.protocol``)."""

from __future__ import annotations

import json
import os
import signal
import socket

import pytest
from scapy.layers.l2 import ARP, Ether

from manetkit import paths
from manetkit.lab import netns
from manetkit.lab.medium import protocol
from manetkit.lab.stations import StationTable, format_iw
from manetkit.macaddr import format_mac
from tests.helpers.lab import wait_for
from tests.helpers.radio import control

N1 = protocol.node_mac(1)
N2 = protocol.node_mac(2)


def test_station_table_average_and_expiry():
    t = StationTable(expiry_s=10)
    assert t.received(N2, -60.0, 100, now=0.0)
    assert not t.received(N2, -68.0, 100, now=1.0)
    st = t.by_mac[N2]
    assert st.signal_dbm == -68.0
    assert st.signal_avg_dbm == pytest.approx(-61.0)  # EWMA 1/8, as mac80211
    t.sent(N2, 50)
    t.tx_status(N2, retries=7, ok=False, now=1.5)
    t.sent(N1, 50)  # unknown station: not counted (mac80211 has no sta_info for it)
    d = t.dump(now=1.5)[0]
    assert (d["tx_packets"], d["tx_bytes"], d["tx_retries"], d["tx_failed"]) == (1, 50, 7, 1)
    assert d["inactive_ms"] == 500
    assert t.expire(now=10.9) == []
    assert t.expire(now=11.1) == [N2]
    assert t.dump(now=12) == []


def test_iw_format_matches_iw_station_dump():
    text = format_iw(
        [
            {
                "mac": "02:6d:6b:00:00:02",
                "signal_dbm": -61.4,
                "signal_avg_dbm": -60.6,
                "inactive_ms": 120,
                "rx_packets": 3,
                "rx_bytes": 300,
                "tx_packets": 2,
                "tx_bytes": 200,
                "tx_retries": 1,
                "tx_failed": 0,
            }
        ],
        now_ms=5,
    )
    assert text == (
        "Station 02:6d:6b:00:00:02 (on radio0)\n"
        "\tinactive time:\t120 ms\n"
        "\trx bytes:\t300\n"
        "\trx packets:\t3\n"
        "\ttx bytes:\t200\n"
        "\ttx packets:\t2\n"
        "\ttx retries:\t1\n"
        "\ttx failed:\t0\n"
        "\tsignal:  \t-61 dBm\n"
        "\tsignal avg:\t-61 dBm\n"
        "\tcurrent time:\t5 ms\n"
    )


@pytest.mark.netns
def test_radio_relays_frames_keeps_stations_and_reports_tx_failures(radio_node):
    lab, ns, medium, proc = radio_node
    assert isinstance(medium.recv(), protocol.Attach)
    # Until the medium answers, radio0 exists but has no carrier (not joined).
    wait_for(lambda: paths.radio_control_socket(lab, "n1").exists(), what="control socket")
    assert control(lab, {"cmd": "stats"})["attached"] is False
    medium.send(protocol.attached(1))
    wait_for(lambda: control(lab, {"cmd": "stats"})["attached"], what="attached")
    link = netns.run(ns, ["ip", "-j", "link", "show", "radio0"]).stdout
    info = json.loads(link)[0]
    assert info["address"] == format_mac(N1)
    assert info["mtu"] == 1500
    assert "LOWER_UP" in info["flags"]
    netns.run(ns, ["ip", "addr", "add", "10.99.0.1/24", "dev", "radio0"])
    netns.run(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.radio0.disable_ipv6=1"])

    subscriber = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    subscriber.settimeout(5)
    subscriber.connect(str(paths.radio_control_socket(lab, "n1")))
    events = subscriber.makefile("rb")
    subscriber.sendall(b'{"cmd":"subscribe"}\n')
    assert json.loads(events.readline())["subscribed"] is True

    # DELIVER an ARP request from n2: the kernel behind radio0 must answer it, and the
    # answer must come back to the medium as a TX (both directions of the relay).
    who_has = Ether(src=format_mac(N2), dst="ff:ff:ff:ff:ff:ff") / ARP(
        op=1, hwsrc=format_mac(N2), psrc="10.99.0.2", pdst="10.99.0.1"
    )
    medium.send(protocol.deliver(-61.5, bytes(who_has)))
    assert json.loads(events.readline()) == {
        "event": "station-new",
        "mac": format_mac(N2),
        "signal_dbm": -61.5,
    }
    # (IPv6 frames queued before it was disabled may come first: skip them.)
    tx = medium.recv_until(protocol.Tx, lambda m: Ether(m.frame).haslayer(ARP))
    reply = Ether(tx.frame)
    assert reply.dst == format_mac(N2) and reply[ARP].op == 2
    assert reply[ARP].psrc == "10.99.0.1"

    # The medium reports that a unicast to n2 failed after 7 retries.
    medium.send(protocol.txstatus(N2, 7, False, tx.frame))
    ev = json.loads(events.readline())
    assert ev == {
        "event": "tx-failed",
        "mac": format_mac(N2),
        "retries": 7,
        "frame": tx.frame.hex(),
    }
    (st,) = control(lab, {"cmd": "stations"})["stations"]
    assert st["mac"] == format_mac(N2)
    assert st["signal_dbm"] == -61.5 and st["rx_packets"] == 1
    assert st["tx_packets"] >= 1 and st["tx_failed"] == 1 and st["tx_retries"] == 7
    assert (st["rx_signal_frames"], st["rx_signal_sum_dbm"]) == (1, -61.5)
    # A second frame from a known station takes the hot path's inlined accounting: the
    # per-frame power sums (Atra's RFP input, docs/atra.md) grow with it.
    medium.send(protocol.deliver(-63.5, bytes(who_has)))
    wait_for(
        lambda: control(lab, {"cmd": "stations"})["stations"][0]["rx_packets"] == 2,
        what="second frame",
    )
    (st,) = control(lab, {"cmd": "stations"})["stations"]
    assert (st["rx_signal_frames"], st["rx_signal_sum_dbm"], st["signal_dbm"]) == (2, -125.0, -63.5)

    # Malformed datagrams are counted and dropped; the radio keeps working.
    before = control(lab, {"cmd": "stats"})
    medium.send(b"\x55garbage")
    medium.send(bytes([protocol.DELIVER]) + b"\x00")  # too short to hold a frame
    wait_for(
        lambda: control(lab, {"cmd": "stats"})["malformed"] == before["malformed"] + 2,
        what="malformed counter",
    )
    assert control(lab, {"cmd": "bogus"})["ok"] is False

    # SIGTERM: DETACH, sockets removed, radio0 gone with the process.
    os.kill(proc.pid, signal.SIGTERM)
    assert isinstance(medium.recv_until(protocol.Detach), protocol.Detach)
    assert proc.wait(timeout=10) == 0, proc.stdout.read()
    assert not paths.radio_socket(lab, "n1").exists()
    assert not paths.radio_control_socket(lab, "n1").exists()
    links = netns.run(ns, ["ip", "-o", "link", "show"]).stdout
    assert "radio0" not in links
    subscriber.close()


@pytest.mark.netns
def test_radio_exits_when_the_medium_refuses(radio_node):
    lab, _ns, medium, proc = radio_node
    assert isinstance(medium.recv(), protocol.Attach)
    medium.send(protocol.refused("unknown node id 1"))
    assert proc.wait(timeout=10) == 1
    assert "unknown node id 1" in proc.stdout.read()
