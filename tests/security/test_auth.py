"""Control-plane authentication (manetkit/daemon/auth.py), sans-I/O: sign, verify,
tamper, replay, old counters, the transmitter's MAC address, RFC 8967's challenge for
a new index, key roll-over, required vs not, unknown key id, key file permissions, and
tshark still decoding signed frames as AODV/DSR."""

from __future__ import annotations

from ipaddress import IPv4Address

import pytest

from manetkit.daemon import auth
from manetkit.daemon.linksense.hello import build_hello, parse_hello
from manetkit.daemon.wire import aodv, dsr, ipv4, manet_ext
from manetkit.errors import UserError
from tests.helpers import tshark

A1, A2, A3 = (IPv4Address(f"10.42.0.{i}") for i in (1, 2, 3))
MAC1 = bytes.fromhex("020000000001")
MAC9 = bytes.fromhex("020000000009")
K1 = auth.Key(1, "hmac-sha256", bytes(range(32)))
K2 = auth.Key(2, "blake2s128", bytes(range(100, 132)))


def node(*keys: auth.Key, required: bool = False, seed: int = 7) -> auth.Authenticator:
    return auth.Authenticator(list(keys) or [K1], required, random=lambda n: bytes([seed] * n))


def rrep() -> bytes:
    msg = aodv.RREP(hop_count=1, dest=A3, dest_seq=5, orig=A1, lifetime_ms=3000)
    return aodv.control_packet(msg, A2, A1, ttl=64)


def rreq() -> bytes:
    msg = aodv.RREQ(2, 9, A3, 0, A1, 4, unknown_seq=True, extensions=[(1, b"\0\0\3\xe8")])
    return aodv.control_packet(msg, A1, aodv.BROADCAST, ttl=3)


def dsr_rerr() -> bytes:
    err = dsr.RouteError.node_unreachable(A2, A1, A3)
    route = dsr.SourceRoute((A2,), 1)
    return dsr.encapsulate(dsr.IPFields(A3, A1), [err, route], dsr.NO_NEXT_HEADER)


def dsr_data() -> bytes:
    inner = ipv4.udp(5000, 5001, b"payload", A1, A3)
    return dsr.encapsulate(dsr.IPFields(A1, A3), [dsr.SourceRoute((A2,), 1)], 17, inner)


def hello() -> bytes:
    return build_hello(A2, 3, 1.0)


CONTROL = {"aodv-rrep": rrep, "aodv-rreq": rreq, "dsr-rerr": dsr_rerr, "hello": hello}


def exchange(a: auth.Authenticator, a_mac: bytes, b: auth.Authenticator, b_mac: bytes,
             now: float = 0.0) -> list[bytes]:  # fmt: skip
    """Carry the challenges a and b emit to each other until none is left; the magics."""
    seen = []
    for _ in range(8):
        moved = False
        for src, mac, dst, dst_mac in ((a, a_mac, b, b_mac), (b, b_mac, a, a_mac)):
            while (c := src.next_event()) is not None:
                assert c.mac == dst_mac
                moved = True
                seen.append(c.packet[28:32])
                dst.verify(now, src.sign(now, c.packet, mac), mac)
        if not moved:
            return seen
    raise AssertionError("challenges never settle")


def meet(tx: auth.Authenticator, rx: auth.Authenticator, now: float = 0.0) -> None:
    """rx hears tx (at MAC1) for the first time: RFC 8967's challenge, then rx trusts
    tx's index."""
    assert rx.verify(now, tx.sign(now, hello(), MAC1), MAC1) == auth.Rejected("new-index")
    exchange(tx, MAC1, rx, MAC9, now)


@pytest.mark.parametrize("make", CONTROL.values(), ids=CONTROL.keys())
@pytest.mark.parametrize("key", [K1, K2], ids=["hmac-sha256", "blake2s128"])
def test_round_trip_gives_the_engine_the_original(make, key):
    tx, rx = node(key), node(key, required=True)
    meet(tx, rx)
    pkt = make()
    signed = tx.sign(0.0, pkt, MAC1)
    assert len(signed) == len(pkt) + (4 if make is dsr_rerr else 2) + 9 + key.mac_len
    assert rx.verify(0.0, signed, MAC1) == pkt
    assert rx.counters["verified"] == 1


