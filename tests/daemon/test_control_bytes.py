"""Control bytes on the air (control overhead in bytes for the manetkit stacks,
as the peers' nftables counters give it): the wire tells control frames from data, the
shell counts what it sends. No kernel: a fake data plane records sends."""

from __future__ import annotations

from ipaddress import IPv4Address

from hypothesis import given
from hypothesis import strategies as st

from manetkit.daemon.config import DaemonConfig
from manetkit.daemon.shell import Daemon
from manetkit.daemon.wire import aodv, dsr, ipv4
from manetkit.daemonstatus import DaemonStatus
from manetkit.experiment import metrics
from tests.helpers.statuses import make_status
from tests.security.test_shell_auth import FakeDataPlane

N1, N9 = IPv4Address("10.42.0.1"), IPv4Address("10.42.0.9")
IP = dsr.IPFields(N1, N9)


@given(nh=st.sampled_from([ipv4.PROTO_TCP, ipv4.PROTO_UDP, ipv4.PROTO_ICMP]),
       payload=st.binary(max_size=64))  # fmt: skip
def test_dsr_data_is_not_control_even_with_options_piggybacked(nh, payload):
    route = dsr.SourceRoute((IPv4Address("10.42.0.5"),), 1)
    err = dsr.RouteError.node_unreachable(N1, N9, IPv4Address("10.42.0.5"), 0)
    assert not dsr.is_control(dsr.encapsulate(IP, [route, err], nh, payload))


def test_dsr_requests_replies_errors_alone_are_control():
    for opt in (dsr.RouteRequest(7, N9), dsr.RouteReply((N9,), False)):
        assert dsr.is_control(dsr.encapsulate(IP, [opt], dsr.NO_NEXT_HEADER))
    aodv_pkt = ipv4.udp(aodv.AODV_PORT, aodv.AODV_PORT, b"\x01" * 24, N1, N9)
    assert not dsr.is_control(ipv4.build(N1, N9, ipv4.PROTO_UDP, aodv_pkt))
    assert not dsr.is_control(b"\x45" + bytes(10))  # short: not a packet at all


def daemon(tmp_path, protocol: str) -> Daemon:
    data = {"address": str(N1), "protocol": protocol, "event_socket": str(tmp_path / "ev.sock")}
    d = Daemon(DaemonConfig.model_validate(data))
    d.dp = FakeDataPlane()  # type: ignore[assignment]
    return d


def test_the_shell_counts_the_control_frames_it_sends(tmp_path):
    for protocol, is_control in (("dsr", dsr.is_control), ("aodv", aodv.is_control)):
        d = daemon(tmp_path, protocol)
        d._now = 1.0
        d.engine.rediscover(1.0, N9)  # a route request (DSR) / RREQ (AODV), broadcast
        d._transmit()
        sent = [pkt for _mac, pkt in d.dp.sent]  # type: ignore[union-attr]
        control = [p for p in sent if is_control(p)]
        assert control, protocol
        shell = d.status().counters.shell
        assert shell["control-tx-frames"] == len(control)
        assert shell["control-tx-bytes"] == sum(map(len, control))
        d._send_broadcast(b"\x45" + bytes(27))  # a link-sensing hello is control too
        shell = d.status().counters.shell
        assert shell["control-tx-frames"] == len(control) + 1
        assert shell["control-tx-bytes"] == sum(map(len, control)) + 28


def test_control_bytes_reach_the_overhead_per_delivered_packet_not_the_packet_count():
    def status(req: int, ctl_bytes: int, tun_tx: int) -> DaemonStatus:
        return make_status(engine={"counters": {"requests-sent": req}},
                           counters={"shell": {"control-tx-bytes": ctl_bytes},
                                     "dataplane": {"tun_tx": tun_tx}})  # fmt: skip

    before = metrics.control_totals([status(1, 100, 0), status(0, 50, 10)])
    after = metrics.control_totals([status(3, 400, 0), status(1, 150, 60)])
    got = metrics.control_overhead(before, after)
    assert got["control_packets"] == 3
    assert got["control_bytes"] == 400
    assert got["bytes_per_delivered"] == 8.0
    assert metrics.control_overhead(after, after)["bytes_per_delivered"] is None
