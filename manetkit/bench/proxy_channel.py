"""``manetkit bench proxy --parts channel``: what the peer channel's tags cost, in process.

Two sessions (:mod:`manetkit.proxy.session`) wired back to back in memory, no sockets:
the initiator's application writes ``megabytes`` MB in 64 KiB reads, every byte goes
through the acceptor and its acknowledgements come back. Three channels side by side:

* ``untagged``: the same sessions with the channel's tags taken out (a subclass of
  :class:`PeerChannel` that seals and checks nothing): the stream's own cost;
* ``ephemeral``: per-session keys from X25519 (the default);
* ``psk``: a mesh key as well.

Reported per variant: CPU seconds (this process, both ends) per MB, microseconds per
16 KiB DATA frame (sent and checked), and bytes on the wire per MB of application data.
"""

from __future__ import annotations

import random
import time
from ipaddress import IPv4Address

from manetkit.proxy import frames as fr
from manetkit.proxy.channel import Keyring, MeshKey, PeerChannel
from manetkit.proxy.session import SendBytes, Session, SessionConfig

CHUNK = 64 * 1024


class Untagged(PeerChannel):
    """The channel with its tags taken out: what the stream costs without them."""

    def seal(self, frame: bytes) -> bytes:
        return frame

    def seal_data(self, offset: int, payload: memoryview) -> tuple[bytes, bytes]:
        return fr.data_header(offset, len(payload)), b""

    def unseal(self, rec: fr.Record) -> str | None:
        return None

    def on_accept(self, rec: fr.Record, epoch: int) -> str | None:
        return None

    def begin(self, rec: fr.Record) -> str | None:
        self.open_transport = isinstance(rec.frame, fr.Open)
        return None


def _sent(s: Session) -> bytes:
    out = bytearray()
    while (ev := s.next_event()) is not None:
        if isinstance(ev, SendBytes):
            out += ev.data
    return bytes(out)


def run_variant(variant: str, megabytes: int) -> dict:
    tokens = random.Random(1).randbytes
    cfg = SessionConfig(partition_timeout=1e9, replay_limit=1 << 30)
    mesh = MeshKey(1, bytes(range(32))) if variant == "psk" else None
    dst = (IPv4Address("10.42.0.2"), 80)
    ini = Session.initiate(0.0, dst, "elfn", cfg, token_bytes=tokens, mesh_key=mesh)
    if variant == "untagged":
        ini.channel = Untagged(True, ini.sid, tokens(32), None)
    ini.new_transport(0.0)
    hello = _sent(ini)
    reader = fr.FrameReader()
    reader.feed(hello)
    rec = reader.next_record()
    assert rec is not None
    keyring = Keyring((mesh,) if mesh else ())
    acc = Session.accept(0.0, rec, cfg, token_bytes=tokens, keyring=keyring)
    if variant == "untagged":
        assert isinstance(rec.frame, fr.Open)
        acc.channel = Untagged(False, acc.sid, tokens(32), None, peer_open=rec.frame)
    acc.new_transport(0.0)
    acc.transport_data(0.0, hello)
    ini.transport_data(0.0, _sent(acc))  # ACCEPT
    data = random.Random(2).randbytes(CHUNK)
    total = megabytes * 1024 * 1024
    wire = delivered = 0
    now = 0.0
    t0 = time.process_time()
    while delivered < total:
        now += 0.001
        ini.app_data(now, data)
        out = _sent(ini)
        wire += len(out)
        acc.transport_data(now, out)
        while (ev := acc.next_event()) is not None:
            if isinstance(ev, SendBytes):
                ini.transport_data(now, ev.data)
            elif hasattr(ev, "data"):
                delivered += len(ev.data)  # DeliverData
        _sent(ini)  # nothing to carry (no ACK of our own)
    cpu = time.process_time() - t0
    mb = total / 1e6
    frames = total / fr.MAX_DATA
    return {
        "variant": variant,
        "megabytes": megabytes,
        "cpu_s_per_mb": round(cpu / mb, 5),
        "us_per_16k_frame": round(cpu / frames * 1e6, 1),
        "wire_bytes_per_mb": round(wire / mb),
        "app_mb_per_cpu_s": round(mb / cpu, 1),
    }


def bench_channel(megabytes: int) -> list[dict]:
    return [run_variant(v, megabytes) for v in ("untagged", "ephemeral", "psk")]