def test_signed_frames_still_parse_with_the_project_parsers():
    tx = node()
    _, msg = aodv.parse_control(tx.sign(0, rreq(), MAC1))
    assert msg.extensions[0] == (1, b"\0\0\3\xe8")
    assert msg.extensions[-1][0] == manet_ext.AODV_EXT_AUTH
    _, dh = dsr.parse(tx.sign(0, dsr_rerr(), MAC1))
    assert dh.find(dsr.RouteError) and dh.find(dsr.SourceRoute)
    h = parse_hello(tx.sign(0, hello(), MAC1))
    assert h is not None and h.address == A2 and h.seq == 3


@pytest.mark.parametrize("make", CONTROL.values(), ids=CONTROL.keys())
def test_any_flipped_bit_is_rejected(make):
    tx = node()
    rx = node(required=True)  # not required, a frame no longer signed passes as unsigned
    meet(tx, rx)
    signed = tx.sign(0.0, make(), MAC1)
    # Every byte after the IP header (the IP/UDP checksums aside, which the data
    # plane checks) and the addresses of the IP header.
    for i in [*range(12, 20), *range(28 if signed[9] == 17 else 20, len(signed))]:
        bad = bytearray(signed)
        bad[i] ^= 0x01
        out = rx.verify(0.0, bytes(bad), MAC1)
        assert isinstance(out, auth.Rejected), f"byte {i} flipped and accepted"
    assert rx.counters["verified"] == 0
    assert rx.verify(0.0, signed, MAC1) == make()  # the rejections were the flips'


def test_a_frame_is_bound_to_the_radio_that_sent_it():
    """A signed hello or RREQ relayed unchanged from another radio (a rogue's) does not
    verify: the transmitter's MAC address is in the MAC input."""
    tx, rx = node(), node(required=True)
    meet(tx, rx)
    for make in (hello, rreq):
        signed = tx.sign(0, make(), MAC1)
        assert rx.verify(0, signed, MAC9) == auth.Rejected("bad-mac")  # relayed
        assert rx.verify(0, signed, MAC1) == make()  # as sent
    assert rx.counters["rejected-bad-mac"] == 2


def test_replay_and_old_counter_are_rejected_window_accepts_reordering():
    tx, rx = node(), node()
    meet(tx, rx)
    frames = [tx.sign(0, rrep(), MAC1) for _ in range(5)]
    assert rx.verify(0, frames[4], MAC1) == rrep()
    assert rx.verify(0, frames[4], MAC1) == auth.Rejected("replay")
    # Reordered within the 64-packet window: accepted once each.
    assert rx.verify(0, frames[1], MAC1) == rrep()
    assert rx.verify(0, frames[1], MAC1) == auth.Rejected("replay")
    # Too old for the window.
    old = tx.sign(0, rrep(), MAC1)
    for _ in range(70):
        rx.verify(0, tx.sign(0, rrep(), MAC1), MAC1)
    assert rx.verify(0, old, MAC1) == auth.Rejected("replay")
    assert rx.counters["rejected-replay"] == 3


def test_frames_recorded_before_a_receiver_restart_are_never_accepted():
    """RFC 8967 4.3: a restarted receiver knows no index; the sender's frames are
    accepted only after it answered a challenge, and only those signed after."""
    tx, rx = node(), node(required=True)
    meet(tx, rx)
    recorded = [tx.sign(0, rrep(), MAC1) for _ in range(3)]
    assert rx.verify(0, recorded[0], MAC1) == rrep()
    rx = node(required=True, seed=9)  # the receiver restarts: no state
    assert rx.verify(1, recorded[1], MAC1) == auth.Rejected("new-index")
    # Each asks the other (the sender does not know the new receiver either), each answers.
    assert sorted(exchange(tx, MAC1, rx, MAC9, 1)) == [b"MKCQ", b"MKCQ", b"MKCR", b"MKCR"]
    assert rx.counters["challenge-succeeded"] == 1
    assert rx.verify(1, recorded[2], MAC1) == auth.Rejected("replay")  # older than the reply
    assert rx.verify(1, tx.sign(1, rrep(), MAC1), MAC1) == rrep()


def test_a_restarted_sender_is_challenged_then_accepted():
    tx, rx = node(seed=1), node(required=True)
    meet(tx, rx)
    tx = node(seed=2)  # the sender restarts: a new index
    assert rx.verify(2, tx.sign(2, rrep(), MAC1), MAC1) == auth.Rejected("new-index")
    exchange(tx, MAC1, rx, MAC9, 2)
    assert rx.verify(2, tx.sign(2, rrep(), MAC1), MAC1) == rrep()


