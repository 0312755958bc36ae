"""Overhearing: a unicast also reaches promiscuous listeners in range (radio.overhear).

The medium part runs on a fake clock; the radio part is the real radio process against
the test's fake medium (``test_lab_radio.FakeMedium``), with a real TAP in a namespace.
"""

from __future__ import annotations

import json

import pytest

from manetkit.lab import netns
from manetkit.lab.medium import protocol
from manetkit.lab.medium.mac import Medium
from manetkit.lab.scenario import Radio
from manetkit.macaddr import format_mac
from tests.helpers.lab import wait_for
from tests.helpers.medium import frame, medium, run
from tests.helpers.radio import control

# n1 -- n2 200 m apart; n3 hears n1 (141 m); n4 is 600 m away (hears nobody).
POSITIONS = [(0, 0), (200, 0), (100, 100), (0, 600)]


def deliveries_of_one_unicast(m: Medium, dst: int = 2) -> list[tuple[int, float, bytes]]:
    f = frame(1, dst, 200)
    m.transmit(0.0, 1, f)
    d, _ = run(m, until=1.0)
    assert all(fr == f for _, _, fr in d)
    return d


def test_unicast_reaches_promiscuous_listeners_in_range_only():
    m = medium(POSITIONS)
    assert [n for n, _, _ in deliveries_of_one_unicast(m)] == [2]  # nobody asked
    m.set_overhear(3, True)
    m.set_overhear(4, True)
    d = deliveries_of_one_unicast(m)
    assert sorted(n for n, _, _ in d) == [2, 3]  # n4 is out of range
    rssi = {n: r for n, r, _ in d}
    assert rssi[3] == pytest.approx(m.prop.rx_power_dbm(2**0.5 * 100))
    assert m.counters["overheard"] == 1
    assert m.counters["unicast_ok"] == 2 and m.counters["retries"] == 0  # no ACK effects
    m.set_overhear(3, False)
    assert [n for n, _, _ in deliveries_of_one_unicast(m)] == [2]


def test_failed_unicast_and_detached_listener_overhear_nothing():
    m = medium(POSITIONS, retry_limit=1)
    m.set_overhear(3, True)
    d = deliveries_of_one_unicast(m, dst=4)  # n4 is out of n1's range: fails
    assert d == [] and m.counters["unicast_failed"] == 1
    m.set_attached(3, False)  # detaching clears the wish
    m.set_attached(3, True)
    assert [n for n, _, _ in deliveries_of_one_unicast(m)] == [2]


def test_scenario_can_turn_overhearing_off():
    assert Radio().overhear is True
    m = medium(POSITIONS, overhear=False)
    m.set_overhear(3, True)
    assert [n for n, _, _ in deliveries_of_one_unicast(m)] == [2]


def test_overhear_message_round_trip():
    assert protocol.parse(protocol.overhear(True)) == protocol.Overhear(True)
    assert protocol.parse(protocol.overhear(False)) == protocol.Overhear(False)
    with pytest.raises(protocol.ProtocolError):
        protocol.parse(bytes([protocol.OVERHEAR, 2]))


def _rx_packets(ns: str) -> int:
    info = json.loads(netns.run(ns, ["ip", "-j", "-s", "link", "show", "radio0"]).stdout)[0]
    return info["stats64"]["rx"]["packets"]


@pytest.mark.netns
def test_radio_passes_overheard_frames_only_when_promiscuous(radio_node):  # noqa: F811
    lab, ns, fake, _proc = radio_node
    assert isinstance(fake.recv(), protocol.Attach)
    fake.send(protocol.attached(1))
    wait_for(lambda: control(lab, {"cmd": "stats"})["attached"], what="attached")
    n2, n3 = protocol.node_mac(2), protocol.node_mac(3)
    overheard = n3 + n2 + b"\x88\xb5" + bytes(60)  # n2 -> n3, heard by n1

    before = _rx_packets(ns)
    fake.send(protocol.deliver(-70.0, overheard))
    wait_for(
        lambda: control(lab, {"cmd": "stats"})["rx_overheard_dropped"] == 1,
        what="overheard frame dropped while not promiscuous",
    )
    assert _rx_packets(ns) == before

    netns.run(ns, ["ip", "link", "set", "radio0", "promisc", "on"])
    msg = fake.recv_until(protocol.Overhear)  # the radio asks the medium for them
    assert msg.on is True
    fake.send(protocol.deliver(-70.0, overheard))
    wait_for(lambda: control(lab, {"cmd": "stats"})["rx_overheard"] == 1, what="overheard")
    assert _rx_packets(ns) == before + 1
    (st,) = control(lab, {"cmd": "stations"})["stations"]
    assert st["mac"] == format_mac(n2)
    assert (st["rx_overheard"], st["rx_packets"], st["signal_dbm"]) == (1, 0, -70.0)

    netns.run(ns, ["ip", "link", "set", "radio0", "promisc", "off"])
    assert fake.recv_until(protocol.Overhear).on is False
