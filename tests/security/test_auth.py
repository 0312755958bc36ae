"""Control-plane authentication (manetkit/daemon/auth.py), sans-I/O: sign, verify,
tamper, replay, old counters, key roll-over, required vs not, unknown key id, and
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


@pytest.mark.parametrize("make", CONTROL.values(), ids=CONTROL.keys())
@pytest.mark.parametrize("key", [K1, K2], ids=["hmac-sha256", "blake2s128"])
def test_round_trip_gives_the_engine_the_original(make, key):
    tx, rx = node(key), node(key, required=True)
    pkt = make()
    signed = tx.sign(0.0, pkt)
    assert len(signed) == len(pkt) + (4 if make is dsr_rerr else 2) + 9 + key.mac_len
    assert rx.verify(0.0, signed, MAC1) == pkt
    assert rx.counters["verified"] == 1


def test_signed_frames_still_parse_with_the_project_parsers():
    tx = node()
    _, msg = aodv.parse_control(tx.sign(0, rreq()))
    assert msg.extensions[0] == (1, b"\0\0\3\xe8")
    assert msg.extensions[-1][0] == manet_ext.AODV_EXT_AUTH
    _, dh = dsr.parse(tx.sign(0, dsr_rerr()))
    assert dh.find(dsr.RouteError) and dh.find(dsr.SourceRoute)
    h = parse_hello(tx.sign(0, hello()))
    assert h is not None and h.address == A2 and h.seq == 3


@pytest.mark.parametrize("make", CONTROL.values(), ids=CONTROL.keys())
def test_any_flipped_bit_is_rejected(make):
    tx = node()
    signed = tx.sign(0.0, make())
    # Every byte after the IP header (the IP/UDP checksums aside, which the data
    # plane checks) and the addresses of the IP header.
    for i in [*range(12, 20), *range(28 if signed[9] == 17 else 20, len(signed))]:
        rx = node(required=True)  # not required, a frame no longer signed passes as unsigned
        bad = bytearray(signed)
        bad[i] ^= 0x01
        out = rx.verify(0.0, bytes(bad), MAC1)
        assert isinstance(out, auth.Rejected), f"byte {i} flipped and accepted"
        assert rx.counters["verified"] == 0


def test_replay_and_old_counter_are_rejected_window_accepts_reordering():
    tx, rx = node(), node()
    frames = [tx.sign(0, rrep()) for _ in range(5)]
    assert rx.verify(0, frames[4], MAC1) == rrep()
    assert rx.verify(0, frames[4], MAC1) == auth.Rejected("replay")
    # Reordered within the 64-packet window: accepted once each.
    assert rx.verify(0, frames[1], MAC1) == rrep()
    assert rx.verify(0, frames[1], MAC1) == auth.Rejected("replay")
    # Too old for the window.
    old = tx.sign(0, rrep())
    for _ in range(70):
        rx.verify(0, tx.sign(0, rrep()), MAC1)
    assert rx.verify(0, old, MAC1) == auth.Rejected("replay")
    assert rx.counters["rejected-replay"] == 3


def test_replay_window_is_per_neighbour_and_per_index():
    a, b, rx = node(seed=1), node(seed=2), node()
    fa, fb = a.sign(0, rrep()), b.sign(0, rrep())  # both PC 1, different index
    assert not isinstance(rx.verify(0, fa, MAC1), auth.Rejected)
    assert not isinstance(rx.verify(0, fb, MAC1), auth.Rejected)  # new index (a restart)
    # Replayed from another MAC address: the window is the sender's index, not the MAC.
    assert rx.verify(0, fa, MAC9) == auth.Rejected("replay")
    assert rx.verify(0, fa, MAC1) == auth.Rejected("replay")


def test_forgery_does_not_advance_the_window():
    tx, rx = node(), node()
    good = tx.sign(0, rrep())
    forged = bytearray(tx.sign(0, rrep()))
    forged = forged[:-1] + bytes([forged[-1] ^ 0xFF])
    assert rx.verify(0, bytes(forged), MAC1) == auth.Rejected("bad-mac")
    assert rx.verify(0, good, MAC1) == rrep()  # PC 1 still fresh


def test_wrong_key_same_id_is_a_bad_mac():
    other = auth.Key(1, "hmac-sha256", b"x" * 32)
    assert node(other).verify(0, node(K1).sign(0, rrep()), MAC1) == auth.Rejected("bad-mac")


def test_unknown_key_id_is_rejected_even_when_not_required():
    rx = node(K1)
    assert rx.verify(0, node(K2).sign(0, rrep()), MAC1) == auth.Rejected("unknown-key")
    assert rx.counters["rejected-unknown-key"] == 1


def test_key_roll_over_with_two_keys():
    old_only, both_old_first, both_new_first, new_only = (
        node(K1, seed=1), node(K1, K2, seed=2), node(K2, K1, seed=3), node(K2, seed=4)
    )  # fmt: skip
    # Step 1: every node verifies both, still signs with the old key.
    assert not isinstance(both_old_first.verify(0, old_only.sign(0, rrep()), MAC1), auth.Rejected)
    # Step 2: nodes sign with the new key; a node still at step 1 accepts it.
    assert not isinstance(
        both_old_first.verify(0, both_new_first.sign(0, rrep()), MAC9), auth.Rejected
    )
    # Step 3: the old key is gone: its frames are refused.
    assert new_only.verify(0, old_only.sign(0, rrep()), MAC1) == auth.Rejected("unknown-key")


def test_required_drops_unsigned_control_but_never_data():
    strict, lax = node(required=True), node()
    for make in CONTROL.values():
        assert strict.verify(0, make(), MAC1) == auth.Rejected("unsigned")
        assert lax.verify(0, make(), MAC1) == make()
    assert strict.counters["rejected-unsigned"] == len(CONTROL)
    assert lax.counters["unsigned-accepted"] == len(CONTROL)
    data = dsr_data()
    assert strict.verify(0, data, MAC1) == data  # Source Route only: never signed
    assert node().sign(0, data) == data
    plain = ipv4.build(A1, A3, 17, ipv4.udp(1, 2, b"x", A1, A3))  # AODV-routed data
    assert strict.verify(0, plain, MAC1) == plain and node().sign(0, plain) == plain


def test_resigning_replaces_the_previous_trailer():
    tx, rx = node(), node()
    twice = tx.sign(0, tx.sign(0, dsr_rerr()))
    assert len(twice) == len(tx.sign(0, dsr_rerr()))
    assert rx.verify(0, twice, MAC1) == dsr_rerr()


def test_counter_wrap_draws_a_new_index():
    draws = iter([b"\0\0\0\1", b"\0\0\0\2"])
    tx = auth.Authenticator([K1], random=lambda n: next(draws))
    tx.pc = 0xFFFFFFFF
    tx.sign(0, rrep())
    assert (tx.index, tx.pc) == (2, 1)


def test_neighbour_table_is_bounded():
    rx = auth.Authenticator([K1], max_neighbours=1)  # 1 * MAX_INDICES windows
    for i in range(auth.MAX_INDICES + 2):
        rx.verify(0, node(seed=i).sign(0, rrep()), bytes([2, 0, 0, 0, 0, i]))
    assert len(rx._windows) == auth.MAX_INDICES and rx.counters["neighbour-evicted"] == 2


def test_malformed_trailer_is_rejected_not_raised():
    tx = node(required=True)
    signed = bytearray(tx.sign(0, hello()))
    cut = ipv4.build(A2, IPv4Address("255.255.255.255"), 17,
                     ipv4.udp(49698, 49698, bytes(signed[28:-5]), A2, IPv4Address("255.255.255.255")),
                     ttl=1)  # fmt: skip
    assert tx.verify(0, cut, MAC1) == auth.Rejected("malformed")


def test_keys_load_from_hex_files_and_never_show(tmp_path):
    f = tmp_path / "k1"
    f.write_text(bytes(range(32)).hex() + "\n")
    cfg = auth.AuthConfig.model_validate(
        {"keys": [{"id": 1, "key_file": str(f)}], "required": True}
    )
    a = auth.Authenticator.from_config(cfg, 49698)
    assert a.required and a.signing.secret == bytes(range(32))
    assert bytes(range(32)).hex() not in repr(a.signing)
    (tmp_path / "short").write_text("abcd")
    bad = auth.AuthConfig.model_validate({"keys": [{"id": 1, "key_file": str(tmp_path / "short")}]})
    with pytest.raises(UserError, match=r"auth.keys\[0\].key_file: key 1: 2 bytes"):
        auth.load_keys(bad)
    with pytest.raises(ValueError, match="duplicate key id"):
        auth.AuthConfig.model_validate(
            {"keys": [{"id": 1, "key_file": str(f)}, {"id": 1, "key_file": str(f)}]}
        )


def _frame(packet: bytes) -> bytes:
    return MAC9 + MAC1 + tshark.ETHERTYPE.to_bytes(2, "big") + packet


def test_tshark_decodes_signed_frames_as_aodv_and_dsr():
    tx = node()
    layers = tshark.decode([_frame(tx.sign(0, rrep())), _frame(tx.sign(0, dsr_rerr()))])
    a, d = layers
    assert "aodv" in a and "_ws.malformed" not in a, a.keys()
    assert a["aodv"]["aodv.type"] == "2"
    assert "dsr" in d and "_ws.malformed" not in d, d.keys()
    text = repr(d["dsr"])
    assert "10.42.0.3" in text  # the unreachable node, read past our option