def test_challenges_are_rate_limited_and_nonces_single_use():
    draws = iter(range(1, 100))
    tx = node()
    rx = auth.Authenticator([K1], random=lambda n: next(draws).to_bytes(n, "big"))
    first = tx.sign(0, rrep(), MAC1)
    for t in (0.0, 0.1, 0.2):
        assert rx.verify(t, first, MAC1) == auth.Rejected("new-index")
    requests = list(iter(rx.next_event, None))
    assert len(requests) == 1 and rx.counters["challenge-ratelimited"] == 2
    assert rx.verify(0.31, first, MAC1) == auth.Rejected("new-index")
    (request,) = iter(rx.next_event, None)
    # A reply to the first nonce is stale now: only the latest one counts.
    reply = tx._challenge_packet(b"MKCR", requests[0].packet[32:40])
    assert rx.verify(0.32, tx.sign(0.32, reply, MAC1), MAC1) == auth.Rejected("stale-challenge")
    good = tx._challenge_packet(b"MKCR", request.packet[32:40])
    signed = tx.sign(0.33, good, MAC1)
    assert rx.verify(0.33, signed, MAC1) is auth.HANDLED
    assert rx.verify(0.34, signed, MAC1) == auth.Rejected("replay")
    late = node(), node(required=True)
    late[1].verify(0, late[0].sign(0, rrep(), MAC1), MAC1)
    (req,) = iter(late[1].next_event, None)
    answer = late[0]._challenge_packet(b"MKCR", req.packet[32:40])
    assert late[1].verify(31, late[0].sign(31, answer, MAC1), MAC1) == auth.Rejected(
        "stale-challenge"
    )  # after CHALLENGE_LIFETIME


def test_unsigned_challenges_are_refused_even_when_not_required():
    lax = node()
    reply = node()._challenge_packet(b"MKCR", bytes(8))
    assert lax.verify(0, reply, MAC1) == auth.Rejected("unsigned")


def test_forgery_does_not_advance_the_window():
    tx, rx = node(), node()
    meet(tx, rx)
    good = tx.sign(0, rrep(), MAC1)
    forged = bytearray(tx.sign(0, rrep(), MAC1))
    forged = forged[:-1] + bytes([forged[-1] ^ 0xFF])
    assert rx.verify(0, bytes(forged), MAC1) == auth.Rejected("bad-mac")
    assert rx.verify(0, good, MAC1) == rrep()  # its PC still fresh


def test_wrong_key_same_id_is_a_bad_mac():
    other = auth.Key(1, "hmac-sha256", b"x" * 32)
    assert node(other).verify(0, node(K1).sign(0, rrep(), MAC1), MAC1) == auth.Rejected("bad-mac")


def test_unknown_key_id_is_rejected_even_when_not_required():
    rx = node(K1)
    assert rx.verify(0, node(K2).sign(0, rrep(), MAC1), MAC1) == auth.Rejected("unknown-key")
    assert rx.counters["rejected-unknown-key"] == 1


def test_key_roll_over_with_two_keys():
    old_only, both_old_first, both_new_first, new_only = (
        node(K1, seed=1), node(K1, K2, seed=2), node(K2, K1, seed=3), node(K2, seed=4)
    )  # fmt: skip
    # Step 1: every node verifies both, still signs with the old key.
    meet(old_only, both_old_first)
    assert both_old_first.verify(0, old_only.sign(0, rrep(), MAC1), MAC1) == rrep()
    # Step 2: nodes sign with the new key; a node still at step 1 accepts it.
    meet(both_new_first, both_old_first, now=1.0)  # the same MAC, a new index: asked again
    assert both_old_first.verify(1, both_new_first.sign(1, rrep(), MAC1), MAC1) == rrep()
    # Step 3: the old key is gone: its frames are refused.
    assert new_only.verify(0, old_only.sign(0, rrep(), MAC1), MAC1) == auth.Rejected("unknown-key")


def test_required_drops_unsigned_control_but_never_data():
    strict, lax = node(required=True), node()
    for make in CONTROL.values():
        assert strict.verify(0, make(), MAC1) == auth.Rejected("unsigned")
        assert lax.verify(0, make(), MAC1) == make()
    assert strict.counters["rejected-unsigned"] == len(CONTROL)
    assert lax.counters["unsigned-accepted"] == len(CONTROL)
    data = dsr_data()
    assert strict.verify(0, data, MAC1) == data  # Source Route only: never signed
    assert node().sign(0, data, MAC1) == data
    plain = ipv4.build(A1, A3, 17, ipv4.udp(1, 2, b"x", A1, A3))  # AODV-routed data
    assert strict.verify(0, plain, MAC1) == plain and node().sign(0, plain, MAC1) == plain


