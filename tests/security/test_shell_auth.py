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
        self.mac = bytes.fromhex("020000000001")  # the radio's (signatures bind it)
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
        (tmp_path / "k").chmod(0o600)
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


def handshake(d: Daemon, peer: auth.Authenticator, peer_mac: bytes) -> None:
    """Carry RFC 8967's challenges between the daemon and a key holder until quiet."""
    dp: FakeDataPlane = d.dp  # type: ignore[assignment]
    for _ in range(8):
        out, dp.sent = [(m, p) for m, p in dp.sent if m == peer_mac], []
        for _m, pkt in out:
            peer.verify(d._now, pkt, dp.mac)
        back = list(iter(peer.next_event, None))
        for c in back:
            d._rx_frame(peer_mac, peer.sign(d._now, c.packet, peer_mac))
        if not out and not back:
            return
    raise AssertionError("challenges never settle")


def test_with_auth_signed_frames_reach_the_engine_and_output_is_signed(tmp_path):
    d = daemon(tmp_path, True)
    peer = auth.Authenticator([auth.Key(1, "hmac-sha256", KEY)])
    d._rx_frame(ROGUE_MAC, peer.sign(0, forged_rrep(ROGUE, N1, N2, 7), ROGUE_MAC))
    assert d.drops["auth-new-index"] == 1  # a key holder it never heard: challenged first
    assert str(N2) not in routes(d)
    handshake(d, peer, ROGUE_MAC)
    assert d.auth is not None and d.auth.counters["challenge-succeeded"] == 1
    d._rx_frame(ROGUE_MAC, peer.sign(0, forged_rrep(ROGUE, N1, N2, 7), ROGUE_MAC))
    assert routes(d).get(str(N2)) == str(ROGUE)  # a key holder is trusted
    d._now = 1.0
    d.engine.handle_timer(1.0)  # AODV hello / any control output
    d.engine.rediscover(1.0, IPv4Address("10.42.0.9"))  # a RREQ
    d._transmit()
    assert d.dp.sent  # type: ignore[union-attr]
    checked = 0
    for _mac, pkt in d.dp.sent:  # type: ignore[union-attr]
        if aodv.is_control(pkt):
            assert not isinstance(peer.verify(1.0, pkt, d.dp.mac), auth.Rejected)  # type: ignore[union-attr]
            checked += 1
    assert checked and (d.status().counters.auth or {})["signed"] >= 1


def test_a_frame_relayed_from_another_radio_is_refused(tmp_path):
    """A signed frame sent again from another MAC address (a rogue relaying what it
    heard) does not verify: it would otherwise map the signer's address to that MAC."""
    d = daemon(tmp_path, True)
    peer = auth.Authenticator([auth.Key(1, "hmac-sha256", KEY)])
    d._rx_frame(ROGUE_MAC, peer.sign(0, forged_rrep(ROGUE, N1, N2, 7), ROGUE_MAC))
    handshake(d, peer, ROGUE_MAC)
    relayed = peer.sign(0, forged_rrep(ROGUE, N1, N2, 9), ROGUE_MAC)
    d._rx_frame(bytes.fromhex("020000000099"), relayed)
    assert d.drops["auth-bad-mac"] == 1
    assert d.neighbours.mac_of(ROGUE) in (None, ROGUE_MAC)
