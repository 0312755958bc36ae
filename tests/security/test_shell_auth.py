"""The shell's hooks (manetkit/daemon/shell.py): frames are verified before the engine
sees them and signed after it emits them. No kernel: a fake data plane records sends."""

from __future__ import annotations

from ipaddress import IPv4Address

from manetkit.daemon import auth
from manetkit.daemon.config import DaemonConfig
from manetkit.daemon.shell import Daemon
from manetkit.daemon.wire import aodv
from tests.security.rogue import forged_rrep

N1, N2, ROGUE = (IPv4Address(f"10.42.0.{i}") for i in (1, 2, 3))
ROGUE_MAC = bytes.fromhex("020000000003")
KEY = bytes(range(32))


from manetkit.daemon.flowcount import FlowCounter  # noqa: E402


class FakeDataPlane:
    def __init__(self) -> None:
        self.sent: list[tuple[bytes, bytes]] = []
        self.radio_lost = None  # the real one: set when the radio interface went away
        self.originated = FlowCounter()  # status: packets per destination, as the real one
        self.delivered = FlowCounter()

    def send(self, mac: bytes, packet: bytes) -> bool:
        self.sent.append((mac, packet))
        return True

    def counters(self) -> dict:
        return {}


def daemon(tmp_path, required: bool | None) -> Daemon:
    data = {"address": str(N1), "protocol": "aodv", "event_socket": str(tmp_path / "ev.sock")}
    if required is not None:
        (tmp_path / "k").write_text(KEY.hex())
        data["auth"] = {"keys": [{"id": 1, "key_file": str(tmp_path / "k")}], "required": required}
    d = Daemon(DaemonConfig.model_validate(data))
    d.dp = FakeDataPlane()  # type: ignore[assignment]
    return d


def routes(d: Daemon) -> dict[str, str]:
    return {r["dst"]: r["next_hop"] for r in d.engine.status()["routes"]}


def test_without_auth_a_forged_rrep_changes_the_route(tmp_path):
    d = daemon(tmp_path, None)
    d._rx_frame(ROGUE_MAC, forged_rrep(ROGUE, N1, N2, 0x7FFFFFF0))
    assert routes(d).get(str(N2)) == str(ROGUE)  # the black hole the auth layer prevents


def test_with_auth_the_forgery_never_reaches_the_engine(tmp_path):
    d = daemon(tmp_path, True)
    d._rx_frame(ROGUE_MAC, forged_rrep(ROGUE, N1, N2, 0x7FFFFFF0))
    assert str(N2) not in routes(d)
    assert d.drops["auth-unsigned"] == 1


def test_with_auth_signed_frames_reach_the_engine_and_output_is_signed(tmp_path):
    d = daemon(tmp_path, True)
    peer = auth.Authenticator([auth.Key(1, "hmac-sha256", KEY)])
    d._rx_frame(ROGUE_MAC, peer.sign(0, forged_rrep(ROGUE, N1, N2, 7)))
    assert routes(d).get(str(N2)) == str(ROGUE)  # a key holder is trusted
    d._now = 1.0
    d.engine.handle_timer(1.0)  # AODV hello / any control output
    d.engine.rediscover(1.0, IPv4Address("10.42.0.9"))  # a RREQ
    d._transmit()
    assert d.dp.sent  # type: ignore[union-attr]
    checker = auth.Authenticator([auth.Key(1, "hmac-sha256", KEY)], required=True)
    for _mac, pkt in d.dp.sent:  # type: ignore[union-attr]
        if aodv.is_control(pkt):
            assert not isinstance(checker.verify(1.0, pkt, b"\x02\0\0\0\0\1"), auth.Rejected)
    assert (d.status().counters.auth or {})["signed"] >= 1