def test_resigning_replaces_the_previous_trailer():
    tx, rx = node(), node()
    meet(tx, rx)
    twice = tx.sign(0, tx.sign(0, dsr_rerr(), MAC1), MAC1)
    assert len(twice) == len(tx.sign(0, dsr_rerr(), MAC1))
    assert rx.verify(0, twice, MAC1) == dsr_rerr()


def test_counter_wrap_draws_a_new_index():
    draws = iter([b"\0\0\0\1", b"\0\0\0\2"])
    tx = auth.Authenticator([K1], random=lambda n: next(draws))
    tx.pc = 0xFFFFFFFF
    tx.sign(0, rrep(), MAC1)
    assert (tx.index, tx.pc) == (2, 1)


def test_neighbour_table_is_bounded():
    rx = auth.Authenticator([K1], max_neighbours=2)
    for i in range(5):
        rx.verify(0, node(seed=i).sign(0, rrep(), bytes([2, 0, 0, 0, 0, i])),
                  bytes([2, 0, 0, 0, 0, i]))  # fmt: skip
    assert len(rx) == 2 and rx.counters["neighbour-evicted"] == 3


def test_malformed_trailer_is_rejected_and_counted_even_when_not_required():
    for required in (True, False):
        tx, rx = node(), node(required=required)
        signed = bytearray(tx.sign(0, hello(), MAC1))
        bcast = IPv4Address("255.255.255.255")
        cut = ipv4.build(A2, bcast, 17, ipv4.udp(49698, 49698, bytes(signed[28:-5]), A2, bcast),
                         ttl=1)  # fmt: skip
        assert rx.verify(0, cut, MAC1) == auth.Rejected("malformed")
        assert rx.counters["rejected-malformed"] == 1


def _key_file(path, text: str, mode: int = 0o600):
    path.write_text(text)
    path.chmod(mode)
    return path


def test_keys_load_from_hex_files_and_never_show(tmp_path):
    f = _key_file(tmp_path / "k1", bytes(range(32)).hex() + "\n")
    cfg = auth.AuthConfig.model_validate({"keys": [{"id": 1, "key_file": str(f)}]})
    assert cfg.required  # a node with a key refuses unsigned control unless told otherwise
    a = auth.Authenticator.from_config(cfg, 49698)
    assert a.required and a.signing.secret == bytes(range(32))
    assert bytes(range(32)).hex() not in repr(a.signing)
    short = _key_file(tmp_path / "short", "abcd")
    bad = auth.AuthConfig.model_validate({"keys": [{"id": 1, "key_file": str(short)}]})
    with pytest.raises(UserError, match=r"auth.keys\[0\].key_file: .* holds 2 bytes, need 16-64"):
        auth.load_keys(bad)
    with pytest.raises(ValueError, match="duplicate key id"):
        auth.AuthConfig.model_validate(
            {"keys": [{"id": 1, "key_file": str(f)}, {"id": 1, "key_file": str(f)}]}
        )


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_key_file_others_can_read_is_refused(tmp_path, mode):
    f = _key_file(tmp_path / "k", bytes(range(32)).hex(), mode)
    cfg = auth.AuthConfig.model_validate({"keys": [{"id": 1, "key_file": str(f)}]})
    with pytest.raises(UserError, match=rf"auth.keys\[0\].key_file: .* mode {mode:04o}.*chmod 600"):
        auth.load_keys(cfg)


def _frame(packet: bytes) -> bytes:
    return MAC9 + MAC1 + tshark.ETHERTYPE.to_bytes(2, "big") + packet


def test_tshark_decodes_signed_frames_as_aodv_and_dsr():
    tx = node()
    layers = tshark.decode([_frame(tx.sign(0, rrep(), MAC1)), _frame(tx.sign(0, dsr_rerr(), MAC1))])
    a, d = layers
    assert "aodv" in a and "_ws.malformed" not in a, a.keys()
    assert a["aodv"]["aodv.type"] == "2"
    assert "dsr" in d and "_ws.malformed" not in d, d.keys()
    text = repr(d["dsr"])
    assert "10.42.0.3" in text  # the unreachable node, read past our option
